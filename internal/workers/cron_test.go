package workers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/packages"
)

// readCron reads a process worker's manifest with the given cron key.
func readCron(t *testing.T, cron string) (Manifest, error) {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte("name: a\ncommand: [/bin/true]\ntimeout: 7s\ncron:\n"+cron), 0o644)
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	md, err := packages.ReadMetadata(root, ".")
	if err != nil {
		t.Fatal(err)
	}
	return ReadManifest(md)
}

func TestCronManifest(t *testing.T) {
	m, err := readCron(t, "  - {schedule: \"*/5 * * * *\", path: /tasks/cleanup}\n  - {name: nightly, schedule: \"@daily\", path: /n, method: get, timeout: 2s, timezone: Europe/Paris}\n  - {schedule: \"@every 30s\", path: /e}\n")
	if err != nil {
		t.Fatal(err)
	}
	first, nightly, every := m.Cron[0], m.Cron[1], m.Cron[2]
	if first.Name != "0" || first.Method != "POST" || first.Timeout != Duration(7*time.Second) || nightly.Name != "nightly" || nightly.Method != "GET" || nightly.Timeout != Duration(2*time.Second) {
		t.Fatalf("triggers = %+v", m.Cron)
	}
	at := time.Date(2026, 12, 2, 10, 2, 0, 0, time.UTC)
	if got := first.Next(at); !got.Equal(time.Date(2026, 12, 2, 10, 5, 0, 0, time.UTC)) {
		t.Errorf("*/5 after 10:02 = %v", got)
	}
	// Midnight in Paris is 23:00 UTC in December.
	if got := nightly.Next(at); !got.Equal(time.Date(2026, 12, 2, 23, 0, 0, 0, time.UTC)) {
		t.Errorf("@daily in Europe/Paris after 10:02 UTC = %v", got.UTC())
	}
	if got := every.Next(at); !got.Equal(at.Add(30 * time.Second)) {
		t.Errorf("@every 30s after 10:02 = %v", got)
	}
}

func TestCronManifestRefused(t *testing.T) {
	for _, c := range []struct{ cron, want string }{
		{"  - {schedule: \"61 * * * *\", path: /x}\n", "cron[0]: schedule \"61 * * * *\" is not valid"},
		{"  - {schedule: \"@hourly\", path: /x}\n  - {name: bad, schedule: \"every minute\", path: /x}\n", "cron[1] (bad): schedule"},
		{"  - {schedule: \"* * * * * *\", path: /x}\n", "cron[0]: schedule"},
		{"  - {schedule: \"@every 100ms\", path: /x}\n", "at least 1s"},
		{"  - {schedule: \"@hourly\"}\n", "cron[0]: path is missing"},
		{"  - {schedule: \"@hourly\", path: tasks}\n", "cron[0]: path \"tasks\" must be a path"},
		{"  - {schedule: \"@hourly\", path: /x, method: TRACE}\n", "cron[0]: method"},
		{"  - {schedule: \"@hourly\", path: /x, timezone: Mars/Olympus}\n", "cron[0]: timezone"},
		{"  - {schedule: \"CRON_TZ=UTC @hourly\", path: /x}\n", "timezone key"},
		{"  - {name: a, schedule: \"@hourly\", path: /x}\n  - {name: a, schedule: \"@daily\", path: /y}\n", "cron[1] (a): the name \"a\" is taken"},
		{"  - \"@hourly /x\"\n", "must be a mapping"},
		{"  - {}\n", "schedule is missing"},
	} {
		if _, err := readCron(t, c.cron); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v; want an error with %q", c.cron, err, c.want)
		}
	}
}

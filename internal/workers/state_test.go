package workers

import (
	"io/fs"
	"testing"

	"github.com/caddy-runtime/runtime/packages"
)

// manifestVersion is an enabled version whose manifest.yaml is manifest.
func manifestVersion(t *testing.T, version, manifest string) packages.Version {
	t.Helper()
	md, err := packages.ReadMetadataFiles(func(name string) ([]byte, error) {
		if name == packages.ManifestYAML {
			return []byte("name: app\nversion: " + version + "\n" + manifest), nil
		}
		return nil, fs.ErrNotExist
	})
	if err != nil {
		t.Fatal(err)
	}
	return packages.Version{Version: version, Enabled: true, Metadata: md}
}

func TestStateOf(t *testing.T) {
	process := func(v string) packages.Version { return manifestVersion(t, v, "command: [/bin/true]\n") }
	static := manifestVersion(t, "1.0.0", "")
	off := process("1.0.0")
	off.Enabled = false
	unit := func(vs ...packages.Version) packages.Unit { return packages.Unit{Name: "app", Versions: vs} }
	failed := []Failure{{Version: "1.0.0", Reason: "it exited before listening on PORT"}}
	for _, tt := range []struct {
		name      string
		u         packages.Unit
		a         Activation
		procs     map[string]ProcState
		state     WorkerState
		served    string
		activated bool
	}{
		{"a static version has no check", unit(static), Activation{}, nil, StateServing, "1.0.0", true},
		{"a process version that passed", unit(process("1.0.0")), Activation{Active: "1.0.0"}, nil, StateServing, "1.0.0", true},
		{"a first version that failed its check", unit(process("1.0.0")), Activation{Failed: failed}, nil, StateFailing, "1.0.0", false},
		{"a failed version whose process a request started", unit(process("1.0.0")), Activation{Failed: failed},
			map[string]ProcState{"app@1.0.0": Running}, StateFailing, "1.0.0", false},
		{"a failed version crash-looping", unit(process("1.0.0")), Activation{Failed: failed},
			map[string]ProcState{"app@1.0.0": CrashLooping}, StateCrashLooping, "1.0.0", false},
		{"an active version crash-looping", unit(process("1.0.0")), Activation{Active: "1.0.0"},
			map[string]ProcState{"app@1.0.0": CrashLooping}, StateCrashLooping, "1.0.0", true},
		{"a newer version failed: the older serves", unit(process("1.0.0"), process("2.0.0")),
			Activation{Active: "1.0.0", Failed: []Failure{{Version: "2.0.0"}}}, nil, StateServing, "1.0.0", true},
		{"the first version being checked", unit(process("1.0.0")), Activation{Checking: []string{"1.0.0"}},
			map[string]ProcState{"app@1.0.0": Starting}, StateNotStarted, "1.0.0", false},
		{"found on disk, never checked, no process", unit(process("1.0.0")), Activation{}, nil, StateNotStarted, "1.0.0", true},
		{"found on disk, its process runs", unit(process("1.0.0")), Activation{},
			map[string]ProcState{"app@1.0.0": Running}, StateServing, "1.0.0", true},
		{"nothing enabled", unit(off), Activation{Active: "1.0.0"}, nil, StateDisabled, "", false},
	} {
		state, served, activated := StateOf(tt.u, tt.a, tt.procs)
		if state != tt.state || served != tt.served || activated != tt.activated {
			t.Errorf("%s: StateOf = %s, %q, %v; want %s, %q, %v", tt.name, state, served, activated, tt.state, tt.served, tt.activated)
		}
	}
}

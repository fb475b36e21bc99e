package workers

import (
	"bufio"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/internal/testkit"
)

// TestBunForwarderConnectFails: the Bun loader's forwarder, handed a listener as descriptor 3,
// tries a connection to Bun.serve that failed once more, so a failure now and then costs no
// answer; one that fails again closes the client's connection and says why on standard error.
// The worker's module replaces Bun.connect, which the forwarder calls once it is imported.
func TestBunForwarderConnectFails(t *testing.T) {
	bun := testkit.BunBinary(t)
	loaders, err := (&JSHost{Dir: t.TempDir()}).loaderDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, fails string // which calls of Bun.connect fail
		answered    bool
	}{
		{"every other", "calls % 2 === 1", true},
		{"every one", "true", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			entry := filepath.Join(dir, "index.ts")
			module := `const connect = Bun.connect;
let calls = 0;
Bun.connect = (options) => (calls++, ` + tc.fails + `) ? Promise.reject(new Error("refused on purpose")) : connect(options);
export default { fetch: () => new Response("passed on") };
`
			if err := os.WriteFile(entry, []byte(module), 0o644); err != nil {
				t.Fatal(err)
			}
			ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "w.sock"), Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			fd, err := ln.File()
			if err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			cmd := exec.Command(bun, "--no-env-file", filepath.Join(loaders, "bun.mjs"), entry)
			cmd.Env = append(os.Environ(), "LISTEN_FDS=1", "NO_COLOR=1")
			cmd.ExtraFiles = []*os.File{fd}
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			fd.Close()
			defer func() { cmd.Process.Kill(); cmd.Wait() }()

			// One connection after another, each its own call of Bun.connect.
			for i := range 4 {
				resp, err := getOnce(ln.Addr().String())
				switch {
				case tc.answered && (err != nil || resp != "passed on"):
					t.Fatalf("connection %d: %q, %v; want the worker's answer", i, resp, err)
				case !tc.answered && err == nil:
					t.Fatalf("connection %d answered %q; want it closed", i, resp)
				}
			}
			if !tc.answered {
				cmd.Process.Kill()
				cmd.Wait()
				if !strings.Contains(stderr.String(), "could not pass a connection on to Bun.serve") || !strings.Contains(stderr.String(), "refused on purpose") {
					t.Errorf("the loader's standard error does not say why: %q", stderr.String())
				}
			}
		})
	}
}

// getOnce sends GET / on a new connection to the unix socket at path, which closes after it,
// and returns the answer's body.
func getOnce(path string) (string, error) {
	conn, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte("GET / HTTP/1.1\r\nHost: w\r\nConnection: close\r\n\r\n")); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var body strings.Builder
	_, err = bufio.NewReader(resp.Body).WriteTo(&body)
	return body.String(), err
}

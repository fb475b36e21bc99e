package secrets_test

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/internal/secrets"
	"github.com/caddy-runtime/runtime/internal/workers"
)

func newTestKey(t *testing.T) (*secrets.Key, string) {
	t.Helper()
	raw := make([]byte, secrets.KeySize)
	rand.Read(raw)
	text := base64.StdEncoding.EncodeToString(raw)
	k, err := secrets.ParseKey(text)
	if err != nil {
		t.Fatal(err)
	}
	return k, text
}

func TestSealOpen(t *testing.T) {
	k, text := newTestKey(t)
	const value = "s3cr3t-value"
	sealed, err := k.Seal("@team/app", "API_TOKEN", value)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(sealed, value) || strings.Contains(sealed, base64.StdEncoding.EncodeToString([]byte(value))) {
		t.Fatalf("sealed value shows the plaintext: %s", sealed)
	}
	again, _ := k.Seal("@team/app", "API_TOKEN", value)
	if again == sealed {
		t.Fatal("two seals of one value are equal: the nonce is not random")
	}
	if got, err := k.Open("@team/app", "API_TOKEN", k.ID(), sealed); err != nil || got != value {
		t.Fatalf("Open = %q, %v", got, err)
	}
	// The same key, read from another spelling of its text, opens it too.
	raw, _ := base64.StdEncoding.DecodeString(text)
	same, err := secrets.ParseKey(base64.RawURLEncoding.EncodeToString(raw))
	if err != nil || same.ID() != k.ID() {
		t.Fatalf("the key in URL base64: %v, id %s, want %s", err, same.ID(), k.ID())
	}
	other, _ := newTestKey(t)
	for _, tc := range []struct {
		name                string
		key                 *secrets.Key
		worker, secret, kid string
		sealed              string
		want                string
	}{
		{"another worker", k, "@team/other", "API_TOKEN", k.ID(), sealed, "moved to another worker"},
		{"another name", k, "@team/app", "OTHER", k.ID(), sealed, "moved to another worker or name"},
		{"another key", other, "@team/app", "API_TOKEN", k.ID(), sealed, "sealed under another secrets key"},
		{"another key claiming this id", other, "@team/app", "API_TOKEN", other.ID(), sealed, "does not open"},
		{"damaged", k, "@team/app", "API_TOKEN", k.ID(), sealed[:len(sealed)-4] + "AAAA", "does not open"},
		{"not base64", k, "@team/app", "API_TOKEN", k.ID(), "%%%", "damaged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.key.Open(tc.worker, tc.secret, tc.kid, tc.sealed)
			if err == nil || !strings.Contains(err.Error(), tc.want) || got != "" {
				t.Fatalf("Open = %q, %v; want an error saying %q", got, err, tc.want)
			}
			if strings.Contains(err.Error(), value) {
				t.Fatalf("the error shows the value: %v", err)
			}
		})
	}
	if _, err := other.Open("@team/app", "API_TOKEN", k.ID(), sealed); !errors.Is(err, secrets.ErrOtherKey) {
		t.Fatalf("another key's value: %v, want secrets.ErrOtherKey", err)
	}
}

func TestParseKeyRefusals(t *testing.T) {
	short := base64.StdEncoding.EncodeToString(make([]byte, 16))
	for _, tc := range []struct{ name, text, want string }{
		{"empty", "", "is empty"},
		{"not base64", "correct horse battery staple, not base64!!", "is not base64"},
		{"16 bytes", short, "is 16 bytes, not 32"},
		{"a passphrase that happens to be base64", "passwordpassword", "is 12 bytes, not 32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := secrets.ParseKey(tc.text)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "openssl rand -base64 32") {
				t.Fatalf("secrets.ParseKey = %v, want %q and the openssl hint", err, tc.want)
			}
			if tc.text != "" && strings.Contains(err.Error(), tc.text) {
				t.Fatalf("the error shows the key: %v", err)
			}
		})
	}
}

func TestCheckName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"API_TOKEN", true}, {"_x1", true}, {"db_url", true},
		{"", false}, {"1ABC", false}, {"A-B", false}, {"A B", false}, {"A=B", false}, {strings.Repeat("A", 129), false},
		// Set by the runtime for every process worker (workers.RuntimeVariable).
		{"PORT", false}, {"HOST", false}, {"TMPDIR", false}, {"PATH", false}, {"HOME", false},
		{"LISTEN_FDS", false}, {"LISTEN_PID", false}, {"LISTEN_FDNAMES", false},
		// Set by the runtime for every WebAssembly instance (CGI), or by a visitor's header line.
		{"HTTP_AUTHORIZATION", false}, {"HTTP_X_TOKEN", false}, {"REMOTE_ADDR", false}, {"REMOTE_USER", false}, {"SERVER_NAME", false},
		{"PATH_INFO", false}, {"QUERY_STRING", false}, {"CONTENT_TYPE", false}, {"GATEWAY_INTERFACE", false}, {"AUTH_TYPE", false},
		{"SERVER_PORT", false}, {"http_proxy", true}, {"HTTPS_PROXY", true}, {"REMOTE", true}, {"SERVER_URL", true},
	} {
		err := secrets.CheckName(tc.name, workers.RuntimeVariable)
		if (err == nil) != tc.ok {
			t.Errorf("secrets.CheckName(%q) = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

func TestCheckValue(t *testing.T) {
	if err := secrets.CheckValue(strings.Repeat("x", secrets.MaxValueLength)); err != nil {
		t.Errorf("a value at the limit: %v", err)
	}
	if err := secrets.CheckValue(""); err != nil {
		t.Errorf("an empty value: %v", err)
	}
	for _, v := range []string{strings.Repeat("x", secrets.MaxValueLength+1), "a\x00b"} {
		if err := secrets.CheckValue(v); err == nil {
			t.Errorf("secrets.CheckValue(%q…) = nil", v[:3])
		}
	}
}

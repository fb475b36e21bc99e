// Package secrets seals the values of workers' secrets for the key store: AES-256-GCM under
// the runtime's secrets key, with the worker and the secret's name bound as associated data,
// so a sealed value copied to another worker or name does not open. It also says which names
// a secret may have: environment variable names the runtime does not set itself. It imports
// none of the runtime's packages, so the settings can check a key with it.
package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// KeySize is the size of a secrets key: 32 bytes, AES-256.
const KeySize = 32

// GenerateHint tells how to make a secrets key.
const GenerateHint = "generate one with: openssl rand -base64 32"

// Key is a secrets key, with its id: a digest that names it in every value it seals, so a
// value sealed under another key is told apart from a damaged one, and rotation knows which
// values it has re-sealed.
type Key struct {
	id   string
	aead cipher.AEAD
}

// ParseKey reads a key written in base64 (standard or URL alphabet, padded or not): 32 bytes,
// as openssl rand -base64 32 prints them. The error never holds the text.
func ParseKey(text string) (*Key, error) {
	text = strings.TrimSpace(text)
	var raw []byte
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(text); err == nil {
			raw = b
			break
		}
	}
	switch {
	case text == "":
		return nil, errors.New("is empty; " + GenerateHint)
	case raw == nil:
		return nil, errors.New("is not base64; it must be 32 random bytes in base64: " + GenerateHint)
	case len(raw) != KeySize:
		return nil, fmt.Errorf("is %d bytes, not %d; it must be 32 random bytes in base64: %s", len(raw), KeySize, GenerateHint)
	}
	return newKey(raw)
}

func newKey(raw []byte) (*Key, error) {
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(append([]byte("runtime secrets key id\x00"), raw...))
	return &Key{id: "k" + hex.EncodeToString(sum[:6]), aead: aead}, nil
}

// ID names the key; it reveals nothing of it.
func (k *Key) ID() string { return k.id }

// associated is the data a sealed value is bound to: its worker and its name.
func associated(worker, name string) []byte {
	return []byte("runtime secret\x00" + worker + "\x00" + name)
}

// Seal seals value as worker's secret name, in base64: a random nonce, then the ciphertext.
func (k *Key) Seal(worker, name, value string) (string, error) {
	nonce := make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	sealed := k.aead.Seal(nonce, nonce, []byte(value), associated(worker, name))
	return base64.StdEncoding.EncodeToString(sealed), nil
}

// ErrOtherKey means a value was sealed under another key than the one given.
var ErrOtherKey = errors.New("sealed under another secrets key")

// Open opens worker's secret name, sealed under the key keyID names. The error never holds
// the value.
func (k *Key) Open(worker, name, keyID, sealed string) (string, error) {
	if keyID != k.id {
		return "", fmt.Errorf("%w (id %s; this key's id is %s)", ErrOtherKey, keyID, k.id)
	}
	raw, err := base64.StdEncoding.DecodeString(sealed)
	if err != nil || len(raw) < k.aead.NonceSize() {
		return "", errors.New("the sealed value is damaged")
	}
	n := k.aead.NonceSize()
	plain, err := k.aead.Open(nil, raw[:n], raw[n:], associated(worker, name))
	if err != nil {
		return "", errors.New("the sealed value does not open: it is damaged, or was moved to another worker or name")
	}
	return string(plain), nil
}

// Limits on a secret.
const (
	MaxNameLength  = 128
	MaxValueLength = 32 << 10
	MaxPerWorker   = 100
)

var namePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// CheckName refuses a name that is not an environment variable name, or one the runtime sets
// for a worker itself, as setByRuntime tells (workers.RuntimeVariable).
func CheckName(name string, setByRuntime func(string) bool) error {
	switch {
	case name == "":
		return errors.New("a secret needs a name")
	case len(name) > MaxNameLength:
		return fmt.Errorf("a secret's name is at most %d characters", MaxNameLength)
	case !namePattern.MatchString(name):
		return fmt.Errorf("%q is not an environment variable name: letters, digits and _, not starting with a digit", name)
	case setByRuntime(name):
		return fmt.Errorf("%s is set by the runtime for a worker (a process worker's PORT, HOST, TMPDIR, PATH, HOME and LISTEN_*, "+
			"a WebAssembly worker's CGI variables such as HTTP_*, SERVER_NAME, REMOTE_ADDR and PATH_INFO); choose another name", name)
	}
	return nil
}

// CheckValue refuses a value that cannot be an environment variable's. The error never holds
// the value.
func CheckValue(value string) error {
	switch {
	case len(value) > MaxValueLength:
		return fmt.Errorf("a secret's value is at most %d bytes", MaxValueLength)
	case strings.ContainsRune(value, 0):
		return errors.New("a secret's value cannot hold a NUL byte, which ends an environment variable")
	}
	return nil
}

// Package packagestore keeps uploaded archives (workers and plugins) in an object store that
// several instances of the runtime share: each archive exactly as received, content-addressed
// by its SHA-256 under <prefix>/sha256/<hex>, written once and never changed. Readers verify
// what they read against the name, so a damaged or altered object is never installed.
package packagestore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
	"time"
)

// MaxSize is the largest archive a store takes: S3 accepts at most 5 GiB in one PUT, and the
// store sends each archive in one signed PUT (see S3.Put).
const MaxSize int64 = 5 << 30

// RefreshAfter is the age beyond which Put sends an archive the store already has again, so
// that its time is now. A collector (reconcile.Collect) deletes an object no row refers to
// once its time is older than a grace period, and an upload writes its row only after Put
// returns: without the refresh, an archive uploaded again long after its rows were removed
// could be deleted by a collection that read the rows just before the new row was written.
// An hour is far within the collector's grace period (a day), so an object Put left as it
// was is never old enough to collect before its row is written; and the archives sent
// again are only the ones uploaded again an hour or more after they were first.
const RefreshAfter = time.Hour

// Store is an object store of archives named by their SHA-256.
type Store interface {
	// Put stores the size bytes of r as the object of sum. An object already present with
	// that size is not sent again, unless its last change is older than RefreshAfter: then
	// it is sent again so its time is now. r must yield exactly the archive whose SHA-256 is sum: the
	// last bytes are withheld from the store when it does not (an ErrCorrupt), so no object
	// is ever stored under the wrong name. A file (an io.ReadSeeker) is sent again when the
	// store fails on the way; any other reader once.
	Put(ctx context.Context, sum [32]byte, size int64, r io.Reader) error
	// Open reads the object of sum, which must be size bytes long (the desired state records
	// each archive's size beside its sha256). The reader verifies as it
	// goes: a read that would complete different bytes fails with an ErrCorrupt instead, so
	// callers write to a temporary file and trust it only after a clean io.EOF. A missing
	// object is an ErrNotFound.
	Open(ctx context.Context, sum [32]byte, size int64) (io.ReadCloser, error)
	// Has reports whether the object of sum is present.
	Has(ctx context.Context, sum [32]byte) (bool, error)
	// Stat returns the object of sum as List would show it now; a missing object is an
	// ErrNotFound.
	Stat(ctx context.Context, sum [32]byte) (Object, error)
	// Delete removes the object of sum; a missing object is no error.
	Delete(ctx context.Context, sum [32]byte) error
	// List yields every object of the store, for a collector of the ones no row refers to.
	List(ctx context.Context) iter.Seq2[Object, error]
	// Check tells at start-up whether the store can be used: the bucket exists and the
	// credentials are accepted, with an error that says which is wrong.
	Check(ctx context.Context) error
}

// Object is an object of the store as listed.
type Object struct {
	Sum      [32]byte
	Size     int64
	Modified time.Time
}

// The classes of a store's errors; match them with errors.Is. An error of none of them is a
// request the store refused for another reason, named in its message.
var (
	// ErrNotFound: the object is not in the store.
	ErrNotFound = errors.New("not in the package store")
	// ErrCorrupt: bytes read do not match their name (a *CorruptError says how).
	ErrCorrupt = errors.New("the archive does not match its sha256")
	// ErrUnavailable: the store cannot be reached, timed out or failed (5xx); the request may
	// work later, so the caller answers 503.
	ErrUnavailable = errors.New("the package store is unavailable")
	// ErrDenied: the store refused the credentials or their permissions.
	ErrDenied = errors.New("the package store refused the credentials")
	// ErrNoBucket: the bucket does not exist.
	ErrNoBucket = errors.New("the package store's bucket does not exist")
	// ErrTooLarge: the archive is larger than MaxSize.
	ErrTooLarge = errors.New("the archive is too large for the package store")
)

// CorruptError is an archive whose bytes are not the ones its name says.
type CorruptError struct {
	Want, Got         [32]byte // Got is zero when the length already differs
	WantSize, GotSize int64    // GotSize is at least the bytes read; more may have followed
}

func (e *CorruptError) Error() string {
	if e.GotSize != e.WantSize {
		return fmt.Sprintf("%v: sha256 %x should be %d bytes, read %d", ErrCorrupt, e.Want, e.WantSize, e.GotSize)
	}
	return fmt.Sprintf("%v: want sha256 %x, read sha256 %x", ErrCorrupt, e.Want, e.Got)
}

func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// ParseSum reads a SHA-256 written in hex, as uploads report it.
func ParseSum(s string) ([32]byte, error) {
	var sum [32]byte
	if len(s) != 2*len(sum) {
		return sum, fmt.Errorf("sha256 %q is not 64 hex digits", s)
	}
	if _, err := hex.Decode(sum[:], []byte(s)); err != nil {
		return sum, fmt.Errorf("sha256 %q is not 64 hex digits", s)
	}
	return sum, nil
}

// keys names objects under a prefix: <prefix>/sha256/<hex>, or sha256/<hex> without one.
type keys string

// newKeys trims the prefix's slashes, so "a", "/a/" and "a/" name the same folder.
func newKeys(prefix string) keys {
	if p := strings.Trim(prefix, "/"); p != "" {
		return keys(p + "/sha256/")
	}
	return "sha256/"
}

func (k keys) of(sum [32]byte) string { return string(k) + hex.EncodeToString(sum[:]) }

// sum reads the name of one of the store's objects back; other keys under the prefix (not
// ours, or a folder of a longer name) do not parse.
func (k keys) sum(key string) ([32]byte, bool) {
	h, ok := strings.CutPrefix(key, string(k))
	if !ok || strings.ToLower(h) != h {
		return [32]byte{}, false
	}
	sum, err := ParseSum(h)
	return sum, err == nil
}

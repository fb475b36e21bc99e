package packagestore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestVerifier reads streams through the verifier a few bytes at a time: the archive named
// reads whole to a clean EOF; any other stream fails with an ErrCorrupt naming both hashes or
// both lengths, and the read that would have completed it returns no bytes, so a body that
// does not match is never delivered whole (a longer one delivers the archive, then fails).
func TestVerifier(t *testing.T) {
	t.Parallel()
	archive := bytes.Repeat([]byte("archive "), 1000)
	sum := sha256.Sum256(archive)
	flipped := bytes.Clone(archive)
	flipped[len(flipped)-1] ^= 1
	for _, tc := range []struct {
		name   string
		stream []byte
		want   string // in the error; "" for a clean read
		whole  bool   // the archive's bytes are all delivered, but never a clean EOF
	}{
		{"the archive", archive, "", false},
		{"last byte changed", flipped, "read sha256 ", false},
		{"first byte changed", append([]byte("A"), archive[1:]...), "read sha256 ", false},
		{"shorter", archive[:len(archive)-1], "should be 8000 bytes, read 7999", false},
		{"longer", append(bytes.Clone(archive), 'x'), "should be 8000 bytes, read 8001", true},
		{"empty", nil, "should be 8000 bytes, read 0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Seven bytes a read: the end of the stream falls inside a read.
			v := newVerifier(iotest.HalfReader(bytes.NewReader(tc.stream)), sum, int64(len(archive)))
			got, err := io.ReadAll(io.LimitReader(v, 1<<20))
			if tc.want == "" {
				if err != nil || !bytes.Equal(got, archive) {
					t.Fatalf("read %d bytes, %v; want the archive", len(got), err)
				}
				return
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "sha256 "+hex.EncodeToString(sum[:])) {
				t.Fatalf("err = %v, want an ErrCorrupt naming %x and %q", err, sum, tc.want)
			}
			if tc.whole {
				if !bytes.Equal(got, archive) {
					t.Fatalf("read %d bytes, want the archive's before the error", len(got))
				}
			} else if len(got) >= len(archive) {
				t.Fatalf("%d bytes were delivered, want fewer than the archive's %d", len(got), len(archive))
			}
			if n, again := v.Read(make([]byte, 10)); n != 0 || !errors.Is(again, ErrCorrupt) {
				t.Fatalf("a read after the verdict = %d, %v", n, again)
			}
		})
	}
}

// TestSeekVerifier reads the archive through the seekable verifier as the S3 client does: it
// learns the length by seeking to the end (the size, whatever follows in the file), reads a
// part, rewinds and reads it all for a retry, twice; bytes read again are hashed once and the
// stream still ends cleanly. The stream is the size bytes from where the reader stood,
// whatever surrounds them.
func TestSeekVerifier(t *testing.T) {
	t.Parallel()
	archive := []byte(strings.Repeat("0123456789", 100))
	sum := sha256.Sum256(archive)
	file := bytes.NewReader(append(append([]byte("head"), archive...), "tail"...))
	file.Seek(4, io.SeekStart)
	v, err := newSeekVerifier(file, sum, int64(len(archive)))
	if err != nil {
		t.Fatal(err)
	}
	if end, err := v.Seek(0, io.SeekEnd); err != nil || end != int64(len(archive)) {
		t.Fatalf("seek to the end = %d, %v; want %d", end, err, len(archive))
	}
	// A retry: the first attempt sent a part, then the body is read whole, twice.
	v.Seek(0, io.SeekStart)
	if _, err := io.ReadFull(v, make([]byte, 300)); err != nil {
		t.Fatal(err)
	}
	for pass := range 2 {
		if at, err := v.Seek(0, io.SeekStart); err != nil || at != 0 {
			t.Fatalf("rewind = %d, %v", at, err)
		}
		if got, err := io.ReadAll(iotest.HalfReader(v)); err != nil || !bytes.Equal(got, archive) {
			t.Fatalf("pass %d: read %d bytes, %v; want the archive", pass, len(got), err)
		}
	}
	// A seek past what was verified cannot be read from: those bytes were never hashed.
	w, _ := newSeekVerifier(bytes.NewReader(archive), sum, int64(len(archive)))
	w.Seek(10, io.SeekStart)
	if _, err := w.Read(make([]byte, 10)); err == nil {
		t.Fatal("a read past unverified bytes succeeded")
	}
}

package packagestore

import (
	"crypto/sha256"
	"errors"
	"hash"
	"io"
)

// verifier passes the size bytes of the archive whose SHA-256 is want through, hashing them,
// and fails the read that would complete any other stream: the bytes of that read are
// withheld, so a request body that does not match is never sent whole (the store then keeps
// nothing) and a reader of an altered object never reaches a clean io.EOF.
type verifier struct {
	r      io.Reader
	want   [32]byte
	size   int64
	h      hash.Hash
	pos    int64 // the position in the stream
	hashed int64 // the stream's first hashed bytes went into h
	sound  bool  // the whole stream was hashed and matched
	window bool  // the stream is the first size bytes of r (a file), not all of r
	err    error // the verdict, once the stream is known to be wrong
}

func newVerifier(r io.Reader, want [32]byte, size int64) *verifier {
	return &verifier{r: r, want: want, size: size, h: sha256.New()}
}

func (v *verifier) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if v.pos > v.hashed {
		// Only a seek past the bytes hashed so far gets here; what it skipped is unverified.
		return 0, errors.New("reading past unverified bytes of the archive")
	}
	if v.window && v.pos >= v.size {
		return 0, io.EOF
	}
	// Read at most one byte past the end, to see a stream longer than its size.
	limit := v.size + 1
	if v.window {
		limit = v.size
	}
	if rest := limit - v.pos; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := v.r.Read(p)
	end := v.pos + int64(n)
	if end > v.hashed {
		v.h.Write(p[v.hashed-v.pos : n])
		v.hashed = end
	}
	switch {
	case end > v.size:
		return v.fail(&CorruptError{Want: v.want, WantSize: v.size, GotSize: end})
	case end == v.size && !v.sound:
		var got [32]byte
		if v.h.Sum(got[:0]); got != v.want {
			return v.fail(&CorruptError{Want: v.want, Got: got, WantSize: v.size, GotSize: end})
		}
		v.sound = true
	case err == io.EOF && end < v.size:
		return v.fail(&CorruptError{Want: v.want, WantSize: v.size, GotSize: end})
	}
	v.pos = end
	return n, err
}

// fail withholds the bytes of the read that showed the stream wrong, and every read after it.
func (v *verifier) fail(err error) (int, error) {
	v.err = err
	return 0, err
}

// Close closes the reader underneath when it is a Closer (the body of a GET).
func (v *verifier) Close() error {
	if c, ok := v.r.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// seekVerifier is a verifier over a seekable stream (a file), which the S3 client rewinds to
// send again when it retries a PUT; bytes read again are not hashed again. The stream is
// the size bytes from where the file stood: what follows is not the archive's.
type seekVerifier struct {
	*verifier
	start int64 // the offset of the stream's start in the reader underneath
}

func newSeekVerifier(rs io.ReadSeeker, want [32]byte, size int64) (*seekVerifier, error) {
	start, err := rs.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, err
	}
	v := newVerifier(rs, want, size)
	v.window = true
	return &seekVerifier{verifier: v, start: start}, nil
}

// Seek moves within the stream, which ends after size bytes whatever follows in the reader
// underneath (the S3 client learns the body's length by seeking to its end).
func (v *seekVerifier) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		offset += v.start
	case io.SeekEnd:
		offset, whence = v.start+v.size+offset, io.SeekStart
	}
	abs, err := v.r.(io.Seeker).Seek(offset, whence)
	if err != nil {
		return 0, err
	}
	v.pos = abs - v.start
	return v.pos, nil
}

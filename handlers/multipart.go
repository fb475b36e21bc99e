package handlers

import (
	"bufio"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"

	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/packages"
)

// uploadFraming is what a multipart body may hold beyond its files: boundaries, part headers
// and short fields.
const uploadFraming = 1 << 20

// multipartUpload reads an upload's multipart/form-data body as a stream, part by part, for
// package uploads and file manager uploads alike. The body is bounded by max_upload_size plus
// the framing; every read error is the API's: over the bound is PAYLOAD_TOO_LARGE naming
// max_upload_size, anything else a malformed body (400 with the caller's code).
type multipartUpload struct {
	mr    *multipart.Reader
	limit int64  // max_upload_size; 0 for none
	code  string // the error code of a malformed body
}

// readMultipart starts reading r's body as an upload of at most limit bytes of files (0: no
// limit). A body that is not multipart/form-data is refused with code and usage, which says
// what to send.
func readMultipart(w http.ResponseWriter, r *http.Request, limit int64, code, usage string) (*multipartUpload, error) {
	mediaType, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mediaType != "multipart/form-data" {
		return nil, envelope.Errorf(http.StatusBadRequest, code, "%s", usage)
	}
	if limit > 0 {
		r.Body = http.MaxBytesReader(w, r.Body, limit+uploadFraming)
	}
	u := &multipartUpload{limit: limit, code: code}
	boundary, ok := params["boundary"]
	if !ok {
		return nil, u.readError(http.ErrMissingBoundary)
	}
	// The multipart reader reads 4 KiB at a time; a larger buffer under it turns those into
	// few large reads of the connection while an archive streams in.
	u.mr = multipart.NewReader(bufio.NewReaderSize(r.Body, uploadBuffer), boundary)
	return u, nil
}

// uploadBuffer is the size of the buffer an upload's body is read through.
const uploadBuffer = 256 << 10

// next returns the next part, or io.EOF after the last one.
func (u *multipartUpload) next() (*multipart.Part, error) {
	part, err := u.mr.NextPart()
	if err == io.EOF {
		return nil, err
	}
	if err != nil {
		return nil, u.readError(err)
	}
	return part, nil
}

// body reads a part whose consumer (the catalog unpacking an archive) reports read errors its
// own way: only a body over the limit becomes the upload limit's error.
func (u *multipartUpload) body(part io.Reader) io.Reader {
	return partReader{part, u.limit}
}

// readError reports a failure reading the body: over the body limit, or malformed. An API
// error passes unchanged.
func (u *multipartUpload) readError(err error) error {
	var tooLarge *http.MaxBytesError
	var apiErr *envelope.Error
	switch {
	case errors.As(err, &apiErr):
		return err
	case errors.As(err, &tooLarge):
		return packages.UploadTooLarge(u.limit)
	}
	return envelope.Errorf(http.StatusBadRequest, u.code, "the multipart body is malformed: %v", err)
}

// partReader is a part read through multipartUpload.body.
type partReader struct {
	r     io.Reader
	limit int64
}

func (p partReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
		err = packages.UploadTooLarge(p.limit)
	}
	return n, err
}

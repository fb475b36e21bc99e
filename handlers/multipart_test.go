package handlers

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/packages"
)

// TestMultipartUpload checks the errors of the multipart reader package and file manager
// uploads share: not multipart, malformed, and over max_upload_size while reading a part or
// between parts.
func TestMultipartUpload(t *testing.T) {
	const limit = 16
	big := strings.Repeat("x", limit+uploadFraming)
	tests := []struct {
		name        string
		contentType string
		body        string
		status      int
		code        string
		message     string
	}{
		{"not multipart", "application/json", "{}", 400, "CODE", "send a form"},
		{"no boundary", "multipart/form-data", "", 400, "CODE", "malformed"},
		{"malformed", "multipart/form-data; boundary=b", "--b\r\nno headers end", 400, "CODE", "malformed"},
		{"part over the limit", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\n" + big, 413, packages.CodeTooLarge, packages.UploadSetting},
		{"framing over the limit", "multipart/form-data; boundary=b", "--b\r\nX-Pad: " + big, 413, packages.CodeTooLarge, packages.UploadSetting},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/", strings.NewReader(tt.body))
			req.Header.Set("Content-Type", tt.contentType)
			err := readAll(httptest.NewRecorder(), req, limit)
			var e *envelope.Error
			if !errors.As(packageError(err), &e) || e.Status != tt.status || e.Code != tt.code || !strings.Contains(e.Message, tt.message) {
				t.Fatalf("error = %v, want %d %s mentioning %q", err, tt.status, tt.code, tt.message)
			}
		})
	}
}

// readAll reads every part of an upload through the shared reader, as install does.
func readAll(w http.ResponseWriter, r *http.Request, limit int64) error {
	up, err := readMultipart(w, r, limit, "CODE", "send a form")
	if err != nil {
		return err
	}
	for {
		part, err := up.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := io.Copy(io.Discard, up.body(part)); err != nil {
			return err
		}
	}
}

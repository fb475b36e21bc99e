package ui

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"sync"
	"time"

	"github.com/caddy-runtime/runtime/internal/envelope"
)

// File is an answer held in memory with its content type and ETag, sent in gzip to clients
// that take it, each form with its own ETag; If-None-Match and ranges are honoured.
type File struct {
	body        *envelope.Body
	contentType string
	etag        string
	cache       string // Cache-Control
}

// NewFile returns body as a File that clients revalidate on each use (Cache-Control:
// no-cache), cheaply with its ETag.
func NewFile(body []byte, contentType string) *File {
	return newFile(body, contentType, "no-cache")
}

func newFile(body []byte, contentType, cache string) *File {
	sum := sha256.Sum256(body)
	return &File{body: envelope.NewBody(body), contentType: contentType, etag: hex.EncodeToString(sum[:12]), cache: cache}
}

// Serve answers r with the file.
func (f *File) Serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	body, gzipped := f.body.For(h, r)
	h.Set("Content-Type", f.contentType)
	h.Set("Cache-Control", f.cache)
	if gzipped {
		h.Set("ETag", `"`+f.etag+`-gz"`)
	} else {
		h.Set("ETag", `"`+f.etag+`"`)
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

// immutable is the Cache-Control of an asset: its name changes with its content, so a copy
// may be kept for a year and never revalidated.
const immutable = "public, max-age=31536000, immutable"

// Assets are the assets of a page, by name: files whose names carry a hash of their content.
type Assets struct {
	// Each is read on first use: Swagger UI is over a megabyte, which a runtime whose API
	// reference nobody opens should not hold in memory.
	files map[string]func() *File
	names []string // sorted
}

// newAssets lists the assets in the embedded folder dir.
func newAssets(dir string) (*Assets, error) {
	entries, err := fs.ReadDir(files, dir)
	if err != nil {
		return nil, err
	}
	a := &Assets{files: map[string]func() *File{}}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		name, contentType := dir+"/"+e.Name(), mime.TypeByExtension(path.Ext(e.Name()))
		a.files[e.Name()] = sync.OnceValue(func() *File {
			body, _ := fs.ReadFile(files, name) // listed above: it is there
			return newFile(body, contentType, immutable)
		})
		a.names = append(a.names, e.Name())
	}
	return a, nil
}

// Serve answers r with the asset named name, to be kept for a year, and reports whether there
// is one; it writes nothing when there is none.
func (a *Assets) Serve(w http.ResponseWriter, r *http.Request, name string) bool {
	f, ok := a.files[name]
	if ok {
		f().Serve(w, r)
	}
	return ok
}

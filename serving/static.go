package serving

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"html"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/caddy-runtime/runtime/packages"
	"github.com/caddy-runtime/runtime/workers"
)

// ErrFileNotFound means a files worker has no file at the requested path.
var ErrFileNotFound = errors.New("no such file")

// maxEntrypoint bounds an entrypoint read into memory to inject the base.
const maxEntrypoint = 8 << 20

// ServeStatic serves a Files or SPA worker from its version folder through root, an os.Root
// of it, so no path or link leaves it. An SPA answers unknown paths and folders with its
// entrypoint; a files worker answers a folder with its index.html, else ErrFileNotFound.
func ServeStatic(w http.ResponseWriter, r *http.Request, t Target, m workers.Manifest, root *os.Root) error {
	rel := strings.TrimPrefix(path.Clean("/"+t.Rest), "/")
	spa := m.Kind() == workers.SPA
	if rel != "" {
		f, info, err := packages.OpenReadable(root, rel)
		if err == nil && info.IsDir() && !spa {
			f.Close()
			f, info, err = packages.OpenReadable(root, path.Join(rel, "index.html"))
		}
		if err == nil && !info.IsDir() {
			defer f.Close()
			serveFile(w, r, f, info)
			return nil
		}
		if f != nil {
			f.Close()
		}
		if !spa {
			return ErrFileNotFound
		}
	}
	index := m.Entrypoint
	if !spa {
		index = "index.html"
	}
	f, info, err := packages.OpenReadable(root, index)
	if err != nil || info.IsDir() {
		if f != nil {
			f.Close()
		}
		return fmt.Errorf("%w: the entrypoint %s", ErrFileNotFound, index)
	}
	defer f.Close()
	if !spa || !m.InjectBase {
		w.Header().Set("Cache-Control", "no-cache")
		serveFile(w, r, f, info)
		return nil
	}
	return serveWithBase(w, r, f, info, t.Base+"/")
}

// serveFile answers with a file, with an ETag from its size and time, ranges and conditional
// requests handled by http.ServeContent.
func serveFile(w http.ResponseWriter, r *http.Request, f *os.File, info fs.FileInfo) {
	h := w.Header()
	h.Set("ETag", fmt.Sprintf(`"%x-%x"`, info.Size(), info.ModTime().UnixNano()))
	h.Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, info.Name(), info.ModTime(), f)
}

var headTag = regexp.MustCompile(`(?i)<head(\s[^>]*)?>`)

// serveWithBase answers with the entrypoint, a <base href> inserted after <head>, so the app's
// relative URLs resolve under the base it is served at.
func serveWithBase(w http.ResponseWriter, r *http.Request, f *os.File, info fs.FileInfo, base string) error {
	body, err := io.ReadAll(io.LimitReader(f, maxEntrypoint+1))
	if err != nil {
		return err
	}
	if len(body) > maxEntrypoint {
		serveFile(w, r, f, info) // too large to rewrite; serve it as it is
		return nil
	}
	tag := []byte(`<base href="` + html.EscapeString(base) + `">`)
	at := 0
	if loc := headTag.FindIndex(body); loc != nil {
		at = loc[1]
	}
	out := make([]byte, 0, len(body)+len(tag))
	out = append(append(append(out, body[:at]...), tag...), body[at:]...)
	sum := sha256.Sum256(out)
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", `"`+hex.EncodeToString(sum[:12])+`"`)
	h.Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, info.Name(), time.Time{}, bytes.NewReader(out))
	return nil
}

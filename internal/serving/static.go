package serving

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddy-runtime/runtime/internal/workers"
	"github.com/caddy-runtime/runtime/packages"
)

// ErrFileNotFound means a files worker has no file at the requested path.
var ErrFileNotFound = errors.New("no such file")

// maxEntrypoint bounds an entrypoint read into memory to inject the base.
const maxEntrypoint = 8 << 20

// ServeStatic serves a Files or SPA worker from its version folder through v.Root, so no path
// or link leaves it. An SPA answers unknown paths and folders with its entrypoint; a files
// worker answers a folder with its index.html, else ErrFileNotFound. A file named .env, in
// any folder, is never answered: it is taken for missing.
func ServeStatic(w http.ResponseWriter, r *http.Request, t Target, v *Served) error {
	m, root := v.Manifest, v.Root
	rel := strings.TrimPrefix(path.Clean("/"+t.Rest), "/")
	spa := m.Kind() == workers.SPA
	if slices.Contains(strings.Split(rel, "/"), workers.DotEnvFile) {
		if !spa {
			return ErrFileNotFound
		}
		rel = ""
	}
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
	return v.pages.serve(w, r, f, info, t.Base+"/")
}

// serveFile answers with a file, with an ETag from its size and time, ranges and conditional
// requests handled by http.ServeContent.
func serveFile(w http.ResponseWriter, r *http.Request, f *os.File, info fs.FileInfo) {
	h := w.Header()
	h.Set("ETag", fmt.Sprintf(`"%x-%x"`, info.Size(), info.ModTime().UnixNano()))
	h.Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, info.Name(), info.ModTime(), f)
}

// basePages holds an SPA's entrypoint as rewritten for the bases it was served under, so a
// request reads, rewrites and hashes nothing while the file is unchanged. Readers take no lock.
// The base comes from the request (a pin spells it), so only a few are kept.
type basePages struct {
	pages atomic.Pointer[[]*basePage]
	mu    sync.Mutex // serialises writers
}

// maxBasePages bounds the bases kept per version: the unpinned one and a few pins.
const maxBasePages = 8

// basePage is the entrypoint with a <base href> for one base, valid while the file has the
// size and modification time it was read with.
type basePage struct {
	base  string
	size  int64
	mtime time.Time
	body  []byte
	etag  string
}

// serve answers with the entrypoint f, a <base href> inserted after <head>, so the app's
// relative URLs resolve under the base it is served at.
func (bp *basePages) serve(w http.ResponseWriter, r *http.Request, f *os.File, info fs.FileInfo, base string) error {
	page := bp.find(base, info)
	if page == nil {
		var err error
		if page, err = rewrite(f, info, base); err != nil {
			return err
		}
		if page == nil {
			serveFile(w, r, f, info) // too large to rewrite; serve it as it is
			return nil
		}
		bp.keep(page)
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", page.etag)
	h.Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, info.Name(), time.Time{}, bytes.NewReader(page.body))
	return nil
}

func (bp *basePages) find(base string, info fs.FileInfo) *basePage {
	if pages := bp.pages.Load(); pages != nil {
		for _, p := range *pages {
			if p.base == base && p.size == info.Size() && p.mtime.Equal(info.ModTime()) {
				return p
			}
		}
	}
	return nil
}

// keep adds page, in place of a stale page of its base; past maxBasePages it keeps nothing.
func (bp *basePages) keep(page *basePage) {
	bp.mu.Lock()
	defer bp.mu.Unlock()
	var next []*basePage
	if cur := bp.pages.Load(); cur != nil {
		next = slices.DeleteFunc(slices.Clone(*cur), func(p *basePage) bool { return p.base == page.base })
	}
	if len(next) >= maxBasePages {
		return
	}
	next = append(next, page)
	bp.pages.Store(&next)
}

// rewrite reads the entrypoint and inserts the <base href>; nil when it is too large.
func rewrite(f *os.File, info fs.FileInfo, base string) (*basePage, error) {
	body, err := io.ReadAll(io.LimitReader(f, maxEntrypoint+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxEntrypoint {
		return nil, nil
	}
	tag := []byte(baseTag(base))
	at := insertAt(body)
	out := make([]byte, 0, len(body)+len(tag))
	out = append(append(append(out, body[:at]...), tag...), body[at:]...)
	sum := sha256.Sum256(out)
	return &basePage{base: base, size: info.Size(), mtime: info.ModTime(), body: out, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}, nil
}

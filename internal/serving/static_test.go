package serving

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBasePages: an inject_base page is rewritten once per base and file state, then answered
// from memory; a changed file or another base is rewritten anew.
func TestBasePages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "index.html")
	write := func(body string, mtime time.Time) os.FileInfo {
		t.Helper()
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	var bp basePages
	serve := func(f *os.File, info os.FileInfo, base string) string {
		t.Helper()
		rec := httptest.NewRecorder()
		if err := bp.serve(rec, httptest.NewRequest("GET", "/", nil), f, info, base); err != nil {
			t.Fatalf("serve under %s: %v", base, err)
		}
		return rec.Body.String()
	}
	open := func() *os.File {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	info := write("<html><head><title>a</title></head></html>", time.Unix(1000, 0))
	// closed stands for a file that must not be read: the answer comes from memory.
	closed := open()
	closed.Close()
	want := `<html><head><base href="/app/"><title>a</title></head></html>`
	if got := serve(open(), info, "/app/"); got != want {
		t.Fatalf("first answer = %q, want %q", got, want)
	}
	if got := serve(closed, info, "/app/"); got != want {
		t.Fatalf("second answer = %q, want %q from memory", got, want)
	}
	if got := serve(open(), info, "/app@1/"); !strings.Contains(got, `<base href="/app@1/">`) {
		t.Fatalf("another base = %q", got)
	}
	info = write("<html><head></head><p>new</p></html>", time.Unix(2000, 0))
	if got := serve(open(), info, "/app/"); got != `<html><head><base href="/app/"></head><p>new</p></html>` {
		t.Fatalf("after a change = %q", got)
	}
	// Past the bound, pages are still right, only not kept.
	for i := range maxBasePages + 4 {
		base := "/app@" + strings.Repeat("1", i+1) + "/"
		if got := serve(open(), info, base); !strings.Contains(got, `<base href="`+base+`">`) {
			t.Fatalf("base %s = %q", base, got)
		}
	}
	if n := len(*bp.pages.Load()); n > maxBasePages {
		t.Fatalf("%d pages kept, want at most %d", n, maxBasePages)
	}
}

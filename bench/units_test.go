package bench

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/caddy-runtime/runtime/handlers"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// BenchmarkListWorkers times GET /api/workers through the real handler over 1 000 workers of
// 3 versions each, with the caches warm (the folders are watched for changes).
func BenchmarkListWorkers(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "apps")
	for i := range 1000 {
		for _, v := range []string{"1.0.0", "1.1.0", "2.0.0"} {
			name := fmt.Sprintf("app-%04d", i)
			if i%4 == 0 {
				name = fmt.Sprintf("@team%d/app-%04d", i%10, i)
			}
			p := filepath.Join(dir, filepath.FromSlash(name), v)
			if err := os.MkdirAll(p, 0o755); err != nil {
				b.Fatal(err)
			}
			manifest := fmt.Sprintf("name: '%s'\nversion: %s\nentrypoint: index.html\n", name, v)
			if err := os.WriteFile(filepath.Join(p, "manifest.yaml"), []byte(manifest), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	const root = "bench-root-key-0123456789abcdef"
	api, err := handlers.New(handlers.Options{Prefix: "/api", RootKey: root,
		Workers: packages.NewCatalog(packages.WorkerLayout, []string{dir}, packages.DefaultLimits),
		Keys:    func() (*keystore.Store, error) { return nil, fmt.Errorf("unused") }})
	if err != nil {
		b.Fatal(err)
	}
	get := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "/api/workers", nil)
		req.Header.Set("X-API-Key", root)
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		return rec
	}
	if rec := get(); rec.Code != http.StatusOK || rec.Body.Len() < 100_000 {
		b.Fatalf("GET /api/workers = %d, %d bytes", rec.Code, rec.Body.Len())
	}
	b.ResetTimer()
	for b.Loop() {
		get()
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/list")
}

// bigArchive builds a .tgz of worker name 1.0.0 with files of random bytes drawn from seed.
func bigArchive(b *testing.B, name string, files, size int, seed byte) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	rng := rand.NewChaCha8([32]byte{seed})
	add := func(name string, body []byte) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			b.Fatal(err)
		}
		tw.Write(body)
	}
	add("manifest.yaml", []byte("name: "+name+"\nversion: 1.0.0\n"))
	for i := range files {
		body := make([]byte, size)
		rng.Read(body)
		add(fmt.Sprintf("assets/d%02d/file%04d.bin", i%40, i), body)
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

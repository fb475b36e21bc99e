package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"mime/multipart"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// noiseFiles returns n files of size bytes of incompressible content under dir.
func noiseFiles(dir string, n, size int, seed byte) []harness.File {
	rng := rand.NewChaCha8([32]byte{seed})
	files := make([]harness.File, n)
	for i := range files {
		body := make([]byte, size)
		rng.Read(body)
		files[i] = harness.File{Name: fmt.Sprintf("%s/d%02d/f%04d.bin", dir, i%20, i), Body: string(body)}
	}
	return files
}

// TestStreamedUploads covers a .tgz unpacked as it arrives: a large upload installs with the
// digest of the archive as sent; one refused at its first entry still gets its answer
// while the client is sending the rest; one over max_upload_size, or cut off by the client
// midway, leaves nothing behind and the installed version serving.
func TestStreamedUploads(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey, "RUNTIME_MAX_UPLOAD_SIZE": "8MiB"}})
	apps := filepath.Join(s.DataDir, "apps")
	v1 := harness.TarGz(t, pkg("name: app\nversion: 1.0.0\nentrypoint: index.html\n", harness.File{Name: "index.html", Body: "<p>v1"})...)
	uploadOK(t, s, "workers", "app.tgz", v1, rootKey)
	serves := func(t *testing.T) {
		t.Helper()
		if resp := s.Get("/app/"); resp.Status != 200 || string(resp.Body) != "<p>v1" {
			t.Fatalf("GET /app/ = %s", resp)
		}
		entries, _ := os.ReadDir(apps)
		if len(entries) != 1 || entries[0].Name() != "app" {
			t.Fatalf("apps holds %v; want app alone", entries)
		}
		if versions, _ := os.ReadDir(filepath.Join(apps, "app")); len(versions) != 1 {
			t.Fatalf("app holds %v; want 1.0.0 alone", versions)
		}
	}

	t.Run("large", func(t *testing.T) {
		files := append(pkg("name: big\nversion: 1.0.0\n"), noiseFiles("assets", 1500, 3000, 1)...)
		data := harness.TarGz(t, files...)
		in := uploadOK(t, s, "workers", "big.tgz", data, rootKey)
		if sum := sha256.Sum256(data); in.SHA256 != hex.EncodeToString(sum[:]) || in.Files != 1501 {
			t.Fatalf("installed %+v; want %d files, sha256 %x", in, 1501, sum)
		}
		tree := testkit.Tree(t, in.InstalledAt)
		for _, f := range files {
			if tree[f.Name] != f.Body {
				t.Fatalf("%s is not as archived", f.Name)
			}
		}
		if resp := s.Do("DELETE", s.API+"/workers/_/big", harness.WithKey(rootKey)); resp.Status != 200 {
			t.Fatalf("removing big = %s", resp)
		}
	})

	t.Run("refused at its first entry", func(t *testing.T) {
		data := harness.TarGz(t, append([]harness.File{{Name: "../escape.txt", Body: "x"}}, noiseFiles("assets", 200, 30000, 2)...)...)
		resp := s.Upload(s.API+"/workers/upload", "app.tgz", data, harness.WithKey(rootKey))
		if resp.Status != 400 || resp.ErrorCode() != "PATH_TRAVERSAL" {
			t.Fatalf("upload = %s", resp)
		}
		serves(t)
	})

	t.Run("over max_upload_size", func(t *testing.T) {
		data := harness.TarGz(t, append(pkg("name: app\nversion: 1.0.0\n"), noiseFiles("assets", 400, 30000, 3)...)...)
		resp := s.Upload(s.API+"/workers/upload", "app.tgz", data, harness.WithKey(rootKey))
		if resp.Status != 413 || resp.ErrorCode() != "PAYLOAD_TOO_LARGE" || !strings.Contains(string(resp.Body), "max_upload_size") {
			t.Fatalf("upload = %s", resp)
		}
		serves(t)
	})

	t.Run("cut off midway", func(t *testing.T) {
		data := harness.TarGz(t, append(pkg("name: app\nversion: 1.0.0\n"), noiseFiles("assets", 200, 30000, 4)...)...)
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		part, _ := mw.CreateFormFile("file", "app.tgz")
		part.Write(data)
		mw.Close()
		conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST %s/workers/upload HTTP/1.1\r\nHost: %s\r\nX-API-Key: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
			s.API, strings.TrimPrefix(s.URL, "http://"), rootKey, mw.FormDataContentType(), body.Len())
		if _, err := conn.Write(body.Bytes()[:body.Len()/2]); err != nil {
			t.Fatal(err)
		}
		// The runtime is unpacking what came: its temporary folder is there.
		harness.EventuallyNil(t, 10*time.Second, func() error {
			if entries, _ := os.ReadDir(apps); len(entries) < 2 {
				return fmt.Errorf("apps holds %v", entries)
			}
			return nil
		})
		conn.Close()
		harness.EventuallyNil(t, 10*time.Second, func() error {
			if entries, _ := os.ReadDir(apps); len(entries) != 1 {
				return fmt.Errorf("apps holds %v", entries)
			}
			return nil
		})
		serves(t)
	})
}

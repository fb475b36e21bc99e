package bench

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// BenchmarkUpload compares a worker upload over HTTP with `tar -xzf` of the same archive, for
// a .tgz of 2 000 files of incompressible content of about 10 MB and one of about 50 MB,
// round by round. The upload is what a client sees: a POST of the archive as
// multipart/form-data to the real runtime binary, from the first byte sent until the answer
// is read, each replacing the version the one before installed. tar runs as a process on the
// same disk, extracting into a fresh folder, timed from its start until it exits.
//
// Nothing is deleted while the benchmark runs: the trees stay until it ends, the replaced ones
// too (for the retire delay, an hour). Where ext4 has no journal (as on the machines these
// benchmarks run on), it skips the inodes freed in the last minute when it allocates one, and
// reads each of their inode blocks to know it: every file created right after a tree of 2 000
// files was removed paid for scanning past them, which made the old benchmark's own tar take
// 20 times as long as tar run by hand. Before each timed iteration the disk is synced
// (untimed), so that neither side pays for writing back what ran before it.
func BenchmarkUpload(b *testing.B) {
	tarBin, err := exec.LookPath("tar")
	if err != nil {
		b.Skip("no tar on this machine")
	}
	s := harness.Start(b, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey, "RUNTIME_RETIRE_DELAY": "1h"}})
	// Next to the runtime's folders, on the same disk.
	work := filepath.Join(s.Dir, "bench")
	if err := os.MkdirAll(work, 0o755); err != nil {
		b.Fatal(err)
	}
	client := clientWith(1)
	defer client.CloseIdleConnections()
	sizes := []struct {
		name string
		size int // of each file
	}{{"10MB", 5000}, {"50MB", 25000}}
	archives := map[string]string{}
	for i, sz := range sizes {
		p := filepath.Join(work, sz.name+".tgz")
		if err := os.WriteFile(p, bigArchive(b, "big", 2000, sz.size, byte(i+1)), 0o644); err != nil {
			b.Fatal(err)
		}
		archives[sz.name] = p
	}
	upload := func(b *testing.B, archive string) {
		b.StopTimer()
		settle()
		req, err := uploadRequest(s.URL+s.API+"/workers/upload", archive)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		b.StopTimer()
		req.Body.Close()
		var answer struct {
			Data struct {
				Worker struct{ Files int }
			}
		}
		if err != nil || resp.StatusCode != http.StatusOK || json.Unmarshal(body, &answer) != nil || answer.Data.Worker.Files != 2001 {
			b.Fatalf("upload: %d %v %s", resp.StatusCode, err, body)
		}
		b.StartTimer()
	}
	untar := func(b *testing.B, archive string) {
		b.StopTimer()
		dir, err := os.MkdirTemp(work, "dest-")
		if err != nil {
			b.Fatal(err)
		}
		settle()
		b.StartTimer()
		if out, err := exec.Command(tarBin, "-xzf", archive, "-C", dir).CombinedOutput(); err != nil {
			b.Fatalf("tar: %v %s", err, out)
		}
	}
	for i := range *rounds {
		for _, sz := range sizes {
			runs := []struct {
				name string
				run  func(*testing.B, string)
			}{{sz.name + "-runtime", upload}, {sz.name + "-tar-xzf", untar}}
			for j := range runs {
				r := runs[(i+j)%len(runs)]
				b.Run(r.name, func(b *testing.B) {
					for range b.N {
						r.run(b, archives[sz.name])
					}
				})
			}
		}
	}
}

// uploadRequest returns the POST of archive to url as the multipart field file, read from the
// file as it is sent, as curl -F file=@archive sends it.
func uploadRequest(url, archive string) (*http.Request, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	var head bytes.Buffer
	mw := multipart.NewWriter(&head)
	if _, err := mw.CreateFormFile("file", filepath.Base(archive)); err != nil {
		f.Close()
		return nil, err
	}
	tail := "\r\n--" + mw.Boundary() + "--\r\n"
	body := struct {
		io.Reader
		io.Closer
	}{io.MultiReader(&head, f, strings.NewReader(tail)), f}
	req, err := http.NewRequest("POST", url, body)
	if err != nil {
		f.Close()
		return nil, err
	}
	req.ContentLength = int64(head.Len()) + info.Size() + int64(len(tail))
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("X-API-Key", rootKey)
	return req, nil
}

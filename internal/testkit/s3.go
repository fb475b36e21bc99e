package testkit

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// VersityGWPath is where make deps installs the S3-compatible server the tests use (versitygw,
// with go install into the ignored bin/); $VERSITYGW overrides it.
const VersityGWPath = "bin/versitygw"

// S3 is an S3-compatible server (versitygw on its posix backend) started for a test, on a free
// loopback port with its buckets as folders of a temporary folder; it stops when the test ends.
type S3 struct {
	server
	Endpoint  string // http://127.0.0.1:PORT
	Region    string
	AccessKey string
	SecretKey string
	Port      int
	root      string // the buckets' folder
}

// StartS3 starts the server with root credentials of its own: $VERSITYGW, else where make
// deps installs it in the repository.
func StartS3(tb testing.TB) *S3 {
	tb.Helper()
	bin := VersityGWBinary(tb)
	s := &S3{Region: "us-east-1", AccessKey: "test-" + rand.Text()[:8], SecretKey: rand.Text(), root: tb.TempDir()}
	s.server = server{out: &Buffer{}, dir: tb.TempDir(), ready: s.answers,
		env: []string{"ROOT_ACCESS_KEY=" + s.AccessKey, "ROOT_SECRET_KEY=" + s.SecretKey}}
	tb.Cleanup(s.Stop)
	s.runOnFreePort(tb, func(port int) {
		s.Port, s.Endpoint = port, "http://127.0.0.1:"+strconv.Itoa(port)
		s.args = []string{bin, "--port", "127.0.0.1:" + strconv.Itoa(port), "posix", s.root}
	})
	return s
}

// answers reports whether the server answers HTTP at all (an anonymous request is refused).
func (s *S3) answers() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+"/", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("versitygw does not answer yet: %w", err)
	}
	resp.Body.Close()
	return nil
}

// Bucket creates an empty bucket (a folder of the posix backend) and returns its name.
func (s *S3) Bucket(tb testing.TB, name string) string {
	tb.Helper()
	if err := os.Mkdir(filepath.Join(s.root, name), 0o755); err != nil {
		tb.Fatal(err)
	}
	return name
}

// Object is the path of an object in the posix backend, for tests that alter what the store
// holds behind the client's back.
func (s *S3) Object(bucket, key string) string {
	return filepath.Join(s.root, bucket, filepath.FromSlash(key))
}

package testkit

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"os/exec"
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
	Endpoint  string // http://127.0.0.1:PORT
	Region    string
	AccessKey string
	SecretKey string
	Port      int
	root      string // the buckets' folder
	args      []string
	cmd       *exec.Cmd
	out       *Buffer
}

// StartS3 starts the server with root credentials of its own. Where the server is missing the
// test fails under CI=true, so a green CI run has really run it, and is skipped elsewhere.
func StartS3(tb testing.TB) *S3 {
	tb.Helper()
	bin := os.Getenv("VERSITYGW")
	if bin == "" {
		root, err := moduleRoot()
		if err != nil {
			tb.Fatal(err)
		}
		bin = filepath.Join(root, VersityGWPath)
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("the test needs versitygw at %s (%v): run make deps, or set VERSITYGW", bin, err)
		}
		tb.Skipf("skipping: no versitygw at %s (%v); make deps installs it (in CI this fails)", bin, err)
	}
	s := &S3{Region: "us-east-1", AccessKey: "test-" + rand.Text()[:8], SecretKey: rand.Text(), Port: FreePort(tb),
		root: tb.TempDir(), out: &Buffer{}}
	s.Endpoint = "http://127.0.0.1:" + strconv.Itoa(s.Port)
	s.args = []string{bin, "--port", "127.0.0.1:" + strconv.Itoa(s.Port), "posix", s.root}
	tb.Cleanup(s.Stop)
	s.start(tb)
	return s
}

// start runs the server and waits until it answers.
func (s *S3) start(tb testing.TB) {
	tb.Helper()
	s.cmd = exec.Command(s.args[0], s.args[1:]...)
	s.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s.AccessKey, "ROOT_SECRET_KEY="+s.SecretKey)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		tb.Fatalf("starting versitygw: %v", err)
	}
	EventuallyNil(tb, 30*time.Second, s.ready)
}

// ready reports whether the server answers HTTP at all (an anonymous request is refused).
func (s *S3) ready() error {
	if s.cmd.ProcessState != nil {
		return fmt.Errorf("versitygw exited: %s\n%s", s.cmd.ProcessState, s.out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+"/", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("versitygw does not answer yet: %v", err)
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
func (s *S3) Object(bucket, key string) string { return filepath.Join(s.root, bucket, filepath.FromSlash(key)) }

// Restart starts a stopped server again on the same port and buckets, as a store back from an
// outage.
func (s *S3) Restart(tb testing.TB) {
	tb.Helper()
	s.Stop()
	s.start(tb)
}

// Stop stops the server, as an outage would; tests may call it early.
func (s *S3) Stop() {
	if s.cmd.Process != nil && s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}

// Output is what the server printed.
func (s *S3) Output() string { return s.out.String() }

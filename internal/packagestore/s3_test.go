package packagestore

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/caddy-runtime/runtime/internal/testkit"
)

// counter counts the requests the SDK sends, by method, and the bytes of each PUT's body
// that went out; it can break the connection of the next PUTs halfway through their body.
type counter struct {
	next   s3.HTTPClient
	mu     sync.Mutex
	n      map[string]int
	sent   []*sentBody
	breaks int  // PUTs still to break
	stalls bool // requests stop halfway through their body, until cancelled
}

// stalled is a body that stops after half, as a connection whose peer went silent, until the
// request is cancelled.
type stalled struct {
	r    io.Reader
	done <-chan struct{}
}

func (s *stalled) Read(p []byte) (int, error) {
	if n, err := s.r.Read(p); err != io.EOF {
		return n, err
	}
	<-s.done
	return 0, context.Canceled // as the HTTP client answers a read of a cancelled request
}

type sentBody struct {
	io.ReadCloser
	declared int64
	n        atomic.Int64
}

func (b *sentBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

func (c *counter) Do(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n[r.Method]++
	broken, stalls := false, c.stalls
	if r.Method == http.MethodPut && r.Body != nil {
		b := &sentBody{ReadCloser: r.Body, declared: r.ContentLength}
		r.Body = b
		c.sent = append(c.sent, b)
		if broken = c.breaks > 0; broken {
			c.breaks--
		}
	}
	c.mu.Unlock()
	if broken {
		io.CopyN(io.Discard, r.Body, r.ContentLength/2)
		r.Body.Close()
		return nil, errors.New("write: connection reset by peer (the test broke it)")
	}
	if stalls && r.Method == http.MethodPut {
		io.Copy(io.Discard, &stalled{io.LimitReader(r.Body, r.ContentLength/2), r.Context().Done()})
		return nil, r.Context().Err()
	}
	resp, err := c.next.Do(r)
	if stalls && r.Method == http.MethodGet && err == nil {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{&stalled{io.LimitReader(resp.Body, resp.ContentLength/2), r.Context().Done()}, resp.Body}
	}
	return resp, err
}

// breakPuts makes the next n PUTs fail halfway through their body.
func (c *counter) breakPuts(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.breaks = n
}

// bodies returns the PUT bodies sent since the last call.
func (c *counter) bodies() []*sentBody {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.sent
	c.sent = nil
	return b
}

// take returns the counts so far and starts again from zero.
func (c *counter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

// open makes a store of srv's bucket under prefix whose requests count.
func open(t *testing.T, srv *testkit.S3, o Options) (*S3, *counter) {
	t.Helper()
	c := &counter{n: map[string]int{}}
	if o.Endpoint == "" {
		o.Endpoint = srv.Endpoint
	}
	if o.AccessKeyID == "" {
		o.AccessKeyID, o.SecretAccessKey = srv.AccessKey, srv.SecretKey
	}
	o.Region, o.PathStyle = srv.Region, true
	s, err := New(context.Background(), o, func(so *s3.Options) { c.next, so.HTTPClient = so.HTTPClient, c })
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

// archive writes n random bytes to a file, as an upload leaves it, and returns the open file
// (at its start), its SHA-256 and the bytes.
func archive(t *testing.T, n int) (*os.File, [32]byte, []byte) {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	name := filepath.Join(t.TempDir(), "upload.zip")
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, sha256.Sum256(b), b
}

func readAll(t *testing.T, s Store, sum [32]byte, size int64) ([]byte, error) {
	t.Helper()
	r, err := s.Open(context.Background(), sum, size)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// has fails t unless the store's answer about sum is want.
func has(t *testing.T, s Store, sum [32]byte, want bool) {
	t.Helper()
	if ok, err := s.Has(context.Background(), sum); ok != want || err != nil {
		t.Fatalf("has %x = %v, %v; want %v", sum[:4], ok, err, want)
	}
}

func list(t *testing.T, s Store) []Object {
	t.Helper()
	var all []Object
	for o, err := range s.List(context.Background()) {
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		all = append(all, o)
	}
	return all
}

// TestPutOpen puts an archive of a few MiB from a file and reads it back verified; a second put
// of the same archive sends one HEAD and no PUT, and leaves the object as it was; List shows
// it with its size and time; Delete removes it, after which Open answers ErrNotFound.
func TestPutOpen(t *testing.T) {
	t.Parallel()
	srv := testkit.StartS3(t)
	s, requests := open(t, srv, Options{Bucket: srv.Bucket(t, "units"), Prefix: "cluster-1"})
	ctx := context.Background()
	f, sum, body := archive(t, 3<<20+17)
	size := int64(len(body))

	if err := s.Put(ctx, sum, size, f); err != nil {
		t.Fatalf("put: %v\n%s", err, srv.Output())
	}
	if got := requests.take(); got[http.MethodHead] != 1 || got[http.MethodPut] != 1 {
		t.Fatalf("the first put sent %v, want one HEAD and one PUT", got)
	}
	object := srv.Object("units", "cluster-1/sha256/"+hex.EncodeToString(sum[:]))
	before, err := os.Stat(object)
	if err != nil {
		t.Fatalf("the object is not at <prefix>/sha256/<hex>: %v", err)
	}
	if got, err := readAll(t, s, sum, size); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("open = %d bytes, %v; want the %d bytes put", len(got), err, size)
	}

	requests.take()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, sum, size, f); err != nil {
		t.Fatalf("second put: %v", err)
	}
	if got := requests.take(); got[http.MethodHead] != 1 || got[http.MethodPut] != 0 {
		t.Fatalf("the second put sent %v, want one HEAD and no PUT", got)
	}
	if after, err := os.Stat(object); err != nil || !after.ModTime().Equal(before.ModTime()) {
		t.Fatalf("the object changed on the second put: %v → %v (%v)", before.ModTime(), after.ModTime(), err)
	}

	has(t, s, sum, true)
	if got := list(t, s); len(got) != 1 || got[0].Sum != sum || got[0].Size != size || got[0].Modified.IsZero() {
		t.Fatalf("list = %+v, want the one object with its size and time", got)
	}
	if err := s.Delete(ctx, sum); err != nil {
		t.Fatalf("delete: %v", err)
	}
	has(t, s, sum, false)
	if got := list(t, s); len(got) != 0 {
		t.Fatalf("list after delete = %+v", got)
	}
	if _, err := readAll(t, s, sum, size); !errors.Is(err, ErrNotFound) {
		t.Fatalf("open after delete = %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, sum); err != nil {
		t.Fatalf("deleting a missing object: %v", err)
	}
}

// TestPutRefreshesOld: Stat shows an object's size and time (the time of its file in
// versitygw's posix backend) and a missing one as ErrNotFound. A put of an archive the store
// has had for longer than RefreshAfter sends it again, so its time is now and a collector
// that listed it as old keeps it; one put within RefreshAfter is left as it was.
func TestPutRefreshesOld(t *testing.T) {
	t.Parallel()
	srv := testkit.StartS3(t)
	s, requests := open(t, srv, Options{Bucket: srv.Bucket(t, "units")})
	ctx := context.Background()
	f, sum, body := archive(t, 64<<10)
	size := int64(len(body))
	if _, err := s.Stat(ctx, sum); !errors.Is(err, ErrNotFound) {
		t.Fatalf("stat before the put = %v, want ErrNotFound", err)
	}
	if err := s.Put(ctx, sum, size, f); err != nil {
		t.Fatal(err)
	}
	object := srv.Object("units", "sha256/"+hex.EncodeToString(sum[:]))
	for _, tc := range []struct {
		name  string
		age   time.Duration
		puts  int
		fresh bool // Modified is now after the put
	}{
		{"recent", RefreshAfter - 10*time.Minute, 0, false},
		{"old", RefreshAfter + 10*time.Minute, 1, true},
		{"a week old", 7 * 24 * time.Hour, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			aged := time.Now().Add(-tc.age).Truncate(time.Second)
			if err := os.Chtimes(object, aged, aged); err != nil {
				t.Fatal(err)
			}
			if obj, err := s.Stat(ctx, sum); err != nil || obj.Sum != sum || obj.Size != size || !obj.Modified.Equal(aged) {
				t.Fatalf("stat = %+v, %v; want %d bytes modified %v", obj, err, size, aged)
			}
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			requests.take()
			before := time.Now().Add(-time.Second) // S3 times are in whole seconds
			if err := s.Put(ctx, sum, size, f); err != nil {
				t.Fatal(err)
			}
			if got := requests.take(); got[http.MethodHead] != 1 || got[http.MethodPut] != tc.puts {
				t.Fatalf("the put sent %v, want one HEAD and %d PUT", got, tc.puts)
			}
			obj, err := s.Stat(ctx, sum)
			if err != nil {
				t.Fatal(err)
			}
			if fresh := !obj.Modified.Before(before); fresh != tc.fresh || !tc.fresh && !obj.Modified.Equal(aged) {
				t.Fatalf("modified %v after the put of an object aged %v (put began %v)", obj.Modified, tc.age, before)
			}
			if got, err := readAll(t, s, sum, size); err != nil || !bytes.Equal(got, body) {
				t.Fatalf("read after the put = %d bytes, %v", len(got), err)
			}
		})
	}
}

// TestOpenMissing: a sum never put is ErrNotFound, and the message names the key and S3's code.
func TestOpenMissing(t *testing.T) {
	t.Parallel()
	srv := testkit.StartS3(t)
	s, _ := open(t, srv, Options{Bucket: srv.Bucket(t, "units")})
	sum := sha256.Sum256([]byte("never uploaded"))
	_, err := s.Open(context.Background(), sum, 14)
	if !errors.Is(err, ErrNotFound) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("open = %v, want ErrNotFound", err)
	}
	for _, want := range []string{"sha256/" + hex.EncodeToString(sum[:]), "NoSuchKey", `bucket "units"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}

// TestAlteredObject alters the object on the store's disk after the put: a changed byte reads
// as ErrCorrupt naming both hashes, before the reader hands out the last bytes; a changed
// length is ErrCorrupt at Open, before any byte.
func TestAlteredObject(t *testing.T) {
	t.Parallel()
	srv := testkit.StartS3(t)
	bucket := srv.Bucket(t, "units")
	s, _ := open(t, srv, Options{Bucket: bucket, Prefix: "p"})
	for _, tc := range []struct {
		name   string
		alter  func([]byte) []byte
		atOpen bool // refused before the body is read
		want   string
	}{
		{"a byte changed", func(b []byte) []byte { b[len(b)/2] ^= 0xff; return b }, false, "read sha256 "},
		{"the last byte changed", func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b }, false, "read sha256 "},
		{"truncated", func(b []byte) []byte { return b[:len(b)-10] }, true, "read 262134"},
		{"extended", func(b []byte) []byte { return append(b, "evil"...) }, true, "read 262148"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, sum, body := archive(t, 256<<10)
			size := int64(len(body))
			if err := s.Put(context.Background(), sum, size, f); err != nil {
				t.Fatal(err)
			}
			path := srv.Object(bucket, "p/sha256/"+hex.EncodeToString(sum[:]))
			if err := os.WriteFile(path, tc.alter(bytes.Clone(body)), 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := s.Open(context.Background(), sum, size)
			var got []byte
			if err == nil {
				if tc.atOpen {
					t.Fatal("open accepted an object of another length")
				}
				got, err = io.ReadAll(r)
				r.Close()
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), hex.EncodeToString(sum[:])) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want an ErrCorrupt naming the sha256 and %q", err, tc.want)
			}
			if len(got) >= len(body) {
				t.Fatalf("the reader handed out all %d bytes of an altered object", len(got))
			}
		})
	}
}

// TestPutRefusesOtherBytes puts a reader whose bytes are not those of the sum given (a file
// or a plain reader, altered or of another length): the put fails with ErrCorrupt, is not
// retried, no body was sent whole (fewer bytes went out than its Content-Length), and the
// store holds nothing under that name.
func TestPutRefusesOtherBytes(t *testing.T) {
	t.Parallel()
	srv := testkit.StartS3(t)
	s, requests := open(t, srv, Options{Bucket: srv.Bucket(t, "units")})
	body := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	sum := sha256.Sum256(body)
	altered := bytes.Clone(body)
	altered[len(altered)-1] ^= 1
	plain := func(b []byte) io.Reader { return io.MultiReader(bytes.NewReader(b)) }
	seekable := func(b []byte) io.Reader { return bytes.NewReader(b) }
	for _, tc := range []struct {
		name string
		r    io.Reader
		size int64
	}{
		{"altered file", seekable(altered), int64(len(body))},
		{"altered stream", plain(altered), int64(len(body))},
		{"short stream", plain(body[:len(body)-1]), int64(len(body))},
		{"size too small", plain(body), int64(len(body)) - 1},
		{"file with size too small", seekable(body), int64(len(body)) - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requests.bodies()
			err := s.Put(context.Background(), sum, tc.size, tc.r)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("put = %v, want ErrCorrupt", err)
			}
			sent := requests.bodies()
			if len(sent) != 1 {
				t.Fatalf("%d PUTs were sent, want one, not retried", len(sent))
			}
			if n := sent[0].n.Load(); n >= sent[0].declared {
				t.Fatalf("%d of the body's %d bytes went out", n, sent[0].declared)
			}
			has(t, s, sum, false)
		})
	}
	if err := s.Put(context.Background(), sum, MaxSize+1, plain(body)); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "5368709120") {
		t.Fatalf("a put over 5 GiB = %v, want ErrTooLarge naming the limit", err)
	}
	// A plain reader of the right bytes is taken too.
	if err := s.Put(context.Background(), sum, int64(len(body)), plain(body)); err != nil {
		t.Fatal(err)
	}
	if got, err := readAll(t, s, sum, int64(len(body))); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("open = %d bytes, %v", len(got), err)
	}
}

// TestPutRetries breaks the connection halfway through a PUT's body: the SDK rewinds a file
// and sends it again, and the object reads back verified (the bytes read twice are hashed
// once); a plain reader cannot be read again, so its put fails at once as ErrUnavailable,
// naming the broken connection, and stores nothing.
func TestPutRetries(t *testing.T) {
	t.Parallel()
	srv := testkit.StartS3(t)
	s, requests := open(t, srv, Options{Bucket: srv.Bucket(t, "units")})
	ctx := context.Background()

	f, sum, body := archive(t, 1<<20)
	requests.breakPuts(1)
	if err := s.Put(ctx, sum, int64(len(body)), f); err != nil {
		t.Fatalf("put of a file after a broken connection: %v", err)
	}
	if sent := requests.bodies(); len(sent) != 2 || sent[1].n.Load() != int64(len(body)) {
		t.Fatalf("%d PUTs were sent, want two, the second whole", len(sent))
	}
	if got, err := readAll(t, s, sum, int64(len(body))); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("open = %d bytes, %v", len(got), err)
	}

	_, sum, body = archive(t, 1<<20)
	requests.breakPuts(1)
	err := s.Put(ctx, sum, int64(len(body)), io.MultiReader(bytes.NewReader(body)))
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("put of a stream after a broken connection = %v, want ErrUnavailable naming it", err)
	}
	if sent := requests.bodies(); len(sent) != 1 {
		t.Fatalf("%d PUTs of a stream were sent, want one", len(sent))
	}
	has(t, s, sum, false)
}

// TestStall lets a download, then an upload, stop halfway: each fails as ErrUnavailable
// saying no progress was made (here within 300 ms, a minute in earnest), rather than hanging.
func TestStall(t *testing.T) {
	t.Parallel()
	srv := testkit.StartS3(t)
	s, requests := open(t, srv, Options{Bucket: srv.Bucket(t, "units")})
	s.stall = 300 * time.Millisecond
	ctx := context.Background()
	f, sum, body := archive(t, 1<<20)
	if err := s.Put(ctx, sum, int64(len(body)), f); err != nil {
		t.Fatal(err)
	}
	requests.mu.Lock()
	requests.stalls = true
	requests.mu.Unlock()
	got, err := readAll(t, s, sum, int64(len(body)))
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "no progress for 300ms") || len(got) >= len(body) {
		t.Fatalf("a stalled download = %d bytes, %v; want ErrUnavailable saying it made no progress", len(got), err)
	}
	_, sum, body = archive(t, 1<<20)
	err = s.Put(ctx, sum, int64(len(body)), bytes.NewReader(body))
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "no progress for 300ms") {
		t.Fatalf("a stalled upload = %v, want ErrUnavailable saying it made no progress", err)
	}
}

// TestStoreChecksTheSignedHash sends a body that is not the archive named past the verifier:
// the PUT's signature carries the archive's SHA-256, so the store itself refuses the body
// (ErrCorrupt) and keeps nothing: a second guard, against damage on the way.
func TestStoreChecksTheSignedHash(t *testing.T) {
	t.Parallel()
	srv := testkit.StartS3(t)
	s, _ := open(t, srv, Options{Bucket: srv.Bucket(t, "units")})
	body := []byte("the archive, damaged on the way")
	sum := sha256.Sum256([]byte("the archive"))
	key := s.keys.of(sum)
	_, err := s.client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: &s.bucket, Key: &key,
		Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body)))}, s3.WithAPIOptions(signPayload(sum)))
	if err = s.fail("put", key, err); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "XAmzContentSHA256Mismatch") {
		t.Fatalf("put = %v, want ErrCorrupt from the store", err)
	}
	has(t, s, sum, false)
}

// TestPrefixes keeps two clusters in one bucket under the prefixes "a" and "ab" (and a store
// without one): each lists, finds and opens its own objects only, the same archive is stored
// once per prefix, and a slash around a prefix changes nothing.
func TestPrefixes(t *testing.T) {
	t.Parallel()
	srv := testkit.StartS3(t)
	bucket := srv.Bucket(t, "shared")
	a, _ := open(t, srv, Options{Bucket: bucket, Prefix: "a"})
	ab, _ := open(t, srv, Options{Bucket: bucket, Prefix: "/ab/"})
	none, _ := open(t, srv, Options{Bucket: bucket})
	ctx := context.Background()
	put := func(s *S3, content string) [32]byte {
		sum := sha256.Sum256([]byte(content))
		if err := s.Put(ctx, sum, int64(len(content)), strings.NewReader(content)); err != nil {
			t.Fatal(err)
		}
		return sum
	}
	onlyA, onlyAB, both := put(a, "only in a"), put(ab, "only in ab"), put(a, "in both")
	put(ab, "in both")
	onlyNone := put(none, "without a prefix")
	for _, name := range []string{"a/sha256/", "ab/sha256/", "sha256/"} {
		if _, err := os.Stat(srv.Object(bucket, name)); err != nil {
			t.Errorf("no folder %s: %v", name, err)
		}
	}
	for _, tc := range []struct {
		name        string
		s           *S3
		own, others [][32]byte
	}{
		{"a", a, [][32]byte{onlyA, both}, [][32]byte{onlyAB, onlyNone}},
		{"ab", ab, [][32]byte{onlyAB, both}, [][32]byte{onlyA, onlyNone}},
		{"none", none, [][32]byte{onlyNone}, [][32]byte{onlyA, onlyAB, both}},
	} {
		var listed [][32]byte
		for _, o := range list(t, tc.s) {
			listed = append(listed, o.Sum)
		}
		cmp := func(x, y [32]byte) int { return bytes.Compare(x[:], y[:]) }
		slices.SortFunc(listed, cmp)
		want := slices.SortedFunc(slices.Values(tc.own), cmp)
		if !slices.Equal(listed, want) {
			t.Errorf("%s lists %x, want %x", tc.name, listed, want)
		}
		for _, sum := range tc.others {
			has(t, tc.s, sum, false)
			if _, err := tc.s.Open(ctx, sum, 1); !errors.Is(err, ErrNotFound) {
				t.Errorf("%s opens %x of another prefix: %v", tc.name, sum[:4], err)
			}
		}
	}
	if err := a.Delete(ctx, both); err != nil {
		t.Fatal(err)
	}
	has(t, ab, both, true) // deleting under a leaves ab's copy
}

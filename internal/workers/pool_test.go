package workers

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/caddy-runtime/runtime/internal/sandbox"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testkit.Cleanup()
	os.Exit(code)
}

type echo struct {
	PID     int
	Path    string
	Headers map[string]string
	Env     []string
	Dir     string
}

func newPool(t testing.TB, size int) (*Pool, *observer.ObservedLogs) {
	t.Helper()
	return newPoolWith(t, size, sandbox.Options{})
}

// newPoolWith returns a pool whose sandbox has opts, and lets workers run the test worker.
func newPoolWith(t testing.TB, size int, opts sandbox.Options) (*Pool, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	// The test worker lives outside the version folders, so the sandbox lets workers run it.
	opts.ReadDirs = append(opts.ReadDirs, filepath.Dir(testkit.TestWorker(t)))
	sb, err := sandbox.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPool(PoolOptions{Size: size, Logger: zap.New(core), Path: os.Getenv("PATH"), Sandbox: sb, ScratchDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, logs
}

func manifest(t testing.TB, env map[string]string) Manifest {
	return Manifest{Command: []string{testkit.TestWorker(t)}, Env: env, Timeout: Duration(5 * time.Second),
		TTL: TTL{Duration: Duration(time.Minute)}, StartTimeout: Duration(5 * time.Second), MaxBodySize: DefaultMaxBodySize}
}

// get acquires the version and sends GET path to it.
func get(t testing.TB, p *Pool, name, dir string, m Manifest, path string) (echo, error) {
	t.Helper()
	l, err := p.Acquire(context.Background(), name, "1.0.0", dir, m)
	if err != nil {
		return echo{}, err
	}
	defer l.Release()
	// The lease's address is a loopback host:port, or a unix socket's path.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return new(net.Dialer).DialContext(ctx, l.Network(), l.Addr())
		}}}
	resp, err := client.Get("http://worker" + path)
	if err != nil {
		if lerr := l.Err(); lerr != nil {
			return echo{}, lerr // as the proxy answers
		}
		return echo{}, err
	}
	defer resp.Body.Close()
	var e echo
	return e, json.NewDecoder(resp.Body).Decode(&e)
}

func TestPoolStartsOnceWithACleanEnvironment(t *testing.T) {
	t.Setenv("RUNTIME_ROOT_KEY", "must-not-leak-0123456789")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "also-not")
	p, logs := newPool(t, 4)
	dir := t.TempDir()
	m := manifest(t, map[string]string{"GREETING": "hi", "PORT": "1"})
	const n = 100
	pids := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := get(t, p, "app", dir, m, "/")
			if err != nil {
				t.Error(err)
				return
			}
			pids <- e.PID
		}()
	}
	wg.Wait()
	close(pids)
	seen := map[int]bool{}
	for pid := range pids {
		seen[pid] = true
	}
	if len(seen) != 1 || p.Running() != 1 {
		t.Fatalf("%d processes served 100 concurrent first requests (running %d), want 1", len(seen), p.Running())
	}
	e, _ := get(t, p, "app", dir, m, "/")
	env := strings.Join(e.Env, "\n")
	for _, want := range []string{"GREETING=hi", "HOST=127.0.0.1", "HOME=" + dir, "PATH="} {
		if !strings.Contains(env, want) {
			t.Errorf("worker environment lacks %s:\n%s", want, env)
		}
	}
	if strings.Contains(env, "must-not-leak") || strings.Contains(env, "RUNTIME_") || strings.Contains(env, "also-not") || strings.Contains(env, "PORT=1\n") {
		t.Errorf("worker environment leaks:\n%s", env)
	}
	if e.Dir != dir {
		t.Errorf("worker runs in %s, want %s", e.Dir, dir)
	}
	if len(logs.FilterMessageSnippet("testworker listening").All()) != 1 {
		t.Errorf("the worker's stdout was not logged once: %v", logs.All())
	}
}

func TestPoolRestartsACrashWithBackoff(t *testing.T) {
	p, _ := newPool(t, 4)
	dir := t.TempDir()
	m := manifest(t, nil)
	first, err := get(t, p, "app", dir, m, "/")
	if err != nil {
		t.Fatal(err)
	}
	get(t, p, "app", dir, m, "/crash")
	testkit.Eventually(t, "the pool to notice the crash", 10*time.Second, func() bool { return !testkit.Alive(first.PID) && p.Running() == 0 })
	_, err = get(t, p, "app", dir, m, "/")
	var ue *UnavailableError
	if !errors.As(err, &ue) || ue.RetryAfter <= 0 {
		t.Fatalf("right after a crash: %v, want unavailable with a retry delay", err)
	}
	// Until the back-off passes the pool keeps answering unavailable; then it starts anew.
	var second echo
	testkit.EventuallyNil(t, ue.RetryAfter+10*time.Second, func() error {
		second, err = get(t, p, "app", dir, m, "/")
		if err != nil && !errors.As(err, &ue) {
			t.Fatalf("during the back-off: %v, want unavailable", err)
		}
		return err
	})
	if second.PID == first.PID {
		t.Fatalf("after the back-off: pid %d, the crashed one", second.PID)
	}
}

func TestPoolStopsIdleProcesses(t *testing.T) {
	p, _ := newPool(t, 4)
	m := manifest(t, nil)
	m.TTL = TTL{Duration: Duration(time.Second)}
	e, err := get(t, p, "app", t.TempDir(), m, "/")
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the idle stop", 10*time.Second, func() bool { return p.Running() == 0 && !testkit.Alive(e.PID) })
}

func TestPoolCapStopsTheLeastRecentlyUsed(t *testing.T) {
	p, _ := newPool(t, 2)
	m := manifest(t, nil)
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	var pids []int
	for i, d := range dirs {
		e, err := get(t, p, fmt.Sprint("app", i), d, m, "/")
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, e.PID) // each start takes far longer than the clock's resolution, so uses are ordered
	}
	testkit.Eventually(t, "the least recently used process to stop", 10*time.Second, func() bool { return !testkit.Alive(pids[0]) })
	if !testkit.Alive(pids[1]) || !testkit.Alive(pids[2]) || p.Running() != 2 {
		t.Fatalf("running %d; pids alive: %v %v", p.Running(), testkit.Alive(pids[1]), testkit.Alive(pids[2]))
	}
}

func TestPoolRecyclesAfterMaxRequests(t *testing.T) {
	p, _ := newPool(t, 4)
	dir := t.TempDir()
	m := manifest(t, nil)
	m.MaxRequests = 3
	var pids []int
	for range 7 {
		e, err := get(t, p, "app", dir, m, "/")
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, e.PID)
	}
	if pids[0] != pids[2] || pids[2] == pids[3] || pids[3] != pids[5] || pids[5] == pids[6] {
		t.Fatalf("pids %v: want a new process every 3 requests", pids)
	}
	// The recycled processes are stopped, not left running.
	testkit.Eventually(t, "recycled processes to exit", 10*time.Second, func() bool { return !testkit.Alive(pids[0]) && !testkit.Alive(pids[3]) })
	if p.Running() != 1 {
		t.Fatalf("running %d, want 1", p.Running())
	}
}

// TestPoolRecyclesUnderConcurrentRequests: requests that find a process without the pool's
// lock never reach one that is being stopped, while processes are recycled under them.
func TestPoolRecyclesUnderConcurrentRequests(t *testing.T) {
	p, _ := newPool(t, 4)
	dir := t.TempDir()
	m := manifest(t, nil)
	m.MaxRequests = 5
	const clients, each = 8, 25
	var (
		mu   sync.Mutex
		pids = map[int]int{}
		wg   sync.WaitGroup
	)
	for range clients {
		wg.Go(func() {
			for range each {
				e, err := get(t, p, "app", dir, m, "/")
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				pids[e.PID]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// Each process took at most maxRequests plus the requests that entered beside the one
	// that reached it.
	if least := clients * each / (int(m.MaxRequests) + clients - 1); len(pids) < least {
		t.Fatalf("%d processes served %d requests, want at least %d", len(pids), clients*each, least)
	}
	// Every process but the last one to answer exits; that one too when its answer was the
	// one that reached maxRequests.
	last, err := get(t, p, "app", dir, m, "/")
	if err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyNil(t, 10*time.Second, func() error {
		for pid := range pids {
			if pid != last.PID && testkit.Alive(pid) {
				return fmt.Errorf("recycled process %d is alive", pid)
			}
		}
		return nil
	})
	if n := p.Running(); n > 1 {
		t.Fatalf("running %d, want at most 1", n)
	}
}

// TestPoolStopUnitDrainsFirst: a stopped unit's process finishes its requests first, and a
// request that read the table just before (requests read it without the lock) does not get it.
func TestPoolStopUnitDrainsFirst(t *testing.T) {
	p, _ := newPool(t, 4)
	dir := t.TempDir()
	m := manifest(t, nil)
	l, err := p.Acquire(context.Background(), "app", "1.0.0", dir, m)
	if err != nil {
		t.Fatal(err)
	}
	pid := l.PID()
	done := make(chan error, 1)
	sent := make(chan struct{})
	go func() {
		req, _ := http.NewRequest("GET", "http://"+l.Addr()+"/sleep?d=500ms", nil)
		trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { close(sent) }}
		resp, err := http.DefaultClient.Do(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	select { // the request is on its way to the worker, in flight when StopUnit comes
	case <-sent:
	case err := <-done:
		t.Fatalf("the request failed before it was sent: %v", err)
	}
	stale := (*p.running.Load())[dir]
	p.StopUnit("app", "")
	if stale.enter() {
		stale.leave()
		l.Release() // else the pool's Close waits for them
		t.Fatal("a retired process took a request")
	}
	if n := stale.inflight.Load(); n != 1 {
		t.Fatalf("in flight %d after the refused request, want 1", n)
	}
	if err := <-done; err != nil {
		t.Fatalf("the in-flight request failed: %v", err)
	}
	if !testkit.Alive(pid) {
		t.Fatal("the process stopped before its request was released")
	}
	l.Release()
	testkit.Eventually(t, "the drained process to stop", 10*time.Second, func() bool { return !testkit.Alive(pid) })
	e, err := get(t, p, "app", dir, m, "/")
	if err != nil || e.PID == pid {
		t.Fatalf("after StopUnit: %v, pid %d", err, e.PID)
	}
}

func TestPoolStartFailures(t *testing.T) {
	p, _ := newPool(t, 4)
	m := manifest(t, map[string]string{"EXIT_AT_START": "1"})
	_, err := get(t, p, "app", t.TempDir(), m, "/")
	var ue *UnavailableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "exited before listening") {
		t.Fatalf("exit at start: %v", err)
	}
	slow := manifest(t, map[string]string{"START_DELAY": "3s"})
	slow.StartTimeout = Duration(300 * time.Millisecond)
	_, err = get(t, p, "slow", t.TempDir(), slow, "/")
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "startTimeout") {
		t.Fatalf("slow start: %v", err)
	}
	missing := Manifest{Entrypoint: "../escape", StartTimeout: Duration(time.Second)}
	if _, err := get(t, p, "esc", t.TempDir(), missing, "/"); err == nil || !strings.Contains(err.Error(), "inside the worker") {
		t.Fatalf("escaping entrypoint: %v", err)
	}
	if p.Running() != 0 {
		t.Fatalf("failed starts left %d processes", p.Running())
	}
}

func TestPoolCloseStopsEverything(t *testing.T) {
	p, _ := newPool(t, 4)
	var pids []int
	for i := range 3 {
		e, err := get(t, p, fmt.Sprint("app", i), t.TempDir(), manifest(t, nil), "/")
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, e.PID)
	}
	p.Close()
	for _, pid := range pids {
		if testkit.Alive(pid) {
			t.Fatalf("process %d survived Close", pid)
		}
	}
	if _, err := p.Acquire(context.Background(), "app", "1.0.0", t.TempDir(), manifest(t, nil)); !errors.Is(err, ErrPoolClosed) {
		t.Fatalf("Acquire after Close = %v", err)
	}
}

func TestPoolStatusAndRestart(t *testing.T) {
	p, _ := newPool(t, 4)
	dir := t.TempDir()
	m := manifest(t, nil)
	first, err := get(t, p, "app", dir, m, "/")
	if err != nil {
		t.Fatal(err)
	}
	st := p.Status()
	if len(st) != 1 || st[0].Name != "app" || st[0].Version != "1.0.0" || st[0].State != Running || st[0].PID <= 0 ||
		st[0].Requests != 1 || st[0].InFlight != 0 || st[0].StartedAt.IsZero() || st[0].LastRequest.IsZero() || st[0].Restarts != 0 {
		t.Fatalf("status after one request = %+v (worker pid %d)", st, first.PID)
	}
	// The worker runs under its sandbox's launcher, whose memory counts with the worker's.
	if own := rss(first.PID); own > 0 && st[0].RSS <= own {
		t.Errorf("RSS %d does not include the worker's own %d", st[0].RSS, own)
	}
	oldPID := st[0].PID

	// A request in flight finishes on the old process; the next one goes to the new.
	slow, err := p.Acquire(context.Background(), "app", "1.0.0", dir, m)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		resp, err := http.Get("http://" + slow.Addr() + "/sleep?d=300ms")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != 200 {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		slow.Release()
		done <- err
	}()
	// The lease holds the old process until it is released, whenever the request arrives.
	if got := p.Restart("app", ""); len(got) != 1 || got[0] != "1.0.0" {
		t.Fatalf("Restart = %v", got)
	}
	if got := p.Restart("other", ""); len(got) != 0 {
		t.Fatalf("Restart of a worker with no process = %v", got)
	}
	states := map[ProcState]int{}
	for _, s := range p.Status() {
		states[s.State]++
		if s.Restarts != 1 {
			t.Errorf("restarts = %d, want 1", s.Restarts)
		}
	}
	if states[Draining] != 1 || states[Starting]+states[Running] != 1 {
		t.Fatalf("states after a restart with a request in flight: %v", states)
	}
	second, err := get(t, p, "app", dir, m, "/")
	if err != nil || second.PID == first.PID {
		t.Fatalf("after the restart: pid %d (was %d), %v", second.PID, first.PID, err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the request in flight during the restart failed: %v", err)
	}
	testkit.Eventually(t, "the old process exits", 5*time.Second, func() bool { return !testkit.Alive(first.PID) && !testkit.Alive(oldPID) })
	// The pool hears of the exit just after the process is gone.
	testkit.Eventually(t, "the pool to list the new process alone", 5*time.Second, func() bool {
		st := p.Status()
		return len(st) == 1 && st[0].PID != oldPID && st[0].State == Running && st[0].Requests == 1
	})
}

// TestPoolIsolatedNetwork: in a network of its own the worker gets no port, serves on the
// listener it is handed as descriptor 3, and a worker that listens elsewhere fails to start
// within its startTimeout, saying why.
func TestPoolIsolatedNetwork(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a network namespace per worker needs root")
	}
	p, _ := newPoolWith(t, 4, sandbox.Options{IsolateNetwork: true})
	e, err := get(t, p, "app", t.TempDir(), manifest(t, map[string]string{"LISTEN_PID": "1"}), "/")
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Join(e.Env, "\n") + "\n"
	for _, want := range []string{"LISTEN_FDS=1\n", fmt.Sprintf("LISTEN_PID=%d\n", e.PID)} {
		if !strings.Contains(env, want) {
			t.Errorf("worker environment lacks %s:\n%s", want, env)
		}
	}
	if strings.Contains(env, "PORT=") || strings.Contains(env, "HOST=") || strings.Contains(env, "LISTEN_PID=1\n") {
		t.Errorf("worker environment in an isolated network:\n%s", env)
	}

	m := manifest(t, map[string]string{"IGNORE_LISTEN_FDS": "1"})
	m.StartTimeout = Duration(time.Second)
	_, err = get(t, p, "deaf", t.TempDir(), m, "/")
	if err == nil || !strings.Contains(err.Error(), "descriptor 3") || !strings.Contains(err.Error(), "startTimeout 1s") {
		t.Fatalf("a worker that ignores its listener: %v, want an error naming descriptor 3 and startTimeout", err)
	}
}

// TestPoolListen: a worker with listen: socket is handed its listener in the host's network,
// and takes requests from the moment it starts: they wait in the listener's queue. One that
// listens late still answers; one that never accepts there, or exits first, fails saying why,
// as does a worker on a port that never listens.
func TestPoolListen(t *testing.T) {
	p, _ := newPool(t, 8)
	socket := func(env map[string]string) Manifest {
		m := manifest(t, env)
		m.Listen = ListenSocket
		m.StartTimeout = Duration(2 * time.Second)
		return m
	}
	e, err := get(t, p, "sock", t.TempDir(), socket(map[string]string{"LISTEN_PID": "1"}), "/")
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Join(e.Env, "\n") + "\n"
	if !strings.Contains(env, "LISTEN_FDS=1\n") || !strings.Contains(env, fmt.Sprintf("LISTEN_PID=%d\n", e.PID)) || strings.Contains(env, "PORT=") {
		t.Errorf("environment of a worker with listen: socket:\n%s", env)
	}

	// Ready before it accepts: the lease comes while the probe still waits in the queue.
	late := t.TempDir()
	lm := socket(map[string]string{"START_DELAY": "3s"})
	lm.StartTimeout = Duration(20 * time.Second)
	l, err := p.Acquire(context.Background(), "late", "1.0.0", late, lm)
	if err != nil {
		t.Fatal(err)
	}
	if !l.p.cmd.Pending() {
		t.Error("the lease waited for the worker to accept")
	}
	l.Release()
	if _, err := get(t, p, "late", late, lm, "/"); err != nil {
		t.Errorf("a worker that accepts late: %v", err)
	}
	if _, err := get(t, p, "late-port", t.TempDir(), manifest(t, map[string]string{"START_DELAY": "300ms"}), "/"); err != nil {
		t.Errorf("a worker that listens on its port late: %v", err)
	}

	never := manifest(t, map[string]string{"TESTWORKER_MODE": "sleeper"})
	never.StartTimeout = Duration(time.Second)
	tests := []struct {
		name string
		m    Manifest
		want []string
	}{
		{"ignores its listener", socket(map[string]string{"IGNORE_LISTEN_FDS": "1"}), []string{"descriptor 3", "startTimeout 2s", "LISTEN_FDS"}},
		{"never listens on its listener", socket(map[string]string{"TESTWORKER_MODE": "sleeper"}), []string{"descriptor 3", "startTimeout 2s"}},
		{"exits before it accepts", socket(map[string]string{"EXIT_AT_START": "1"}), []string{"exited before accepting", "descriptor 3", "exit status 2"}},
		{"never listens on its port", never, []string{"did not listen on PORT", "startTimeout 1s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := get(t, p, tt.name, t.TempDir(), tt.m, "/")
			for _, want := range tt.want {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("error %v, want it to say %q", err, want)
				}
			}
		})
	}
}

// BenchmarkPoolLease takes and releases leases from parallel goroutines, on one running
// process and spread over sixteen: the pool's own cost per request, without the request.
func BenchmarkPoolLease(b *testing.B) {
	for _, procs := range []int{1, 16} {
		b.Run(fmt.Sprintf("processes=%d", procs), func(b *testing.B) {
			p, _ := newPool(b, procs)
			m := manifest(b, nil)
			dirs := make([]string, procs)
			for i := range dirs {
				dirs[i] = b.TempDir()
				if _, err := get(b, p, fmt.Sprintf("w%d", i), dirs[i], m, "/"); err != nil {
					b.Fatal(err)
				}
			}
			ctx := context.Background()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for i := 0; pb.Next(); i++ {
					l, err := p.Acquire(ctx, "w", "1.0.0", dirs[i%procs], m)
					if err != nil {
						b.Error(err)
						return
					}
					l.Release()
				}
			})
		})
	}
}

// TestPoolReleasesMemoryWhenEmpty: the pool hands the runtime's freed memory back once no
// process has run for releaseAfter, and not while one runs.
func TestPoolReleasesMemoryWhenEmpty(t *testing.T) {
	var released atomic.Int64
	orig := releaseMemory
	releaseMemory = func() { released.Add(1) }
	t.Cleanup(func() { releaseMemory = orig })
	p, _ := newPool(t, 4)
	m := manifest(t, nil)
	m.TTL = TTL{Duration: Duration(time.Second)}
	if _, err := get(t, p, "app", t.TempDir(), m, "/"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(releaseAfter / 2)
	if n := released.Load(); n != 0 {
		t.Fatalf("released %d times while a process runs", n)
	}
	testkit.Eventually(t, "the release after the idle stop", 10*time.Second, func() bool { return p.Running() == 0 && released.Load() == 1 })
	time.Sleep(2 * releaseAfter)
	if n := released.Load(); n != 1 {
		t.Errorf("released %d times for one empty spell, want 1", n)
	}
}

// TestPoolTakeConn: the connection the pool made to see a worker listen on its port is the
// first request's, once; it reaches the worker, and one not taken closes at the worker's exit.
func TestPoolTakeConn(t *testing.T) {
	p, _ := newPool(t, 4)
	l, err := p.Acquire(context.Background(), "app", "1.0.0", t.TempDir(), manifest(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	c := l.TakeConn()
	if c == nil {
		t.Fatal("no connection from the start to take")
	}
	defer c.Close()
	if again := l.TakeConn(); again != nil {
		t.Error("the start's connection was taken twice")
	}
	fmt.Fprint(c, "GET /hello HTTP/1.1\r\nHost: worker\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("a request on the start's connection: %v %v", resp, err)
	}
	resp.Body.Close()

	// Not taken: closed when the process exits.
	m := manifest(t, nil)
	m.TTL = TTL{Duration: Duration(time.Second)}
	other, err := p.Acquire(context.Background(), "idle", "1.0.0", t.TempDir(), m)
	if err != nil {
		t.Fatal(err)
	}
	held := other.p.firstConn.Load()
	other.Release()
	if held == nil {
		t.Fatal("no connection from the start")
	}
	testkit.Eventually(t, "the idle stop", 10*time.Second, func() bool { return other.p.firstConn.Load() == nil && p.Running() == 1 })
	if _, err := (*held).Read(make([]byte, 1)); err == nil {
		t.Error("the start's connection is open after the worker's exit")
	}
}

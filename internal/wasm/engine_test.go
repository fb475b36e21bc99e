package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/internal/testkit"
)

// moduleOf names a module held in memory.
func moduleOf(key string, binary []byte) Module {
	return Module{Key: key, Serial: 1, Read: func(int64) ([]byte, error) { return binary, nil }}
}

func newEngine(t *testing.T, opts Options) *Engine {
	t.Helper()
	e, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// shared is an engine the tests that count nothing share, so the test module compiles once.
var shared struct {
	once sync.Once
	e    *Engine
	err  error
}

func sharedEngine(t *testing.T) *Engine {
	t.Helper()
	shared.once.Do(func() { shared.e, shared.err = New(Options{}) })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.e
}

func readTestModule(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(testkit.TestWasm(t))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// cgi runs the test module with the CGI variables of path and query and parses the answer.
func cgi(t *testing.T, e *Engine, mod Module, req Request, path, query string) (*Response, error) {
	t.Helper()
	req.Env = append(req.Env, "REQUEST_METHOD=GET", "PATH_INFO="+path, "QUERY_STRING="+query)
	if req.Args == nil {
		req.Args = []string{"app.wasm"}
	}
	out, err := e.Run(context.Background(), mod, req)
	if err != nil {
		return nil, err
	}
	return ParseCGI(out, 0)
}

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		binary   []byte
		want     string // "" accepts
		database bool   // the manifest says database: true
	}{
		{"tiny", testkit.TinyWasm("Content-Type: text/plain\n\nhi", WASI, "fd_write"), "", false},
		{"go", readTestModule(t), "", false},
		{"not wasm", []byte("#!/bin/sh\necho hi\n"), "not a WebAssembly module", false},
		{"text format", []byte("(module (func))"), "WebAssembly text", false},
		{"empty", nil, "not a WebAssembly module", false},
		{"version 2", []byte{0, 'a', 's', 'm', 2, 0, 0, 0}, "version 1", false},
		{"truncated", testkit.TinyWasm("x", WASI, "fd_write")[:40], "not a valid WebAssembly module", false},
		{"other host module", testkit.TinyWasm("x", "env", "socket_connect"), "env.socket_connect", false},
		{"unknown WASI function", testkit.TinyWasm("x", WASI, "sock_open"), "wasi_snapshot_preview1.sock_open", false},
		{"the database without database: true", testkit.TinyWasm("x", DatabaseModule, "execute"), "set database: true", false},
		{"the database with database: true", testkit.TinyWasm("x", DatabaseModule, "execute"), "", true},
		{"an unknown database function", testkit.TinyWasm("x", DatabaseModule, "open"), "runtime_database.open", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.binary, tc.database)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Check = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Check = %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

func TestRunTiny(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Options{})
	resp, err := cgi(t, e, moduleOf("tiny", testkit.TinyWasm("Status: 201\nContent-Type: text/plain\nX-A: b\n\nhello", WASI, "fd_write")), Request{}, "/", "")
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 201 || resp.Header.Get("X-A") != "b" || string(resp.Body) != "hello" {
		t.Fatalf("answer = %d %v %q", resp.Status, resp.Header, resp.Body)
	}
}

func TestRunEcho(t *testing.T) {
	t.Parallel()
	e := sharedEngine(t)
	mod := moduleOf("go", readTestModule(t))
	resp, err := cgi(t, e, mod, Request{Stdin: []byte("the body"), Env: []string{"HTTP_X_ONE=1"}}, "/a/b", "status=418&x=1")
	if err != nil {
		t.Fatal(err)
	}
	var echo struct {
		Method, Path, Query, Body string
		Env                       map[string]string
		Args                      []string
	}
	if err := json.Unmarshal(resp.Body, &echo); err != nil {
		t.Fatalf("%v: %s", err, resp.Body)
	}
	if resp.Status != 418 || resp.Header.Get("Content-Type") != "application/json" || len(resp.Header.Values("Set-Cookie")) != 2 {
		t.Errorf("answer = %d %v", resp.Status, resp.Header)
	}
	if echo.Method != "GET" || echo.Path != "/a/b" || echo.Query != "status=418&x=1" || echo.Body != "the body" ||
		echo.Env["HTTP_X_ONE"] != "1" || len(echo.Args) != 1 || echo.Args[0] != "app.wasm" {
		t.Errorf("echo = %+v", echo)
	}
	if len(echo.Env) != 4 {
		t.Errorf("environment = %v, want only the request's", echo.Env)
	}
}

func TestRunLimits(t *testing.T) {
	t.Parallel()
	e := sharedEngine(t)
	mod := moduleOf("go", readTestModule(t))
	// Compiled first, so the time limit stops the loop, not the compilation.
	if resp, err := cgi(t, e, mod, Request{}, "/", ""); err != nil || resp.Status != 200 {
		t.Fatalf("before the limits: %v %v", resp, err)
	}
	t.Run("time", func(t *testing.T) {
		_, err := e.Run(context.Background(), mod, Request{Env: []string{"PATH_INFO=/loop"}, Timeout: 300 * time.Millisecond})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a loop = %v, want the deadline", err)
		}
	})
	t.Run("asleep", func(t *testing.T) {
		start := time.Now()
		_, err := e.Run(context.Background(), mod, Request{Env: []string{"PATH_INFO=/global", "QUERY_STRING=wait=60000"}, Timeout: 300 * time.Millisecond})
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 30*time.Second {
			t.Fatalf("a minute's sleep = %v after %s, want the deadline", err, time.Since(start))
		}
	})
	t.Run("context", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := e.Run(ctx, mod, Request{Env: []string{"PATH_INFO=/loop"}})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a loop = %v, want the context's deadline", err)
		}
	})
	t.Run("memory", func(t *testing.T) {
		_, err := e.Run(context.Background(), mod, Request{Env: []string{"PATH_INFO=/alloc"}, Memory: 64 << 20})
		var mem *MemoryError
		if !errors.As(err, &mem) || mem.Limit != 64<<20 {
			t.Fatalf("allocating past the limit = %v, want a MemoryError", err)
		}
	})
	t.Run("initial memory", func(t *testing.T) {
		_, err := e.Run(context.Background(), mod, Request{Memory: 64 << 10})
		var mem *MemoryError
		if !errors.As(err, &mem) {
			t.Fatalf("a limit under the initial memory = %v, want a MemoryError", err)
		}
	})
	t.Run("output", func(t *testing.T) {
		_, err := e.Run(context.Background(), mod, Request{Env: []string{"PATH_INFO=/big", "QUERY_STRING=n=200000"}, MaxOutput: 100000})
		if !errors.Is(err, ErrOutput) {
			t.Fatalf("output past the limit = %v", err)
		}
	})
	t.Run("exit", func(t *testing.T) {
		_, err := e.Run(context.Background(), mod, Request{Env: []string{"PATH_INFO=/exit", "QUERY_STRING=code=3"}})
		var exit *ExitError
		if !errors.As(err, &exit) || exit.Code != 3 {
			t.Fatalf("exit 3 = %v", err)
		}
	})
	// After all that, the module still answers.
	if resp, err := cgi(t, e, mod, Request{}, "/", ""); err != nil || resp.Status != 200 {
		t.Fatalf("after the limits: %v %v", resp, err)
	}
}

func TestRunFiles(t *testing.T) {
	t.Parallel()
	e := sharedEngine(t)
	mod := moduleOf("go", readTestModule(t))
	top := t.TempDir()
	dir := filepath.Join(top, "version")
	for path, body := range map[string]string{"version/inside.txt": "inside", "secret.txt": "secret"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(top, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(top, path), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(top, "secret.txt"), filepath.Join(dir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, tc := range []struct {
		path, want string
	}{
		{"/inside.txt", "inside"},
		{"inside.txt", "inside"},
		{"../secret.txt", ""},
		{"/../secret.txt", ""},
		{filepath.Join(top, "secret.txt"), ""},
		{"/link.txt", ""},
		{"/etc/passwd", ""},
	} {
		resp, err := cgi(t, e, mod, Request{FS: root.FS()}, "/read", "path="+tc.path)
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		if tc.want == "" && resp.Status != 404 || tc.want != "" && string(resp.Body) != tc.want {
			t.Errorf("reading %s = %d %q", tc.path, resp.Status, resp.Body)
		}
	}
	if resp, _ := cgi(t, e, mod, Request{FS: root.FS()}, "/read", "path=/inside.txt"); resp == nil || string(resp.Body) != "inside" {
		t.Fatalf("reading inside: %v", resp)
	}
}

// TestRunFresh runs requests at the same time: each has an instance of its own.
func TestRunFresh(t *testing.T) {
	t.Parallel()
	e := sharedEngine(t)
	mod := moduleOf("go", readTestModule(t))
	var wg sync.WaitGroup
	got := make([]string, 4)
	for i := range got {
		wg.Go(func() {
			resp, err := cgi(t, e, mod, Request{}, "/global", fmt.Sprintf("set=v%d&wait=300", i))
			if err != nil {
				got[i] = err.Error()
				return
			}
			got[i] = string(resp.Body)
		})
	}
	wg.Wait()
	for i, g := range got {
		if want := fmt.Sprintf("|v%d", i); g != want {
			t.Errorf("request %d read %q, want %q", i, g, want)
		}
	}
}

func TestCompileOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	binary := readTestModule(t)
	var observed sync.Map
	e := newEngine(t, Options{CacheDir: dir, Observe: func(cached bool) { observed.Store(cached, true) }})
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			if _, err := cgi(t, e, moduleOf("go", binary), Request{}, "/", ""); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if s := e.Stats(); s.Compiled != 1 || s.Cached != 0 || s.Modules != 1 {
		t.Fatalf("six first requests: %+v, want one compilation", s)
	}
	// Another engine on the same folder, as after a restart, compiles nothing.
	again := newEngine(t, Options{CacheDir: dir})
	if _, err := cgi(t, again, moduleOf("go", binary), Request{}, "/", ""); err != nil {
		t.Fatal(err)
	}
	if s := again.Stats(); s.Compiled != 0 || s.Cached != 1 {
		t.Fatalf("after a restart: %+v, want one cache hit and no compilation", s)
	}
	if _, ok := observed.Load(false); !ok {
		t.Error("the compilation was not observed")
	}
}

func TestBudget(t *testing.T) {
	t.Parallel()
	one := entryOverhead + codeFactor*int64(len(testkit.TinyWasm("Content-Type: text/plain\n\n0", WASI, "fd_write"))) + functionCost
	e := newEngine(t, Options{Budget: 2*one + one/2})
	run := func(i int) {
		t.Helper()
		mod := moduleOf(fmt.Sprint(i), testkit.TinyWasm(fmt.Sprintf("Content-Type: text/plain\n\n%d", i), WASI, "fd_write"))
		resp, err := cgi(t, e, mod, Request{}, "/", "")
		if err != nil || string(resp.Body) != fmt.Sprint(i) {
			t.Fatalf("module %d: %v %v", i, resp, err)
		}
	}
	for i := range 4 {
		run(i)
	}
	if s := e.Stats(); s.Modules != 2 || s.Compiled != 4 || s.Bytes > 2*one+one/2 {
		t.Fatalf("four modules under a budget of two: %+v", s)
	}
	run(3) // kept: no compilation
	run(0) // dropped: compiled again
	if s := e.Stats(); s.Compiled != 5 {
		t.Fatalf("after running a kept and a dropped module: %+v, want 5 compilations", s)
	}
	// A new read of a module compiles it again and drops the old one.
	mod := moduleOf("3", testkit.TinyWasm("Content-Type: text/plain\n\nnew", WASI, "fd_write"))
	mod.Serial = 2
	if resp, err := cgi(t, e, mod, Request{}, "/", ""); err != nil || string(resp.Body) != "new" {
		t.Fatalf("the changed module: %v %v", resp, err)
	}
	if s := e.Stats(); s.Modules != 2 {
		t.Fatalf("after a change: %+v", s)
	}
	e.Forget("3")
	if s := e.Stats(); s.Modules != 1 {
		t.Fatalf("after forgetting module 3: %+v", s)
	}
}

// TestWarm: Recent lists the kept modules, the most recently used first; Warm makes a module
// ready so its first request compiles nothing, and stops once the budget is full rather than
// pushing out what it warmed before.
func TestWarm(t *testing.T) {
	t.Parallel()
	tiny := func(i int) Module {
		return moduleOf(fmt.Sprint(i), testkit.TinyWasm(fmt.Sprintf("Content-Type: text/plain\n\n%d", i), WASI, "fd_write"))
	}
	one := entryOverhead + codeFactor*int64(len(testkit.TinyWasm("Content-Type: text/plain\n\n0", WASI, "fd_write"))) + functionCost
	e := newEngine(t, Options{Budget: 2 * one})
	for _, i := range []int{0, 1} {
		if ok, err := e.Warm(context.Background(), tiny(i)); !ok || err != nil {
			t.Fatalf("warming module %d: %v %v", i, ok, err)
		}
	}
	if ok, err := e.Warm(context.Background(), tiny(2)); ok || err != nil {
		t.Fatalf("warming a third module past a budget of two: %v %v, want refused", ok, err)
	}
	if s := e.Stats(); s.Compiled != 2 || s.Modules != 2 {
		t.Fatalf("after warming two: %+v", s)
	}
	if resp, err := cgi(t, e, tiny(0), Request{}, "/", ""); err != nil || string(resp.Body) != "0" {
		t.Fatalf("module 0 after warming: %v %v", resp, err)
	}
	if s := e.Stats(); s.Compiled != 2 {
		t.Fatalf("the first request to a warmed module compiled it: %+v", s)
	}
	if got := e.Recent(); strings.Join(got, ",") != "0,1" {
		t.Errorf("Recent = %q, want the module just run first", got)
	}
	if _, err := newEngine(t, Options{}).Warm(context.Background(), moduleOf("bad", []byte("not wasm"))); err == nil {
		t.Error("warming a module that does not compile gave no error")
	}
}

func TestCompileError(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Options{})
	_, err := e.Run(context.Background(), moduleOf("bad", testkit.TinyWasm("x", "env", "f")), Request{})
	var ce *CompileError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "env.f") {
		t.Fatalf("a module importing env.f = %v", err)
	}
}

// cacheFileSet lists the files of the disk cache in dir.
func cacheFileSet(t *testing.T, dir string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out[path] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPruneCache: pruning the disk cache removes the modules unused for the cache age, then
// the least recently used past the cache size, and files wazero left half written; a module
// removed compiles again on the next start, one kept comes from the cache.
func TestPruneCache(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := newEngine(t, Options{CacheDir: dir, CacheAge: 30 * 24 * time.Hour})
	modules := map[string]Module{}
	files := map[string]string{} // module → its cache file
	sizes := map[string]int64{}
	for _, name := range []string{"old", "idle", "used"} {
		before := cacheFileSet(t, dir)
		modules[name] = moduleOf(name, testkit.TinyWasm("Content-Type: text/plain\n\n"+name, WASI, "fd_write"))
		if resp, err := cgi(t, e, modules[name], Request{}, "/", ""); err != nil || string(resp.Body) != name {
			t.Fatalf("module %s: %v %v", name, resp, err)
		}
		for f := range cacheFileSet(t, dir) {
			if !before[f] {
				files[name] = f
				info, err := os.Stat(f)
				if err != nil {
					t.Fatal(err)
				}
				sizes[name] = info.Size()
			}
		}
		if files[name] == "" {
			t.Fatalf("module %s left no file in the cache", name)
		}
	}
	now := time.Now()
	touch := func(path string, ago time.Duration) {
		t.Helper()
		if err := os.Chtimes(path, now.Add(-ago), now.Add(-ago)); err != nil {
			t.Fatal(err)
		}
	}
	touch(files["old"], 31*24*time.Hour)
	touch(files["idle"], 48*time.Hour)
	touch(files["used"], time.Minute)
	cacheDir := filepath.Dir(files["used"])
	for name, ago := range map[string]time.Duration{"stale.tmp": 2 * time.Hour, "writing.tmp": time.Minute} {
		path := filepath.Join(cacheDir, files["used"][len(cacheDir)+1:]+"."+name)
		if err := os.WriteFile(path, []byte("half"), 0o600); err != nil {
			t.Fatal(err)
		}
		touch(path, ago)
	}
	// Room for the module used a minute ago and the file being written, not for the idle one.
	e.SetCacheSize(sizes["used"] + sizes["idle"] - 1)

	removed, freed, err := e.PruneCache(now)
	if err != nil {
		t.Fatal(err)
	}
	if want := sizes["old"] + sizes["idle"] + 4; removed != 3 || freed != want {
		t.Errorf("pruning removed %d files of %d bytes, want 3 of %d", removed, freed, want)
	}
	left := cacheFileSet(t, dir)
	if len(left) != 2 || !left[files["used"]] || !left[files["used"]+".writing.tmp"] {
		t.Errorf("after pruning the cache holds %v, want the used module and the file being written", left)
	}

	// As after a restart: the module kept comes from the cache, those removed compile again.
	again := newEngine(t, Options{CacheDir: dir})
	for name, mod := range modules {
		if resp, err := cgi(t, again, mod, Request{}, "/", ""); err != nil || string(resp.Body) != name {
			t.Fatalf("module %s after pruning: %v %v", name, resp, err)
		}
	}
	if s := again.Stats(); s.Cached != 1 || s.Compiled != 2 {
		t.Errorf("after pruning: %+v, want one module from the cache and two compiled", s)
	}
	// Pruning a cache it empties leaves the engine able to write into it.
	if err := os.Remove(files["used"] + ".writing.tmp"); err != nil {
		t.Fatal(err)
	}
	again.SetCacheSize(1)
	if _, _, err := again.PruneCache(now); err != nil {
		t.Fatal(err)
	}
	if left := cacheFileSet(t, dir); len(left) != 0 {
		t.Fatalf("a cache of one byte holds %v", left)
	}
	fresh := moduleOf("fresh", testkit.TinyWasm("Content-Type: text/plain\n\nfresh", WASI, "fd_write"))
	if resp, err := cgi(t, again, fresh, Request{}, "/", ""); err != nil || string(resp.Body) != "fresh" {
		t.Fatalf("a module compiled after the cache was emptied: %v %v", resp, err)
	}
	if len(cacheFileSet(t, dir)) != 1 {
		t.Errorf("the module compiled after the cache was emptied is not in it: %v", cacheFileSet(t, dir))
	}
	// An engine without a disk cache has nothing to prune.
	if n, _, err := newEngine(t, Options{}).PruneCache(now); n != 0 || err != nil {
		t.Errorf("pruning without a disk cache: %d %v", n, err)
	}
}

// TestRunData gives an instance a data folder read-write at DataDir: what it writes there
// stays for the next instance, its writes are bounded by DataRoom, and no symbolic link, made
// by it or planted before, leads it to the folder beside (another worker's).
func TestRunData(t *testing.T) {
	t.Parallel()
	e := sharedEngine(t)
	mod := moduleOf("go", readTestModule(t))
	top := t.TempDir()
	data, other := filepath.Join(top, "mine"), filepath.Join(top, "other")
	for _, dir := range []string{data, other} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(other, "rows.txt"), []byte("theirs\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../other", filepath.Join(data, "planted")); err != nil {
		t.Fatal(err)
	}
	env := []string{"DATABASE_PATH=" + DataDir + "/db.sqlite"}
	run := func(path, query string) *Response {
		t.Helper()
		resp, err := cgi(t, e, mod, Request{Env: env, Data: data}, path, query)
		if err != nil {
			t.Fatalf("%s?%s: %v", path, query, err)
		}
		return resp
	}
	for _, v := range []string{"one", "two"} {
		if resp := run("/append", "v="+v); resp.Status != 200 {
			t.Fatalf("append %s = %d %s", v, resp.Status, resp.Body)
		}
	}
	if resp := run("/read", "path="+DataDir+"/rows.txt"); string(resp.Body) != "one\ntwo\n" {
		t.Errorf("the next instance reads %d %q, want both rows", resp.Status, resp.Body)
	}
	for _, tc := range []struct{ path, query string }{
		{"/read", "path=" + DataDir + "/planted/rows.txt"},
		{"/read", "path=" + DataDir + "/../other/rows.txt"},
		{"/symlink", "name=made&target=../other/rows.txt"},
		{"/symlink", "name=abs&target=" + filepath.Join(other, "rows.txt")},
	} {
		if resp := run(tc.path, tc.query); resp.Status == 200 || strings.Contains(string(resp.Body), "theirs") {
			t.Errorf("%s?%s reached the folder beside: %d %q", tc.path, tc.query, resp.Status, resp.Body)
		}
	}
	if resp := run("/append", "file=planted/rows.txt&v=mine"); resp.Status == 200 {
		t.Errorf("writing through a planted link = %d %q", resp.Status, resp.Body)
	}
	if b, _ := os.ReadFile(filepath.Join(other, "rows.txt")); string(b) != "theirs\n" {
		t.Errorf("the folder beside holds %q", b)
	}
	var refused, room atomic.Int64
	room.Store(200 << 10)
	resp, err := cgi(t, e, mod, Request{Env: env, Data: data, DataRoom: &room, DataFull: func() { refused.Add(1) }}, "/fill", "n=100&kib=64")
	if err != nil || !strings.HasPrefix(string(resp.Body), "wrote 3, error") || refused.Load() == 0 {
		t.Errorf("filling a room of 200 KiB by 64 KiB = %v %v (%d writes refused), want 3 writes, an error, and the refusal told", resp, err, refused.Load())
	}
	// The room is what is left: the next instance sharing it writes no more than that.
	resp, err = cgi(t, e, mod, Request{Env: env, Data: data, DataRoom: &room}, "/fill", "n=100&kib=64")
	if err != nil || !strings.HasPrefix(string(resp.Body), "wrote 0, error") || room.Load() != 200<<10-3*64<<10 {
		t.Errorf("an instance sharing the room left = %v %v (room %d)", resp, err, room.Load())
	}
	if info, err := os.Stat(filepath.Join(data, "fill.bin")); err != nil || info.Size() != 3*64<<10 {
		t.Errorf("fill.bin: %v %v", info, err)
	}
}

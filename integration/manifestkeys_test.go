package integration

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// The older implementation's manifest keys of code workers, through the real binary: .env,
// envPrefix, injectBase, the header caps and ttl: 0.

// uploadWorker uploads the test worker as name@version with extra manifest lines and files.
func uploadWorker(t *testing.T, s *harness.Server, name, version, extra string, files ...harness.File) *harness.Response {
	t.Helper()
	return s.Upload(s.API+"/workers/upload", name+".tgz", testWorkerArchive(t, name, version, extra, files...), harness.WithKey(rootKey))
}

// TestDotEnvOverEnv: the .env of the version folder is merged over the manifest's env, its
// value winning for the same name; a .env that cannot be read, or sets a variable of the
// runtime's, refuses the upload naming the line or the name; a static folder's .env is never
// answered.
func TestDotEnvOverEnv(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	for _, tc := range []struct{ file, says string }{
		{"GOOD=1\nBAD-NAME=2\n", ".env line 2"},
		{"A=1\nB=\"open\nC=3\n", ".env line 2"},
		{"PORT=8080\n", ".env PORT is set by the runtime"},
	} {
		resp := uploadWorker(t, s, "bad", "1.0.0", "", harness.File{Name: ".env", Body: tc.file})
		if resp.Status != 400 || resp.ErrorCode() != "INVALID_MANIFEST" || !strings.Contains(string(resp.Body), tc.says) {
			t.Errorf(".env %q: upload = %s, want 400 INVALID_MANIFEST naming %q", tc.file, resp, tc.says)
		}
	}

	resp := uploadWorker(t, s, "app", "1.0.0", "env: {SHARED: from-env, ONLY_ENV: env}\n",
		harness.File{Name: ".env", Body: "# the deploy's own settings\nSHARED=from-dotenv\nexport ONLY_DOTENV='dot env'\n"})
	if resp.Status != 200 {
		t.Fatalf("upload = %s", resp)
	}
	e := echoOf(t, s.Get("/app/"))
	for name, want := range map[string]string{"SHARED": "from-dotenv", "ONLY_ENV": "env", "ONLY_DOTENV": "dot env"} {
		if got, ok := envOf(e, name); !ok || got != want {
			t.Errorf("the worker's %s = %q (set %v), want %q", name, got, ok, want)
		}
	}
	// A process worker's every path is the worker's: the file is not answered.
	if e := echoOf(t, s.Get("/app/.env")); e.Path != "/.env" {
		t.Errorf("GET /app/.env reached the worker at %q", e.Path)
	}

	site := filepath.Join(s.DataDir, "apps", "site", "1.0.0")
	writeFiles(t, site, map[string]string{"manifest.yaml": "name: site\nversion: 1.0.0\n", "index.html": "<p>hi</p>",
		".env": "API_TOKEN=do-not-serve\n", "sub/.env": "API_TOKEN=do-not-serve\n"})
	testkit.EventuallyNil(t, 15*time.Second, func() error {
		if resp := s.Get("/site/"); resp.Status != 200 {
			return fmt.Errorf("GET /site/ = %s", resp)
		}
		return nil
	})
	for _, p := range []string{"/site/.env", "/site/sub/.env", "/site/%2eenv", "/site/sub/../.env"} {
		if resp := s.Get(p); resp.Status != 404 || strings.Contains(string(resp.Body), "do-not-serve") {
			t.Errorf("GET %s = %s, want 404 without the file", p, resp)
		}
	}
}

// TestEnvPrefixReachesWindowEnv: the variables of env and .env named with an envPrefix (by
// default PUBLIC_ and VITE_) reach the worker's HTML answers as window.__env__, escaped so no
// value closes the script; a secret never does, even one whose name matches and which the
// manifest's env also names; JSON answers are untouched; envPrefix: [] injects nothing. Both
// ways to a worker are checked: its port, and the socket it is handed (listen: socket).
func TestEnvPrefixReachesWindowEnv(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey, "RUNTIME_SECRETS_KEY": newSecretsKey(t)}})
	env := "env: {PUBLIC_GREETING: hi, PUBLIC_TOKEN: placeholder, PRIVATE_KEY: hidden, PUBLIC_EVIL: \"</script><script>alert(1)</script>\"}\n"
	dotenv := harness.File{Name: ".env", Body: "VITE_MODE=dev\n"}
	for _, name := range []string{"port", "sock"} {
		extra := env
		if name == "sock" {
			extra += "listen: socket\n"
		}
		if resp := uploadWorker(t, s, name, "1.0.0", extra, dotenv); resp.Status != 200 {
			t.Fatalf("upload = %s", resp)
		}
		setSecret(t, s, rootKey, name, "PUBLIC_TOKEN", "s3cret-value")
	}
	if resp := uploadWorker(t, s, "none", "1.0.0", env+"envPrefix: []\n"); resp.Status != 200 {
		t.Fatalf("upload = %s", resp)
	}
	want := `<head><script>window.__env__={"PUBLIC_EVIL":"\u003c/script\u003e\u003cscript\u003ealert(1)\u003c/script\u003e","PUBLIC_GREETING":"hi","VITE_MODE":"dev"};</script><title>`
	for _, name := range []string{"port", "sock"} {
		for _, path := range []string{"/html", "/html?stream=1"} {
			var resp *harness.Response
			testkit.EventuallyNil(t, 15*time.Second, func() error { // the secret's change restarts the worker
				resp = s.Get("/" + name + path)
				if !strings.Contains(string(resp.Body), "window.__env__") {
					return fmt.Errorf("GET /%s%s = %s", name, path, resp)
				}
				return nil
			})
			body := string(resp.Body)
			if resp.Status != 200 || !strings.Contains(body, want) {
				t.Errorf("GET /%s%s = %s, want the public variables after <head>: %s", name, path, resp, want)
			}
			for _, leak := range []string{"s3cret-value", "placeholder", "PUBLIC_TOKEN", "hidden", "</script><script>alert"} {
				if strings.Contains(body, leak) {
					t.Errorf("GET /%s%s shows %q: %s", name, path, leak, body)
				}
			}
		}
		if got, _ := envOf(echoOf(t, s.Get("/"+name+"/")), "PUBLIC_TOKEN"); got != "s3cret-value" {
			t.Errorf("the worker's PUBLIC_TOKEN = %q, want the secret's value", got)
		}
		if resp := s.Get("/" + name + "/"); strings.Contains(string(resp.Body), "window.__env__") {
			t.Errorf("a JSON answer got the script: %s", resp)
		}
	}
	if resp := s.Get("/none/html"); resp.Status != 200 || strings.Contains(string(resp.Body), "<script") {
		t.Errorf("envPrefix: [] = %s, want no script", resp)
	}
}

// TestInjectBaseOnProcessWorkers: injectBase gives a process worker's HTML answers a
// <base href> of the base they were asked under (a pin's too), whole or streamed, on both ways
// to the worker, with a Content-Length that fits; a worker without it gets none.
func TestInjectBaseOnProcessWorkers(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	for name, extra := range map[string]string{"app": "injectBase: true\n", "sock": "injectBase: true\nlisten: socket\n", "plain": ""} {
		if resp := uploadWorker(t, s, name, "1.0.0", extra); resp.Status != 200 {
			t.Fatalf("upload = %s", resp)
		}
	}
	for _, tc := range []struct{ path, base string }{
		{"/app/html", "/app/"}, {"/app/html?stream=1", "/app/"}, {"/app@1.0.0/html", "/app@1.0.0/"},
		{"/sock/html", "/sock/"}, {"/sock/html?stream=1", "/sock/"}, {"/plain/html", ""},
	} {
		resp := s.Get(tc.path)
		body := string(resp.Body)
		tag := `<head><base href="` + tc.base + `"><title>testworker</title>`
		switch {
		case resp.Status != 200:
			t.Errorf("GET %s = %s", tc.path, resp)
		case tc.base != "" && !strings.Contains(body, tag):
			t.Errorf("GET %s = %s, want %s", tc.path, resp, tag)
		case tc.base == "" && strings.Contains(body, "<base"):
			t.Errorf("GET %s = %s, want no <base>", tc.path, resp)
		case resp.Header.Get("Content-Length") != "" && resp.Header.Get("Content-Length") != fmt.Sprint(len(body)):
			t.Errorf("GET %s: Content-Length %s for %d bytes", tc.path, resp.Header.Get("Content-Length"), len(body))
		}
	}
}

// TestHeaderCaps: a request to a process worker past a header cap (100 lines, 8 KiB a value,
// 64 KiB in all) is answered 431 before it reaches the worker; an answer past one, 502 naming
// the cap, on both ways to the worker. Caddy's own cap of a request's head (16 KiB by
// default) is raised, so the 64 KiB in all is reached.
func TestHeaderCaps(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, Global: "servers {\n\tmax_header_size 1MB\n}"})
	for name, extra := range map[string]string{"app": "", "sock": "listen: socket\n"} {
		if resp := uploadWorker(t, s, name, "1.0.0", extra); resp.Status != 200 {
			t.Fatalf("upload = %s", resp)
		}
	}
	many := func(n, size int) []harness.Option {
		var opts []harness.Option
		for i := range n {
			opts = append(opts, harness.WithHeader(fmt.Sprintf("X-Many-%d", i), strings.Repeat("v", size)))
		}
		return opts
	}
	for _, tc := range []struct {
		name string
		opts []harness.Option
		says string
	}{
		{"101 lines", many(101, 10), "header lines, past the cap of 100"},
		{"a value of 9 KiB", many(1, 9<<10), "past the cap of 8 KiB a value"},
		{"70 KiB in all", many(10, 7<<10), "past the cap of 64 KiB in all"},
	} {
		resp := s.Get("/app/", tc.opts...)
		if resp.Status != 431 || resp.ErrorCode() != "REQUEST_HEADERS_TOO_LARGE" || !strings.Contains(string(resp.Body), tc.says) {
			t.Errorf("request with %s = %s, want 431 REQUEST_HEADERS_TOO_LARGE saying %q", tc.name, resp, tc.says)
		}
	}
	if e := echoOf(t, s.Get("/app/", many(60, 100)...)); e.Headers["X-Many-59"] == "" {
		t.Errorf("a request within the caps reached the worker without its headers: %v", e.Headers)
	}

	set := func(n, size int) string {
		q := url.Values{}
		for i := range n {
			q.Add("set", fmt.Sprintf("X-Answer-%d:%s", i, strings.Repeat("a", size)))
		}
		return "?" + q.Encode()
	}
	for _, name := range []string{"app", "sock"} {
		for _, tc := range []struct{ what, path, says string }{
			{"about 120 lines", "/headers?n=8000", "header lines, past the cap of 100"},
			{"a value of 9 KiB", "/" + set(1, 9<<10), "past the cap of 8 KiB a value"},
			{"70 KiB in all", "/" + set(10, 7<<10), "past the cap of 64 KiB in all"},
		} {
			resp := s.Get("/" + name + tc.path)
			if resp.Status != 502 || resp.ErrorCode() != "WORKER_HEADERS_TOO_LARGE" || !strings.Contains(string(resp.Body), tc.says) {
				t.Errorf("%s: an answer with %s = %s, want 502 WORKER_HEADERS_TOO_LARGE saying %q", name, tc.what, resp, tc.says)
			}
		}
		if resp := s.Get("/" + name + "/" + set(50, 100)); resp.Status != 200 || resp.Header.Get("X-Answer-49") == "" {
			t.Errorf("%s: an answer within the caps = %s", name, resp)
		}
	}
}

// TestFreshProcessPerRequest: ttl: 0 written out starts a new process for each request,
// stopped once it has answered, where an absent ttl keeps one process; past
// worker_fresh_concurrency running and worker_fresh_queue waiting, a request is answered 503
// with the gate's state.
func TestFreshProcessPerRequest(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey},
		App: "worker_fresh_concurrency 1\nworker_fresh_queue 1"})
	for name, extra := range map[string]string{"fresh": "ttl: 0\n", "kept": ""} {
		if resp := uploadWorker(t, s, name, "1.0.0", extra); resp.Status != 200 {
			t.Fatalf("upload = %s", resp)
		}
	}
	pids := map[int]bool{}
	for range 3 {
		pids[echoOf(t, s.Get("/fresh/")).PID] = true
	}
	if len(pids) != 3 {
		t.Errorf("ttl: 0 served 3 requests with processes %v, want 3 of them", pids)
	}
	kept := echoOf(t, s.Get("/kept/")).PID
	if again := echoOf(t, s.Get("/kept/")).PID; again != kept {
		t.Errorf("without ttl two requests had processes %d and %d, want one", kept, again)
	}
	// Each fresh process stops once it has answered.
	// Each fresh process stops once it has answered; then none runs.
	testkit.EventuallyNil(t, 15*time.Second, func() error {
		started, stopped := logsOf(s, "worker started", "fresh"), logsOf(s, "worker stopped", "fresh")
		if started < 4 || stopped != started { // the activation's check started one too
			return fmt.Errorf("fresh processes: %d started, %d stopped", started, stopped)
		}
		return nil
	})

	// Four at once: one runs, one waits, two are refused, whatever their order.
	var wg sync.WaitGroup
	answers := make(chan *harness.Response, 4)
	for range 4 {
		wg.Go(func() {
			resp, err := s.Send("GET", "/fresh/sleep?d=3s")
			if err != nil {
				t.Error(err)
				return
			}
			answers <- resp
		})
	}
	wg.Wait()
	close(answers)
	served, refused := 0, 0
	for resp := range answers {
		switch {
		case resp.Status == 200:
			served++
		case resp.Status == 503 && resp.ErrorCode() == "FRESH_WORKERS_BUSY" && resp.Header.Get("Retry-After") != "" &&
			strings.Contains(string(resp.Body), "1 running of worker_fresh_concurrency 1, 1 queued of worker_fresh_queue 1"):
			refused++
		default:
			t.Errorf("a request past the gate = %s", resp)
		}
	}
	if served != 2 || refused != 2 {
		t.Errorf("%d served and %d refused, want 2 and 2", served, refused)
	}
}

// logsOf counts the log entries with message msg about worker.
func logsOf(s *harness.Server, msg, worker string) int {
	n := 0
	for _, e := range s.LogEntries(msg) {
		if e["worker"] == worker {
			n++
		}
	}
	return n
}

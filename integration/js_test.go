package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// jsEngine is a JavaScript engine the tests run workers on: name, and the variable and default
// path of its binary (make deps installs Bun and Deno into bin/; Node is the system's).
type jsEngine struct{ name, env, path string }

var jsEngines = []jsEngine{
	{"bun", "BUN", "../bin/bun/node_modules/@oven/bun-linux-x64/bin/bun"},
	{"deno", "DENO", "../bin/deno/node_modules/@deno/linux-x64-glibc/deno"},
	{"node", "NODE", "/usr/bin/node"},
}

// binary returns the engine's absolute path, skipping the test where it is missing (failing
// it in CI).
func (e jsEngine) binary(t *testing.T) string {
	t.Helper()
	path, err := filepath.Abs(testProgram(t, e.name, e.env, e.path))
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// startJS starts a runtime whose js_runtime is the engine's binary, with more settings.
func startJS(t *testing.T, engine string, settings ...string) *harness.Server {
	t.Helper()
	// HTTP/2: over HTTP/1.1 Go's server reads a request's body before the answer goes out,
	// so only HTTP/2 shows both bodies streaming at once.
	return harness.Start(t, harness.Config{App: strings.Join(append([]string{"js_runtime " + engine}, settings...), "\n"), HTTP2: true, Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})
}

// jsGreeting is a TypeScript module jsApp imports, as lib/greeting.ts.
const jsGreeting = "export const greeting: string = \"hello from TypeScript\";\n"

// jsApp is a TypeScript worker: its fetch answers GET with its path (and a greeting it
// imports from another TypeScript module), streams a POST's body back upper-cased as it
// arrives, throws at /boom, reads a file at /read?path=, names its process at /boot and
// answers after ms milliseconds at /sleep?ms=; its routes answer /users/:id.
const jsApp = `import { readFileSync } from "node:fs";
import { greeting } from "./lib/greeting.ts";

const boot = crypto.randomUUID(); // this process's

export default {
  routes: {
    "/users/:id": (req: Request & { params: { id: string } }) => new Response("user " + req.params.id, { headers: { "x-route": "users" } }),
  },
  async fetch(req: Request): Promise<Response> {
    const url = new URL(req.url);
    if (url.pathname === "/boom") throw new Error("boom, on purpose");
    if (url.pathname === "/boot") return new Response(boot);
    if (url.pathname === "/sleep") {
      await new Promise((resolve) => setTimeout(resolve, Number(url.searchParams.get("ms"))));
      return new Response("slept");
    }
    if (url.pathname === "/read") {
      try {
        return new Response(readFileSync(url.searchParams.get("path")!, "utf8"));
      } catch (err) {
        return new Response(String(err), { status: 403 });
      }
    }
    if (req.method === "POST") {
      const upper = new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          controller.enqueue(new TextEncoder().encode(new TextDecoder().decode(chunk).toUpperCase()));
        },
      });
      return new Response(req.body!.pipeThrough(upper), { status: 201, headers: { "x-streamed": "yes" } });
    }
    return new Response(greeting + " at " + url.pathname + url.search, { status: 200, headers: { "x-kind": "ts", "x-base": req.headers.get("x-base") ?? "" } });
  },
};
`

func jsArchive(t *testing.T, name, manifest string, files ...harness.File) []byte {
	t.Helper()
	return workerArchive(t, name, "1.0.0", manifest, files...)
}

// TestJSWorkers runs a TypeScript worker through the real binary on each engine, on the
// host's network (PORT) and in an isolated one (the listener handed over as descriptor 3):
// GET and a streamed POST with status, headers and body, a parameterised route, the source
// never served, a throwing handler answering 500 with the request id while the worker goes
// on, a module without a default export, or one that does not parse, refused at once and one
// without fetch with the engine's output, the sandbox holding, and maxRequests recycling.
func TestJSWorkers(t *testing.T) {
	t.Parallel()
	for _, e := range jsEngines {
		for _, network := range []string{"host", "isolated"} {
			t.Run(e.name+" "+network, func(t *testing.T) {
				t.Parallel()
				if network == "isolated" && os.Geteuid() != 0 {
					t.Skip("worker_network isolated needs root")
				}
				checkJSWorker(t, startJS(t, e.binary(t), "worker_network "+network))
			})
		}
	}
}

// checkJSWorker checks the TypeScript worker jsApp on s (see TestJSWorkers).
func checkJSWorker(t *testing.T, s *harness.Server) {
	t.Helper()
	key := harness.WithKey(rootKey)
	uploadOK(t, s, "workers", "app.tgz", jsArchive(t, "app", "", harness.File{Name: "index.ts", Body: jsApp},
		harness.File{Name: "lib/greeting.ts", Body: jsGreeting}), rootKey)
	if kind := workers(t, s, rootKey)["app"].Kinds["1.0.0"]; kind != "js" {
		t.Errorf("kind = %q, want js", kind)
	}

	resp := s.Get("/app/hi?x=1")
	if resp.Status != 200 || string(resp.Body) != "hello from TypeScript at /hi?x=1" || resp.Header.Get("X-Kind") != "ts" || resp.Header.Get("X-Base") != "/app" {
		t.Errorf("GET /app/hi = %s %v", resp, resp.Header)
	}
	resp = s.Get("/app/users/42")
	if resp.Status != 200 || string(resp.Body) != "user 42" || resp.Header.Get("X-Route") != "users" {
		t.Errorf("GET /app/users/42 = %s %v", resp, resp.Header)
	}
	// The source is never answered as a file: the worker answers its path.
	for _, p := range []string{"/app/index.ts", "/app/manifest.yaml"} {
		if resp := s.Get(p); resp.Status != 200 || strings.Contains(string(resp.Body), "greeting") || !strings.HasPrefix(string(resp.Body), "hello from TypeScript at ") {
			t.Errorf("GET %s = %s; want the worker's answer, not the file", p, resp)
		}
	}
	streamedPost(t, s, "/app/echo")

	// A handler that throws: 500 naming the request id, and the worker goes on.
	resp = s.Get("/app/boom")
	id := resp.Header.Get("X-Request-Id")
	if resp.Status != 500 || id == "" || !strings.Contains(string(resp.Body), id) {
		t.Errorf("GET /app/boom = %s (X-Request-Id %q); want 500 naming the request id", resp, id)
	}
	if resp := s.Get("/app/after"); resp.Status != 200 {
		t.Errorf("GET after the throw = %s", resp)
	}

	// What can be seen without running it is refused at once: no default export, no parse.
	for source, says := range map[string]string{
		"export const fetch = () => new Response('x');\n": "entrypoint index.ts has no default export",
		"export default { fetch( };\n":                    "entrypoint index.ts does not parse: line 1",
	} {
		resp := s.Upload(s.API+"/workers/upload", "bad.tgz", jsArchive(t, "bad", "", harness.File{Name: "index.ts", Body: source}), harness.WithKey(rootKey))
		if resp.Status != 400 || resp.ErrorCode() != "INVALID_ENTRYPOINT" || !strings.Contains(string(resp.Body), says) {
			t.Errorf("upload of %q = %s; want 400 INVALID_ENTRYPOINT saying %q", source, resp, says)
		}
	}
	// A module without fetch or routes fails its check at upload, with the engine's output.
	resp = s.Upload(s.API+"/workers/upload", "bad.tgz", jsArchive(t, "bad", "", harness.File{Name: "index.ts", Body: "export default { hello: 1 };\n"}), key)
	if resp.Status != 422 || !strings.Contains(string(resp.Body), "has neither fetch nor routes") {
		t.Errorf("upload without fetch = %s; want 422 with the engine's message", resp)
	}

	// The sandbox: the runtime's state, another worker's folder and a file outside the
	// read paths stay closed to the worker, whatever the engine.
	uploadOK(t, s, "workers", "other.tgz", jsArchive(t, "other", "", harness.File{Name: "index.js", Body: "export default { fetch: () => new Response('other') };\n"},
		harness.File{Name: "secret.txt", Body: "other's secret"}), rootKey)
	for name, path := range map[string]string{
		"the key store":         filepath.Join(s.DataDir, "state", "api-keys.db"),
		"another worker's file": filepath.Join(s.DataDir, "apps", "other", "1.0.0", "secret.txt"),
		"the Caddyfile":         filepath.Join(s.Dir, "Caddyfile"),
	} {
		if resp := s.Get("/app/read?" + url.Values{"path": {path}}.Encode()); resp.Status != 403 {
			t.Errorf("the worker read %s (%s): %s", name, path, resp)
		}
	}
	// The pool's rules hold as for any process worker: maxRequests recycles the process.
	uploadOK(t, s, "workers", "recycled.tgz", jsArchive(t, "recycled", "maxRequests: 2\n", harness.File{Name: "index.ts", Body: jsApp},
		harness.File{Name: "lib/greeting.ts", Body: jsGreeting}), rootKey)
	served := map[string]int{} // requests by process (the activation check counts as one)
	for range 3 {
		served[body(s.Get("/recycled/boot"))]++
	}
	for boot, n := range served {
		if boot == "" || n > 2 || len(served) < 2 {
			t.Errorf("three requests with maxRequests 2, by process: %v; want two processes or more, none serving more than 2", served)
			break
		}
	}
	// Its own folder it reads: a 403 above is the sandbox's, not a broken handler.
	if resp := s.Get("/app/read?" + url.Values{"path": {filepath.Join(s.DataDir, "apps", "app", "1.0.0", "index.ts")}}.Encode()); resp.Status != 200 || !strings.Contains(string(resp.Body), "greeting") {
		t.Errorf("the worker cannot read its own index.ts: %s", resp)
	}
}

// streamedPost posts a body in two pieces and reads the first piece's answer before it sends
// the second: the runtime and the engine stream both ways, holding neither body whole.
func streamedPost(t *testing.T, s *harness.Server, path string) {
	t.Helper()
	body, write := io.Pipe()
	req, err := http.NewRequest("POST", s.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		resp *http.Response
		err  error
	}
	answers := make(chan answer, 1)
	go func() {
		resp, err := s.Client.Do(req)
		answers <- answer{resp, err}
	}()
	fmt.Fprint(write, "first piece\n")
	var a answer
	select {
	case a = <-answers:
	case <-time.After(20 * time.Second):
		write.Close()
		t.Fatal("no answer to the first piece of a streamed POST")
	}
	if a.err != nil {
		t.Fatal(a.err)
	}
	defer a.resp.Body.Close()
	if a.resp.StatusCode != 201 || a.resp.Header.Get("X-Streamed") != "yes" {
		t.Errorf("streamed POST = %d %v", a.resp.StatusCode, a.resp.Header)
	}
	r := bufio.NewReader(a.resp.Body)
	first, err := r.ReadString('\n')
	if err != nil || first != "FIRST PIECE\n" {
		t.Fatalf("first piece back = %q, %v", first, err)
	}
	fmt.Fprint(write, "second piece\n")
	write.Close()
	rest, err := io.ReadAll(r)
	if err != nil || string(rest) != "SECOND PIECE\n" {
		t.Errorf("second piece back = %q, %v", rest, err)
	}
}

// TestJSEngineMissing: a manifest asking for an engine the server lacks is refused at upload,
// naming js_runtime, and so is every JavaScript worker on a server without an engine.
func TestJSEngineMissing(t *testing.T) {
	t.Parallel()
	// A PATH with no engine on it: the server has node alone, its js_runtime.
	s := harness.Start(t, harness.Config{App: "js_runtime " + jsEngines[2].binary(t), Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey, "PATH": t.TempDir()}})
	resp := s.Upload(s.API+"/workers/upload", "app.tgz", jsArchive(t, "app", "runtime: deno\n", harness.File{Name: "index.ts", Body: jsApp},
		harness.File{Name: "lib/greeting.ts", Body: jsGreeting}), harness.WithKey(rootKey))
	if resp.Status != 400 || resp.ErrorCode() != "JS_ENGINE_UNAVAILABLE" || !strings.Contains(string(resp.Body), "js_runtime") || !strings.Contains(string(resp.Body), "node (default)") {
		t.Errorf("upload asking for deno = %s; want 400 JS_ENGINE_UNAVAILABLE naming js_runtime", resp)
	}
	none := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey, "PATH": t.TempDir()}})
	resp = none.Upload(none.API+"/workers/upload", "app.tgz", jsArchive(t, "app", "", harness.File{Name: "index.ts", Body: jsApp},
		harness.File{Name: "lib/greeting.ts", Body: jsGreeting}), harness.WithKey(rootKey))
	if resp.Status != 400 || resp.ErrorCode() != "JS_ENGINE_UNAVAILABLE" || !strings.Contains(string(resp.Body), "this server has no JavaScript engine") {
		t.Errorf("upload to a server without an engine = %s; want 400 JS_ENGINE_UNAVAILABLE", resp)
	}
}

// TestJSWorkerUser runs a JavaScript worker under another account (worker_user), as the
// README recommends: that account reads the engine, the loader and, on Node, the transpiled
// module, and nothing of the runtime's state.
func TestJSWorkerUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("starting workers as another user needs root")
	}
	for _, e := range jsEngines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			binary := e.binary(t)
			openToOthers(filepath.Dir(binary))
			s := startJS(t, binary, "worker_user nobody")
			dir := filepath.Join(s.DataDir, "apps", "app", "1.0.0")
			writeFiles(t, dir, map[string]string{"manifest.yaml": "name: app\nversion: 1.0.0\n", "index.ts": jsApp, "lib/greeting.ts": jsGreeting})
			openToOthers(dir)
			resp := s.Get("/app/read?" + url.Values{"path": {"/proc/self/status"}}.Encode())
			if resp.Status != 200 || !strings.Contains(string(resp.Body), "Uid:\t65534") {
				t.Fatalf("the worker's status: %s", resp)
			}
			if resp := s.Get("/app/read?" + url.Values{"path": {filepath.Join(s.DataDir, "state", "api-keys.db")}}.Encode()); resp.Status != 403 {
				t.Errorf("the worker read the key store: %s", resp)
			}
		})
	}
}

// jsLarge answers GET with 8 MiB of "a" and a POST with its body's size, read whole.
const jsLarge = `export default {
  async fetch(req: Request): Promise<Response> {
    if (req.method === "POST") return new Response("got " + (await req.arrayBuffer()).byteLength);
    return new Response(new Uint8Array(8 << 20).fill(97));
  },
};
`

// TestJSBunForwarderLargeBodies sends bodies of many chunks both ways through the forwarder of
// a Bun worker handed its listener (listen: socket: Bun's own sockets pass each connection from
// descriptor 3 on to Bun.serve, pausing a side while the other has not taken what it sent):
// every byte arrives, in order, on a connection used again for the next request.
func TestJSBunForwarderLargeBodies(t *testing.T) {
	t.Parallel()
	s := startJS(t, jsEngines[0].binary(t))
	uploadOK(t, s, "workers", "large.tgz", jsArchive(t, "large", "listen: socket\nmaxBodySize: 32MiB\n", harness.File{Name: "index.ts", Body: jsLarge}), rootKey)
	for range 2 {
		if resp := s.Get("/large/"); resp.Status != 200 || len(resp.Body) != 8<<20 || strings.Count(string(resp.Body), "a") != 8<<20 {
			t.Errorf("GET /large/ = %d, %d bytes; want 200 with 8 MiB of a", resp.Status, len(resp.Body))
		}
		post := bytes.Repeat([]byte("b"), 24<<20)
		if resp := s.Do("POST", "/large/", harness.WithBody("application/octet-stream", post)); resp.Status != 200 || string(resp.Body) != fmt.Sprintf("got %d", len(post)) {
			t.Errorf("POST of 24 MiB = %s", resp)
		}
	}
}

// TestJSSocketWorkerBursts: a worker with listen: socket takes, cold, a burst of concurrent
// requests (GETs and streamed POSTs with bodies), then a second on the connections the first
// left open, and two more after an idle spell longer than node:http's keep-alive timeout (5 s),
// which closes the connections the runtime keeps to a Deno or Node worker (Bun.serve's 10 s
// did too, before its loader turned it off): every request is answered by the worker, with the
// right status and body, on each engine. Bun's loader forwards descriptor 3's connections to
// Bun.serve; Deno's and Node's accept on it with node:http.
func TestJSSocketWorkerBursts(t *testing.T) {
	t.Parallel()
	const burst = 64
	for _, e := range jsEngines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			s := startJS(t, e.binary(t))
			uploadOK(t, s, "workers", "app.tgz", jsArchive(t, "app", "listen: socket\nttl: 1m\n", harness.File{Name: "index.ts", Body: jsApp},
				harness.File{Name: "lib/greeting.ts", Body: jsGreeting}), rootKey)
			for round, idle := range []time.Duration{0, 7 * time.Second} {
				time.Sleep(idle)
				for pass := range 2 {
					failures := jsBurst(s, burst, fmt.Sprintf("%d.%d", round, pass))
					for _, f := range failures[:min(len(failures), 5)] {
						t.Errorf("round %d, pass %d: %s", round, pass, f)
					}
					if len(failures) > 0 {
						t.Fatalf("round %d, pass %d: %d of %d requests failed", round, pass, len(failures), burst)
					}
				}
			}
		})
	}
}

// jsBurst sends n requests at once to jsApp on s, every fourth a POST with a body, and returns
// what went wrong with each that was not answered as jsApp answers it.
func jsBurst(s *harness.Server, n int, tag string) []string {
	errs := make(chan string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("%s-%d", tag, i)
			method, path, opts, status, body := "GET", "/app/x?i="+id, []harness.Option(nil), 200, "hello from TypeScript at /x?i="+id
			if i%4 == 0 {
				sent := strings.Repeat("body of "+id+" ", 512)
				method, path, opts, status, body = "POST", "/app/", []harness.Option{harness.WithBody("text/plain", []byte(sent))}, 201, strings.ToUpper(sent)
			}
			resp, err := s.Send(method, path, opts...)
			switch {
			case err != nil:
				errs <- fmt.Sprintf("%s %s: %v", method, path, err)
			case resp.Status != status || string(resp.Body) != body:
				errs <- fmt.Sprintf("%s %s = %.200s, want %d", method, path, resp, status)
			}
		})
	}
	wg.Wait()
	close(errs)
	var out []string
	for e := range errs {
		out = append(out, e)
	}
	return out
}

// TestJSSlowAnswer: a JavaScript worker's answer may take as long as its timeout (30 s by
// default), on PORT and on a socket, on each engine: Bun.serve's own idle timeout (10 s) cut a
// request whose handler had written nothing yet, where the runtime owns the request's timeout.
func TestJSSlowAnswer(t *testing.T) {
	t.Parallel()
	for _, e := range jsEngines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			s := startJS(t, e.binary(t))
			for _, listen := range []string{"port", "socket"} {
				uploadOK(t, s, "workers", listen+".tgz", jsArchive(t, listen, "listen: "+listen+"\n", harness.File{Name: "index.ts", Body: jsApp},
					harness.File{Name: "lib/greeting.ts", Body: jsGreeting}), rootKey)
			}
			var wg sync.WaitGroup
			for _, listen := range []string{"port", "socket"} {
				wg.Go(func() {
					resp, err := s.Send("GET", "/"+listen+"/sleep?ms=14000")
					if err != nil || resp.Status != 200 || string(resp.Body) != "slept" {
						t.Errorf("listen: %s: GET /sleep?ms=14000 = %v, %v; want 200 slept", listen, resp, err)
					}
				})
			}
			wg.Wait()
		})
	}
}

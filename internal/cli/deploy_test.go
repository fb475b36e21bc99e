package cli

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/handlers"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// TestDeployKind: a plugin's folder deployed as a worker is refused with a hint at --plugin,
// and a worker's folder deployed with --plugin the other way round; nothing is uploaded.
func TestDeployKind(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, nil)
	u := ciUser(t, rt)
	hooks := folder(t, map[string]string{"manifest.yaml": "name: hooks\nversion: 1.0.0\nonRequest:\n  - {handler: headers}\n"})
	process := folder(t, map[string]string{"manifest.yaml": "name: api\nversion: 1.0.0\ncommand: [node, server.js]\n"})
	static := site(t, "web", "1.0.0")
	u.checkExits([]exits{
		{"plugin as a worker", []string{"deploy", "../../examples/hello-plugin"}, 1,
			"../../examples/hello-plugin is a plugin's folder (its manifest declares routes, base): deploy it with --plugin, as in caddy runtime deploy --plugin ../../examples/hello-plugin"},
		{"hooks as a worker", []string{"deploy", hooks}, 1, "(its manifest declares onRequest): deploy it with --plugin"},
		{"process worker as a plugin", []string{"deploy", "--plugin", process}, 1,
			process + " is a worker's folder (its manifest declares command, a worker's key, and none of routes, onRequest, base or menus): deploy it without --plugin, as in caddy runtime deploy " + process},
		{"static worker as a plugin", []string{"deploy", "--plugin", static}, 1, "(its manifest declares none of routes, onRequest, base or menus): deploy it without --plugin"},
		{"dry run too", []string{"deploy", "--plugin", static, "--dry-run"}, 1, "deploy it without --plugin"},
	})
	if got := rt.get(t, "/workers"); len(got.([]any)) != 0 {
		t.Errorf("refused deploys installed workers: %v", got)
	}
	if got := rt.get(t, "/plugins"); len(got.([]any)) != 0 {
		t.Errorf("refused deploys installed plugins: %v", got)
	}
	// The right flag deploys each.
	u.ok("deploy", "--plugin", hooks)
	u.ok("deploy", static)
}

// TestDeployDryRunReplaces: a dry run of a version installed already says it would replace it.
func TestDeployDryRunReplaces(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, nil)
	u := ciUser(t, rt)
	if out := u.ok("deploy", site(t, "app", "1.0.0"), "--dry-run"); !strings.HasPrefix(out, "app 1.0.0 would install (dry run: nothing was installed)\n") {
		t.Errorf("a dry run of a new version printed %q", out)
	}
	u.ok("deploy", site(t, "app", "1.0.0"))
	if out := u.ok("deploy", site(t, "app", "1.0.0"), "--dry-run"); !strings.HasPrefix(out, "app 1.0.0 would replace the app 1.0.0 installed now (dry run: nothing was installed)\n") {
		t.Errorf("a dry run of an installed version printed %q", out)
	}
}

// TestDeployUploadRefusal: the runtime's refusal of an upload whose program is missing is
// printed with its code and message, in the dry run as in the upload.
func TestDeployUploadRefusal(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, nil)
	u := ciUser(t, rt)
	missing := folder(t, map[string]string{"manifest.yaml": "name: svc\nversion: 1.0.0\ncommand: [./server]\n"})
	u.checkExits([]exits{
		{"upload", []string{"deploy", missing}, 1, "INVALID_ENTRYPOINT: command ./server is not in the archive"},
		{"dry run", []string{"deploy", missing, "--dry-run"}, 1, "INVALID_ENTRYPOINT: command ./server is not in the archive"},
	})
}

func TestSize(t *testing.T) {
	for bytes, want := range map[int64]string{0: "0 B", 512: "512 B", 1536: "1.5 KiB", 12 << 20: "12 MiB", 3 << 30: "3.0 GiB"} {
		if got := size(bytes); got != want {
			t.Errorf("size(%d) = %q, want %q", bytes, got, want)
		}
	}
}

// processRuntime stands for a runtime whose process worker app@1.0.0 fails to start: its
// upload succeeds, its first request answers 503 WORKER_UNAVAILABLE, and its logs hold the
// lines the worker wrote (logs). It counts the requests to the worker.
func processRuntime(t *testing.T, logs []api.WorkerLogLine, firstStatus int) (url string, requests func() int) {
	var n atomic.Int32
	mux := fakeAPI(api.InstalledUnit{Name: "app", Version: "1.0.0"})
	mux.HandleFunc("GET /app@1.0.0/", func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if r.Header.Get(handlers.APIKeyHeader) != "" || r.Header.Get("Authorization") != "" {
			t.Errorf("the first request to the worker carried the key")
		}
		if firstStatus == http.StatusOK {
			_, _ = io.WriteString(w, "hello")
			return
		}
		envelope.Write(w, envelope.Errorf(firstStatus, "WORKER_UNAVAILABLE", "worker app@1.0.0 exited before listening on PORT (exit status 2)"))
	})
	mux.HandleFunc("GET /api/workers/_/app/logs", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("limit") != "20" {
			t.Errorf("the logs were read with %q", r.URL.RawQuery)
		}
		envelope.WriteJSON(w, 200, api.WorkerLogs{Worker: "app", Lines: logs})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL, func() int { return int(n.Load()) }
}

// TestDeployWaitProcessFails: --wait sends a process worker's new version its first request;
// when the runtime answers that it failed, deploy exits 1 with the runtime's message and the
// worker's last log lines, never "<nil>".
func TestDeployWaitProcessFails(t *testing.T) {
	t.Parallel()
	lines := []api.WorkerLogLine{
		{Time: "2026-11-27T05:00:00Z", Version: "1.0.0", PID: 7, Stream: "stderr", Text: "panic: no DATABASE_URL"},
		{Time: "2026-11-27T05:00:01Z", Version: "1.0.0", PID: 7, Stream: "stderr", Text: "exit status 2"},
	}
	proc := func() string {
		return folder(t, map[string]string{"manifest.yaml": "name: app\nversion: 1.0.0\nentrypoint: server\n", "server": "#!/bin/sh\n"})
	}
	url, requests := processRuntime(t, lines, http.StatusServiceUnavailable)
	u := newUser(t, "RUNTIME_URL="+url, "RUNTIME_API_KEY="+rootKey)
	r := u.run("deploy", proc(), "--wait")
	for _, want := range []string{
		"error: deployed app 1.0.0, but its first request (" + url + "/app@1.0.0/) failed: WORKER_UNAVAILABLE: worker app@1.0.0 exited before listening on PORT (exit status 2)",
		"its last log lines:\n  2026-11-27T05:00:00Z 1.0.0 [7] stderr: panic: no DATABASE_URL\n  2026-11-27T05:00:01Z 1.0.0 [7] stderr: exit status 2\n",
		"caddy runtime rollback app serves the version before it again, if it has one",
	} {
		if r.code != 1 || !strings.Contains(r.errOut, want) {
			t.Errorf("deploy --wait of a failing process worker: exit %d, %q; want 1 and %q", r.code, r.errOut, want)
		}
	}
	if strings.Contains(r.errOut, "<nil>") || requests() != 1 {
		t.Errorf("deploy --wait printed %q after %d requests to the worker", r.errOut, requests())
	}

	// A worker that wrote nothing says so; without --wait no request is sent.
	url, requests = processRuntime(t, nil, http.StatusBadGateway)
	u = newUser(t, "RUNTIME_URL="+url, "RUNTIME_API_KEY="+rootKey)
	if r := u.run("deploy", proc(), "--wait"); r.code != 1 || !strings.Contains(r.errOut, "failed: WORKER_UNAVAILABLE") || !strings.Contains(r.errOut, "it wrote no log lines") {
		t.Errorf("deploy --wait of a silent failing worker: exit %d, %q", r.code, r.errOut)
	}
	u.ok("deploy", proc())
	if requests() != 1 {
		t.Errorf("deploy without --wait sent the worker %d requests in all, want the one of --wait", requests()-1)
	}

	// A worker that answers passes; a static worker gets no request.
	url, requests = processRuntime(t, nil, http.StatusOK)
	u = newUser(t, "RUNTIME_URL="+url, "RUNTIME_API_KEY="+rootKey)
	if r := u.run("deploy", proc(), "--wait"); r.code != 0 || requests() != 1 {
		t.Errorf("deploy --wait of a working process worker: exit %d, %q, %d requests", r.code, r.errOut, requests())
	}
	u.ok("deploy", site(t, "app", "1.0.0"), "--wait")
	if requests() != 1 {
		t.Errorf("deploy --wait of a static worker sent it a request")
	}
}

// TestUnknownCommand: a command group given a command it does not have exits 1 with the
// error and its usage.
func TestUnknownCommand(t *testing.T) {
	t.Parallel()
	u := newUser(t)
	for _, group := range []string{"workers", "plugins", "keys"} {
		r := u.run(group, "frob")
		if r.code != 1 || !strings.HasPrefix(r.errOut, "error: caddy runtime "+group+` has no command "frob"`+"\n\nUsage:\n  caddy runtime "+group+" ") ||
			!strings.Contains(r.errOut, "Available Commands:\n") || r.out != "" {
			t.Errorf("runtime %s frob: exit %d, %q %q; want 1 with the usage", group, r.code, r.out, r.errOut)
		}
	}
	if r := u.run("frob"); r.code != 1 || !strings.Contains(r.errOut, `caddy runtime has no command "frob"`) || !strings.Contains(r.errOut, "  deploy ") {
		t.Errorf("runtime frob: exit %d, %q; want 1 with the usage", r.code, r.errOut)
	}
}

// TestLoginKeyFromStdin: login without --key reads the key from stdin when it is not a
// terminal: the first line, without its line end.
func TestLoginKeyFromStdin(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, nil)
	u := newUser(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a safety net
	defer cancel()
	cmd := testkit.ReexecCommand(ctx, u.env, "runtime", "login", "--url", rt.URL, "--profile", "piped")
	cmd.Stdin = strings.NewReader(rootKey + "\r\nnot read\n")
	out, errOut, code, err := testkit.Run(cmd)
	if err != nil || code != 0 || !strings.Contains(out, `as root (admin); saved as profile "piped"`) || strings.Contains(errOut, "API key for") {
		t.Fatalf("login with the key on stdin: %v, exit %d, %q %q", err, code, out, errOut)
	}
	u.ok("workers", "list") // the saved profile holds the key
}

package integration

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// The attacks of a hostile process worker, each written as the worker would try it, run
// against the real binary. The suite may run as root without worker_user: the sandbox must
// hold then too.

// workerTries asks the test worker at base to try path with query q and returns the answer.
func workerTries(t *testing.T, s *harness.Server, base, path string, q url.Values) *harness.Response {
	t.Helper()
	resp, err := s.Send("GET", base+path+"?"+q.Encode())
	if err != nil {
		t.Fatalf("%s%s: %v", base, path, err)
	}
	return resp
}

// scratchOf returns the TMPDIR of the worker at base.
func scratchOf(t *testing.T, s *harness.Server, base string) string {
	t.Helper()
	e := echoOf(t, s.Get(base))
	for _, kv := range e.Env {
		if v, ok := strings.CutPrefix(kv, "TMPDIR="); ok {
			return v
		}
	}
	t.Fatalf("the worker at %s has no TMPDIR: %v", base, e.Env)
	return ""
}

func TestSandboxKeepsWorkersOutOfTheRuntime(t *testing.T) {
	t.Parallel()
	// No root key: the runtime writes the bootstrap key into state_dir, in clear.
	s := harness.Start(t, harness.Config{Env: map[string]string{"AWS_SECRET_ACCESS_KEY": "leak-me-not"}})
	if _, err := s.WaitLog("process worker sandbox", 5*time.Second); err != nil {
		t.Error(err)
	}
	bootstrap := s.BootstrapKey()
	a := processWorker(t, s, "@team/a", "1.0.0", "")
	b := processWorker(t, s, "@other/b", "1.0.0", "")
	writeFiles(t, b, map[string]string{"secret.txt": "b's secret"})
	plugin := filepath.Join(s.DataDir, "plugins", "p")
	writeFiles(t, plugin, map[string]string{"manifest.yaml": "name: p\n", "secret.txt": "plugin secret"})
	stateDir := filepath.Join(s.DataDir, "state")

	denied := []struct{ name, path string }{
		{"the runtime's environment", fmt.Sprintf("/proc/%d/environ", s.PID())},
		{"the runtime's memory map", fmt.Sprintf("/proc/%d/maps", s.PID())},
		{"the bootstrap key", filepath.Join(stateDir, "bootstrap-key")},
		{"the key database", filepath.Join(stateDir, "api-keys.db")},
		{"another worker's folder", filepath.Join(b, "secret.txt")},
		{"a plugin's folder", filepath.Join(plugin, "secret.txt")},
		{"the Caddyfile", filepath.Join(s.Dir, "Caddyfile")},
	}
	for _, d := range denied {
		t.Run("read "+d.name, func(t *testing.T) {
			resp := workerTries(t, s, "/@team/a", "/read", url.Values{"path": {d.path}})
			if resp.Status == 200 || strings.Contains(string(resp.Body), bootstrap) || strings.Contains(string(resp.Body), "leak-me-not") {
				t.Fatalf("the worker read %s: %s", d.path, resp)
			}
		})
	}
	for _, dir := range []string{stateDir, filepath.Join(s.DataDir, "apps", "@other")} {
		if resp := workerTries(t, s, "/@team/a", "/list", url.Values{"path": {dir}}); resp.Status == 200 {
			t.Errorf("the worker listed %s: %s", dir, resp)
		}
	}
	tmp := scratchOf(t, s, "/@team/a/")
	// What it may do: read its own folder, write its scratch folder.
	if resp := workerTries(t, s, "/@team/a", "/read", url.Values{"path": {filepath.Join(a, "manifest.yaml")}}); resp.Status != 200 {
		t.Errorf("the worker cannot read its own manifest: %s", resp)
	}
	if resp := workerTries(t, s, "/@team/a", "/write", url.Values{"path": {filepath.Join(tmp, "scratch.txt")}}); resp.Status != 200 {
		t.Errorf("the worker cannot write its scratch folder %s: %s", tmp, resp)
	}
	if strings.HasPrefix(tmp, stateDir) || strings.HasPrefix(tmp, a) {
		t.Errorf("scratch folder %s lies in state_dir or the worker's folder", tmp)
	}
	// What it may not write: its own folder, another worker's, the state.
	for _, p := range []string{filepath.Join(a, "server"), filepath.Join(b, "server"), filepath.Join(stateDir, "x")} {
		if resp := workerTries(t, s, "/@team/a", "/write", url.Values{"path": {p}}); resp.Status == 200 {
			t.Errorf("the worker wrote %s", p)
		}
	}
	// A unix socket of the runtime's account, like Caddy's admin endpoint in the example.
	sock := filepath.Join(s.Dir, "admin.sock")
	harness.ServeUnix(t, sock, "admin reached")
	if resp := workerTries(t, s, "/@team/a", "/dial", url.Values{"network": {"unix"}, "addr": {sock}}); resp.Status == 200 {
		t.Errorf("the worker connected to a unix socket of the runtime's account: %s", resp)
	}
	if entry, _ := s.WaitLog("process worker sandbox", time.Second); entry == nil || !strings.Contains(fmt.Sprint(entry["layers"]), "landlock") {
		t.Errorf("start-up log does not name the Landlock layer: %v", entry)
	}
	if os.Geteuid() == 0 && !strings.Contains(s.Logs(), "process worker sandbox: process workers run as root") {
		t.Error("running workers as root without worker_user logged no warning")
	}
}

// TestSandboxStopsOrphans: a grandchild in a session of its own is gone once its worker is
// disabled.
func TestSandboxStopsOrphans(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	processWorker(t, s, "orphans", "1.0.0", "")
	resp := workerTries(t, s, "/orphans", "/orphan", nil)
	pid, err := strconv.Atoi(strings.TrimSpace(string(resp.Body)))
	if resp.Status != 200 || err != nil {
		t.Fatalf("orphan: %s", resp)
	}
	if !harness.Alive(pid) {
		t.Fatalf("the orphan %d is not running", pid)
	}
	s.Do("POST", s.API+"/workers/_/orphans/1.0.0/disable", harness.WithKey(rootKey))
	harness.Eventually(t, "the orphaned grandchild to stop", 15*time.Second, func() bool { return !harness.Alive(pid) })
}

// TestSandboxLimits: a fork bomb and a memory hog stay inside their worker; the runtime and
// the other workers go on.
func TestSandboxLimits(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, App: "worker_processes 24\nworker_memory 256MiB"})
	entry, _ := s.WaitLog("process worker sandbox", 5*time.Second)
	if !strings.Contains(fmt.Sprint(entry["layers"]), "pids") && os.Geteuid() == 0 {
		t.Skip("no pids cgroup may be created here and the suite runs as root: rlimits cannot contain root")
	}
	processWorker(t, s, "bomb", "1.0.0", "limits:\n  processes: 1000\n") // capped to 24
	processWorker(t, s, "hog", "1.0.0", "limits:\n  memory: 64MiB\n")
	processWorker(t, s, "bystander", "1.0.0", "")

	var fork struct {
		Started int    `json:"started"`
		Error   string `json:"error"`
	}
	resp := workerTries(t, s, "/bomb", "/fork", url.Values{"n": {"500"}})
	if resp.Status != 200 || json.Unmarshal(resp.Body, &fork) != nil {
		t.Fatalf("fork: %s", resp)
	}
	if fork.Started >= 24 || fork.Error == "<nil>" {
		t.Fatalf("the fork bomb started %d processes (%s), want fewer than worker_processes 24", fork.Started, fork.Error)
	}
	if resp := s.Get("/bystander/"); resp.Status != 200 {
		t.Fatalf("another worker during the fork bomb: %s", resp)
	}

	resp = workerTries(t, s, "/hog", "/alloc", url.Values{"mb": {"512"}})
	if resp.Status == 200 {
		t.Fatalf("the memory hog allocated past its 64MiB: %s", resp)
	}
	if resp := s.Get("/bystander/"); resp.Status != 200 {
		t.Fatalf("another worker after the memory hog: %s", resp)
	}
	if resp := s.Get(s.API + "/health"); resp.Status != 200 {
		t.Fatalf("health after the attacks: %s", resp)
	}
}

// TestSandboxBoundsWorkerOutput: a worker printing 200 000 lines logs about worker_log_rate
// of them a second, and a count of the rest.
func TestSandboxBoundsWorkerOutput(t *testing.T) {
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, App: "worker_log_rate 50"})
	processWorker(t, s, "flood", "1.0.0", "")
	start := time.Now()
	if resp := workerTries(t, s, "/flood", "/flood", url.Values{"lines": {"200000"}}); resp.Status != 200 {
		t.Fatalf("flood: %s", resp)
	}
	// Every line ends up logged or counted; the count of dropped lines comes in reports, so
	// wait for all of them rather than the first.
	var dropped float64
	var logged int
	harness.Eventually(t, "every line to be logged or counted as dropped", 20*time.Second, func() bool {
		dropped, logged = 0, 0
		for _, e := range s.LogEntries("worker output dropped: too many lines") {
			dropped += e["dropped_lines"].(float64)
		}
		for _, line := range strings.Split(s.Logs(), "\n") {
			if strings.Contains(line, "flood line ") {
				logged++
			}
		}
		return logged+int(dropped) >= 200000
	})
	bound := 50 + int(time.Since(start).Seconds()+1)*50
	if logged > bound {
		t.Fatalf("%d flood lines logged in %s, want at most %d", logged, time.Since(start), bound)
	}
	if logged+int(dropped) != 200000 || dropped < 100000 {
		t.Fatalf("logged %d and counted %v dropped of 200000", logged, dropped)
	}
}

// TestProcessWorkersSetting: process workers run only for the namespaces listed.
func TestProcessWorkersSetting(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, App: "process_workers @team"})
	processWorker(t, s, "@team/ok", "1.0.0", "")
	processWorker(t, s, "@other/no", "1.0.0", "")
	processWorker(t, s, "plain", "1.0.0", "")
	writeFiles(t, filepath.Join(s.DataDir, "apps", "@other", "site", "1.0.0"), map[string]string{
		"manifest.yaml": "name: '@other/site'\nversion: 1.0.0\n", "index.html": "static",
	})
	if resp := s.Get("/@team/ok/"); resp.Status != 200 {
		t.Fatalf("@team's process worker: %s", resp)
	}
	for _, path := range []string{"/@other/no/", "/plain/"} {
		if resp := s.Get(path); resp.Status != 403 || resp.ErrorCode() != "PROCESS_WORKERS_DISABLED" || !strings.Contains(string(resp.Body), "process_workers") {
			t.Errorf("%s = %s, want 403 PROCESS_WORKERS_DISABLED naming the setting", path, resp)
		}
	}
	if resp := s.Get("/@other/site/index.html"); resp.Status != 200 {
		t.Errorf("a static worker outside the allowed namespaces: %s", resp)
	}
}

// TestSandboxWorkerUser runs workers under another account, as the README recommends.
func TestSandboxWorkerUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("starting workers as another user needs root")
	}
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, App: "worker_user nobody"})
	openToOthers(processWorker(t, s, "other", "1.0.0", ""))
	resp := workerTries(t, s, "/other", "/read", url.Values{"path": {"/proc/self/status"}})
	if resp.Status != 200 || !strings.Contains(string(resp.Body), "Uid:\t65534") {
		t.Fatalf("worker status: %s", resp)
	}
	tmp := scratchOf(t, s, "/other/")
	if resp := workerTries(t, s, "/other", "/write", url.Values{"path": {filepath.Join(tmp, "x")}}); resp.Status != 200 {
		t.Fatalf("the worker cannot write its scratch folder: %s", resp)
	}
	if strings.Contains(s.Logs(), "process workers run as root") {
		t.Error("the root warning was logged although workers run as nobody")
	}
}

// openToOthers lets every account reach dir and the folders above it: the test's temporary
// folders are private to root, and a worker under worker_user must reach its own.
func openToOthers(dir string) {
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if info, err := os.Stat(d); err == nil && info.Mode().Perm()&0o005 == 0 {
			os.Chmod(d, info.Mode().Perm()|0o005)
		}
	}
}

// seccompRefusals returns what the seccomp layer of a "process worker sandbox" entry's
// layers says it refuses, nil when it names no seccomp layer.
func seccompRefusals(layers string) []string {
	_, rest, ok := strings.Cut(layers, "seccomp (refused: ")
	if !ok {
		return nil
	}
	list, _, _ := strings.Cut(rest, ")")
	return strings.Split(list, ", ")
}

// TestSandboxSeccomp is the io_uring attack and its kin: a worker tries each call the
// start-up log says the seccomp layer refuses, and each is refused with the filter's errno,
// io_uring's included (through io_uring a worker opened a unix socket to Caddy's admin
// endpoint while socket(AF_UNIX) was refused). What workers need goes on working.
func TestSandboxSeccomp(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	entry, err := s.WaitLog("process worker sandbox", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	layers := fmt.Sprint(entry["layers"])
	refusals := seccompRefusals(layers)
	if len(refusals) == 0 {
		t.Fatalf("the start-up log names no seccomp layer: %q", layers)
	}
	processWorker(t, s, "hostile", "1.0.0", "")
	var got map[string]string
	if resp := workerTries(t, s, "/hostile", "/syscalls", nil); resp.Status != 200 || resp.JSON(&got) != nil {
		t.Fatalf("syscalls: %s", resp)
	}
	named := map[string]bool{}
	for _, name := range refusals {
		named[name] = true
		if _, ok := testkit.SeccompAttempts[name]; !ok {
			t.Errorf("the start-up log says seccomp refuses %q, which this test does not try", name)
		}
	}
	for name, attempt := range testkit.SeccompAttempts {
		if !named[name] {
			t.Errorf("the start-up log does not say seccomp refuses %q: %q", name, layers)
		}
		for _, call := range attempt.Calls {
			if got[call] != attempt.Errno {
				t.Errorf("%s (%s) = %q, want refused with %s", call, name, got[call], attempt.Errno)
			}
		}
	}
	for _, call := range testkit.SeccompAllowed {
		if got[call] != "ok" {
			t.Errorf("%s = %q, want ok", call, got[call])
		}
	}
	// The other layers the entry names hold in the worker too.
	status := workerTries(t, s, "/hostile", "/read", url.Values{"path": {"/proc/self/status"}})
	for claim, line := range map[string]string{"no_new_privs": "NoNewPrivs:\t1", "capabilities dropped": "CapBnd:\t0000000000000000", "seccomp": "Seccomp:\t2"} {
		if strings.Contains(layers, claim) && !strings.Contains(string(status.Body), line) {
			t.Errorf("the log names %s, but the worker's status lacks %q: %s", claim, line, status)
		}
	}
}

// TestSandboxInheritedDescriptors: descriptors the runtime inherited without close-on-exec
// (a harness pipe, a file in state_dir) do not reach its workers.
func TestSandboxInheritedDescriptors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	state := filepath.Join(dir, "data", "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	secret, err := os.Create(filepath.Join(state, "inherited-secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer secret.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	// Descriptors 3 and 4 of the runtime.
	s := harness.Start(t, harness.Config{Dir: dir, Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, ExtraFiles: []*os.File{r, secret}})
	processWorker(t, s, "fds", "1.0.0", "")
	var fds map[string]string
	if resp := workerTries(t, s, "/fds", "/fds", nil); resp.Status != 200 || resp.JSON(&fds) != nil || len(fds) == 0 {
		t.Fatalf("fds: %s", resp)
	}
	for fd, target := range fds {
		n, err := strconv.Atoi(fd)
		if err != nil || n > 2 && !goRuntimeFD(target) {
			t.Errorf("the worker was started with descriptor %s on %s", fd, target)
		}
	}
	for _, fd := range []string{"0", "1", "2"} {
		if fds[fd] == "" {
			t.Errorf("the worker has no descriptor %s: %v", fd, fds)
		}
	}
}

// goRuntimeFD tells the descriptors a Go program's runtime opens before main from inherited
// ones: its poller, and the cgroup files it reads its CPU limit from.
func goRuntimeFD(target string) bool {
	return target == "anon_inode:[eventpoll]" || target == "anon_inode:[eventfd]" || strings.HasPrefix(target, "/sys/fs/cgroup/")
}

// TestSandboxLanguageRuntimes: Python and Node servers run under the sandbox, start children
// (glibc falls back from clone3 to clone), read files and, for Node, the network
// interfaces (netlink).
func TestSandboxLanguageRuntimes(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	for _, tt := range []struct {
		name, bin, file, source string
	}{
		{"python", "/usr/bin/python3", "server.py", `# python ok
import http.server, os, subprocess
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        out = subprocess.run(["/bin/echo", "child"], capture_output=True, text=True).stdout.strip()
        body = ("python " + open("server.py").readline().strip() + " " + out).encode()
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)
http.server.ThreadingHTTPServer((os.environ["HOST"], int(os.environ["PORT"])), H).serve_forever()
`},
		{"node", "/usr/bin/node", "server.js", `// node ok
const http = require('http'), fs = require('fs'), os = require('os'), cp = require('child_process');
http.createServer((req, res) => {
  fs.readFile('server.js', 'utf8', (err, src) => {
    if (err) { res.writeHead(500); return res.end(String(err)); }
    const child = cp.execFileSync('/bin/echo', ['child']).toString().trim();
    const nics = Object.keys(os.networkInterfaces()).length;
    res.end('node ' + src.split('\n')[0] + ' ' + child + ' nics=' + nics);
  });
}).listen(Number(process.env.PORT), process.env.HOST);
`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := os.Stat(tt.bin); err != nil {
				t.Skip(tt.bin + " is not installed")
			}
			dir := filepath.Join(s.DataDir, "apps", tt.name, "1.0.0")
			writeFiles(t, dir, map[string]string{
				"manifest.yaml": fmt.Sprintf("name: %s\nversion: 1.0.0\ncommand: [%q, %q]\n", tt.name, tt.bin, tt.file),
				tt.file:         tt.source,
			})
			resp := s.Get("/" + tt.name + "/")
			want := tt.name + " " + map[string]string{"python": "# python ok", "node": "// node ok"}[tt.name] + " child"
			if resp.Status != 200 || !strings.HasPrefix(string(resp.Body), want) {
				t.Fatalf("GET /%s/ = %s, want %q", tt.name, resp, want)
			}
			if tt.name == "node" && strings.HasSuffix(string(resp.Body), "nics=0") {
				t.Fatalf("node saw no network interface: %s", resp)
			}
		})
	}
}

package integration

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// readmeDocs are the documents whose shell blocks TestReadme runs, in this order; their
// commands run where a newcomer pastes them, at the repository's root. The README comes first,
// as a newcomer reads it (its Quick start makes the key the others use), then the reference
// pages of docs/ (every one: TestDocumentedPagesRun checks it), then the examples.
var readmeDocs = []string{
	"README.md",
	"docs/configuration.md",
	"docs/cli.md",
	"docs/api.md",
	"docs/workers.md",
	"docs/packaging.md",
	"docs/secrets.md",
	"docs/cpanel.md",
	"docs/authentication.md",
	"docs/security.md",
	"docs/hosts.md",
	"docs/operations.md",
	"docs/architecture.md",
	"docs/cpanel.md",
	"docs/troubleshooting.md",
	"docs/development.md",
	"examples/README.md",
}

// clusterWalk is the page whose shell blocks TestReadmeCluster runs, apart from readmeDocs: its
// walk starts servers of its own (a primary, an S3 server, two instances) on ports of its own.
const clusterWalk = "docs/cluster.md"

// clusterWalkPorts are the ports the walk's servers listen on; the test rewrites each, in the
// blocks and in examples/Caddyfile.sync, to a free one.
var clusterWalkPorts = regexp.MustCompile(`\b(8081|8082|8090|7070)\b`)

// readmeAddr is the address the documents' examples use (make run's); the test rewrites it in
// the blocks to its own server's port, which Caddyfile.example reads from RUNTIME_PORT.
const readmeAddr = "localhost:8080"

// TestReadme runs the READMEs' shell blocks in order, as a newcomer would paste them, against
// a fresh server started like `make run` does: from Caddyfile.example, with no root key and the
// data under ./data of a scratch folder that holds what the blocks use. So the READMEs cannot
// drift from the runtime again.
func TestReadme(t *testing.T) {
	t.Parallel()
	blocks := readmeBlocks(t, "..", readmeDocs...)
	port := harness.FreePort(t)
	rewrite := strings.NewReplacer(readmeAddr, "localhost:"+strconv.Itoa(port)).Replace

	dir := readmeCheckout(t)
	caddyfile, err := os.ReadFile(filepath.Join(dir, "Caddyfile.example"))
	must(t, err)
	// As make run does.
	must(t, os.MkdirAll(filepath.Join(dir, "data", "run"), 0o700))

	// As make run PORT=… does: Caddyfile.example reads the port from RUNTIME_PORT.
	harness.Start(t, harness.Config{File: string(caddyfile), Dir: dir, Port: port, Hosts: []harness.Host{{Name: "localhost"}},
		Env: map[string]string{"RUNTIME_PORT": strconv.Itoa(port)}})
	out, err := runReadme(t, dir, blocks, rewrite)
	if err != nil {
		t.Fatalf("%v\noutput of the blocks:\n%s", err, out)
	}
	t.Logf("output of the blocks:\n%s", out)
	// The harness's own files: the Caddyfile it starts the server with, and Caddy's files in
	// the server's HOME, which is the folder (make run's are in the user's home).
	checkIgnored(t, dir, "Caddyfile", ".config/", ".local/")
}

// TestReadmeCluster runs the walk of docs/cluster.md, as a newcomer would paste it at the
// root of a checkout where make deps has run: a sqld primary and two instances sharing it
// (with the warnings the page says they log), then versitygw started and its bucket made as
// the page says, and an upload to one instance served by the other. Every file the walk
// writes must be ignored by git.
func TestReadmeCluster(t *testing.T) {
	t.Parallel()
	dir := readmeCheckout(t)
	// What make sqld versitygw installs.
	sqld := filepath.Join(dir, filepath.FromSlash(testkit.SqldPath))
	must(t, os.MkdirAll(filepath.Dir(sqld), 0o755))
	must(t, os.Symlink(testkit.SqldBinary(t), sqld))
	must(t, os.Symlink(testkit.VersityGWBinary(t), filepath.Join(dir, filepath.FromSlash(testkit.VersityGWPath))))

	ports := map[string]string{}
	rewrite := func(s string) string {
		return clusterWalkPorts.ReplaceAllStringFunc(s, func(port string) string {
			if ports[port] == "" {
				ports[port] = strconv.Itoa(harness.FreePort(t))
			}
			return ports[port]
		})
	}
	caddyfile := filepath.Join(dir, "examples", "Caddyfile.sync")
	text, err := os.ReadFile(caddyfile)
	must(t, err)
	must(t, os.WriteFile(caddyfile, []byte(rewrite(string(text))), 0o644))

	out, err := runReadme(t, dir, readmeBlocks(t, "..", clusterWalk), rewrite)
	if err != nil {
		t.Fatalf("%v\noutput of the blocks:\n%s\nlogs:\n%s", err, out, walkLogs(dir))
	}
	t.Logf("output of the blocks:\n%s\nlogs:\n%s", out, walkLogs(dir))
	checkIgnored(t, dir)
}

// walkLogs returns the servers' logs the cluster walk writes under data/, for a failure.
func walkLogs(dir string) string {
	var b strings.Builder
	for _, name := range []string{"primary.log", "s3.log", "i1/log", "i2/log"} {
		data, _ := os.ReadFile(filepath.Join(dir, "data", filepath.FromSlash(name)))
		fmt.Fprintf(&b, "--- data/%s\n%s", name, data)
	}
	return b.String()
}

// readmeCheckout makes a scratch folder holding the checkout as far as the documents' blocks
// need it: Caddyfile.example, the examples with the module they build in, and bin/runtime.
func readmeCheckout(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"Caddyfile.example", "go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join("..", name))
		must(t, err)
		must(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	must(t, os.CopyFS(filepath.Join(dir, "examples"), os.DirFS("../examples")))
	must(t, os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
	must(t, os.Symlink(harness.Binary(t), filepath.Join(dir, "bin", "runtime")))
	return dir
}

// checkIgnored fails the test for each file in dir, a scratch folder laid out as the checkout,
// that the repository does not hold and its .gitignore does not match: a newcomer following
// the documents would see it in git status. Files whose path starts with one of others are
// the test's own, not the documents'.
func checkIgnored(t *testing.T, dir string, others ...string) {
	t.Helper()
	tracked, err := exec.Command("git", "-C", "..", "ls-files", "-z").Output()
	must(t, err)
	inRepo := map[string]bool{}
	for _, name := range strings.Split(string(tracked), "\x00") {
		inRepo[name] = true
	}
	var created []string
	must(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		name := filepath.ToSlash(rel)
		if err == nil && !inRepo[name] && !slices.ContainsFunc(others, func(o string) bool { return strings.HasPrefix(name, o) }) {
			created = append(created, name)
		}
		return err
	}))
	if len(created) == 0 {
		return
	}
	cmd := exec.Command("git", "-C", "..", "check-ignore", "--no-index", "--stdin", "--verbose", "--non-matching")
	cmd.Stdin = strings.NewReader(strings.Join(created, "\n") + "\n")
	out, err := cmd.Output()
	must(t, err)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if name, ok := strings.CutPrefix(line, "::\t"); ok {
			t.Errorf("the walk creates %s, which .gitignore does not match", name)
		}
	}
}

// TestReadmeFailures checks that TestReadme fails where a newcomer pasting the blocks would
// see something go wrong, and names the line.
func TestReadmeFailures(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/denied" {
			http.Error(w, `{"error":{"code":"SELF_REVOKE_FORBIDDEN"}}`, http.StatusForbidden)
			return
		}
		fmt.Fprint(w, `{"ok":true}`)
	}))
	defer srv.Close()
	tests := []struct {
		name, doc string
		wantLine  int // 0: the blocks pass
	}{
		{"passing", "```sh\ntrue\necho hi   # → hi\necho 'a*b [c]'   # → a*b […]\n```\n", 0},
		{"failing command", "text\n\n```sh\ntrue\nfalse\ntrue\n```\n", 5},
		{"undefined variable", "```sh\necho \"$UNDEFINED_IN_README\"\n```\n", 2},
		{"failing pipeline", "```sh\nfalse | cat\n```\n", 2},
		{"output differs", "```sh\necho hello   # → bye\n```\n", 2},
		{"output differs on the next line", "```sh\necho hello \\\n  world\n# → hello\n```\n", 2},
		{"wildcard", "```sh\necho '{\"a\":1,\"b\":2}'\n# → {\"a\":…}\n```\n", 0},
		{"later block", "```sh\nX=1\n```\n\n```sh\ntest \"$X\" = 2\n```\n", 6},
		{"HTTP success", "```sh\ncurl -s localhost:8080/   # → {\"ok\":true}\n```\n", 0},
		{"HTTP error", "```sh\ncurl -s -X DELETE localhost:8080/denied\n```\n", 2},
		{"HTTP error in a substitution", "```sh\nID=$(curl -s localhost:8080/denied | jq .id)\n```\n", 2},
		{"HTTP error stated", "```sh\ncurl -s localhost:8080/denied   # → {\"error\":{\"code\":\"SELF_REVOKE_FORBIDDEN\"}}\n```\n", 0},
		{"no server", "```sh\ncurl -s 127.0.0.1:1/\n```\n", 2},
		{"skipped block", "```sh\n# readme-test: skip (it fails)\nfalse\n```\n", 0},
		{"other languages are not run", "```yaml\nfalse\n```\n\n```\nfalse\n```\n", 0},
	}
	rewrite := strings.NewReplacer(readmeAddr, strings.TrimPrefix(srv.URL, "http://")).Replace
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			must(t, os.WriteFile(filepath.Join(dir, "DOC.md"), []byte(tt.doc), 0o644))
			blocks := readmeBlocks(t, dir, "DOC.md")
			out, err := runReadme(t, dir, blocks, rewrite)
			if tt.wantLine == 0 {
				if err != nil {
					t.Fatalf("the blocks failed: %v\n%s", err, out)
				}
				return
			}
			if want := fmt.Sprintf("at DOC.md:%d (", tt.wantLine); err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("error = %v, want a failure at %s\n%s", err, want, out)
			}
		})
	}
}

// TestReadmeBlocksRefused checks the rules a document's shell blocks must follow.
func TestReadmeBlocksRefused(t *testing.T) {
	t.Parallel()
	for name, doc := range map[string]string{
		"skip without a reason": "```sh\n# readme-test: skip\nfalse\n```\n",
		"shell block as bash":   "```bash\nfalse\n```\n",
		"unclosed block":        "```sh\ntrue\n",
	} {
		t.Run(name, func(t *testing.T) {
			if blocks, err := parseShellBlocks("DOC.md", doc); err == nil {
				t.Fatalf("parseShellBlocks accepted %q: %+v", doc, blocks)
			}
		})
	}
}

// shellBlock is one runnable ```sh block of a document.
type shellBlock struct {
	doc   string
	line  int // line of the block's first line, 1-based
	lines []string
}

// readmeBlocks reads docs (relative to root) and returns their runnable shell blocks in order.
func readmeBlocks(t *testing.T, root string, docs ...string) []shellBlock {
	t.Helper()
	var blocks []shellBlock
	for _, doc := range docs {
		text, err := os.ReadFile(filepath.Join(root, doc))
		must(t, err)
		bs, err := parseShellBlocks(doc, string(text))
		must(t, err)
		blocks = append(blocks, bs...)
	}
	return blocks
}

// skipMarker starts the first line of a block the test does not run; the reason follows in
// parentheses.
const skipMarker = "# readme-test: skip"

var skipReason = regexp.MustCompile(`^ \(\S.*\)$`)

// parseShellBlocks returns the ```sh blocks of a Markdown text that are not marked to be
// skipped. Shell written under another fence name would silently go untested, so it is refused.
func parseShellBlocks(doc, text string) ([]shellBlock, error) {
	var blocks []shellBlock
	var cur *shellBlock
	other := false // inside a block of another language
	for i, line := range strings.Split(text, "\n") {
		fence, isFence := strings.CutPrefix(strings.TrimSpace(line), "```")
		switch {
		case other:
			other = !isFence || fence != ""
		case cur != nil && isFence && fence == "":
			if len(cur.lines) == 0 || !strings.HasPrefix(cur.lines[0], skipMarker) {
				blocks = append(blocks, *cur)
			} else if !skipReason.MatchString(strings.TrimPrefix(cur.lines[0], skipMarker)) {
				return nil, fmt.Errorf("%s:%d: %s needs its reason in parentheses", doc, cur.line, skipMarker)
			}
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, line)
		case isFence && fence == "sh":
			cur = &shellBlock{doc: doc, line: i + 2}
		case isFence && slices.Contains([]string{"bash", "shell", "console", "zsh"}, fence):
			return nil, fmt.Errorf("%s:%d: write shell examples as ```sh, so the README test runs them", doc, i+1)
		case isFence:
			other = true
		}
	}
	if cur != nil || other {
		return nil, fmt.Errorf("%s: a ``` block is not closed", doc)
	}
	return blocks, nil
}

// readmePrelude starts the script: strict bash, the servers a walk started in the background
// stopped however it ends, a report of the failing line, and curl that fails on HTTP errors
// (showing the answer) except where a command states its output.
const readmePrelude = `set -eEuo pipefail
trap 'jobs -p | xargs -r kill 2>/dev/null || true' EXIT
trap 'echo "readme-test: failed at script lines $LINENO ${BASH_LINENO[*]}" >&2' ERR
curl() {
	if [[ -n ${readme_expecting-} ]]; then
		command curl --max-time 30 "$@"
	else
		command curl --fail-with-body --max-time 30 "$@"
	fi
}
readme_expect() { # where, expected (as written), glob, output
	[[ $4 == $3 ]] && return 0
	printf 'readme-test: %s printed\n%s\nbut its comment says\n%s\n' "$1" "$4" "$2" >&2
	return 1
}
`

// expectMark introduces the output a command must print, at the end of its last line or alone
// on the line after it.
const expectMark = "# → "

// readmeScript turns blocks into one bash script, rewriting their text with rewrite, and
// returns, for each script line, the document line it comes from ("" for the prelude).
func readmeScript(blocks []shellBlock, rewrite func(string) string) (string, []string) {
	var b strings.Builder
	var origin []string
	emit := func(where, line string) {
		b.WriteString(line + "\n")
		origin = append(origin, where)
	}
	for _, line := range strings.Split(strings.TrimSuffix(readmePrelude, "\n"), "\n") {
		emit("", line)
	}
	for _, block := range blocks {
		lines := make([]string, len(block.lines))
		for i, l := range block.lines {
			lines[i] = rewrite(l)
		}
		at := func(i int) string { return fmt.Sprintf("%s:%d", block.doc, block.line+i) }
		emit(at(0), "echo "+shellQuote("### "+at(0)))
		for i := 0; i < len(lines); i++ {
			// A command is its line and the lines it continues onto.
			start := i
			for i+1 < len(lines) && strings.HasSuffix(lines[i], `\`) {
				i++
			}
			last := i
			cmd, want, found := strings.Cut(lines[last], expectMark)
			if found && strings.TrimSpace(cmd) == "" {
				found = false // a comment of its own, not after a command
			}
			if !found && last+1 < len(lines) {
				if next, ok := strings.CutPrefix(strings.TrimSpace(lines[last+1]), expectMark); ok {
					cmd, want, found = lines[last], next, true
					i++ // the expectation's line
				}
			}
			if !found {
				for j := start; j <= last; j++ {
					emit(at(j), lines[j])
				}
				continue
			}
			want = strings.TrimSpace(want)
			emit(at(start), "readme_out=$(readme_expecting=1")
			for j := start; j < last; j++ {
				emit(at(j), lines[j])
			}
			emit(at(last), strings.TrimRight(cmd, " \t"))
			emit(at(last), ")")
			emit(at(last), `printf '%s\n' "$readme_out"`)
			emit(at(start), fmt.Sprintf(`readme_expect %s %s %s "$readme_out"`, shellQuote(at(start)), shellQuote(want), shellQuote(readmeGlob(want))))
		}
	}
	return b.String(), origin
}

// readmeGlob turns an expected output into a bash pattern: "…" matches anything, every other
// character itself.
func readmeGlob(want string) string {
	var b strings.Builder
	for _, r := range want {
		switch {
		case r == '…':
			b.WriteByte('*')
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('\\')
			b.WriteRune(r)
		}
	}
	return b.String()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// runReadme runs blocks with bash in dir and returns their output; the error names the
// document line that failed.
func runReadme(t *testing.T, dir string, blocks []shellBlock, rewrite func(string) string) (string, error) {
	t.Helper()
	script, origin := readmeScript(blocks, rewrite)
	file := filepath.Join(t.TempDir(), "readme.sh")
	must(t, os.WriteFile(file, []byte(script), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", file)
	cmd.Dir = dir
	// The command-line client's logins go to a config folder of the test's own.
	cmd.Env = append(readmeEnv(), "XDG_CONFIG_HOME="+t.TempDir())
	cmd.WaitDelay = 5 * time.Second // a command left running in the background holds the output open
	out, err := cmd.CombinedOutput()
	if err == nil {
		return string(out), nil
	}
	return string(out), fmt.Errorf("the blocks failed at %s (%v)", failedAt(out, origin), cmp.Or(ctx.Err(), err))
}

// failedAt returns the document line where the script whose output is out stopped: the last
// one the ERR trap reports (its own line, else the line of the command that called the
// function it ran in), else the line of bash's own message (an unset variable).
func failedAt(out []byte, origin []string) string {
	var lines []string
	if m := regexp.MustCompile(`readme-test: failed at script lines ([\d ]+)`).FindAllSubmatch(out, -1); len(m) > 0 {
		lines = strings.Fields(string(m[len(m)-1][1]))
	} else if m := regexp.MustCompile(`readme\.sh: line (\d+): `).FindSubmatch(out); m != nil {
		lines = []string{string(m[1])}
	}
	for _, l := range lines {
		if n, _ := strconv.Atoi(l); n >= 1 && n <= len(origin) && origin[n-1] != "" {
			return origin[n-1]
		}
	}
	return "an unknown line"
}

// readmeEnv is a newcomer's environment, as far as the blocks need it: no variable the README
// might use before defining it, no proxy between curl and the server, Go's own settings kept
// (so go build finds its caches).
func readmeEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "PATH", "HOME", "TMPDIR", "XDG_CACHE_HOME", "LANG", "LC_ALL":
			return false
		}
		return !strings.HasPrefix(name, "GO")
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

package integration

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/integration/harness"
)

// The cron tests (issue 38): a worker's cron triggers are requests the runtime sends it on a
// schedule, through the serving path, once per cluster.

// tick is a request to /tick/… the test worker received, as its /ticks lists it.
type tick struct {
	At        time.Time
	Method    string
	Path      string
	Cron      []string
	RequestID string
}

// ticksOf lists the ticks the test worker at /<worker>/ received, those to path only ("" all).
func ticksOf(s *harness.Server, worker, path string) ([]tick, error) {
	resp, err := s.Send("GET", "/"+worker+"/ticks")
	if err != nil {
		return nil, err
	}
	var all []tick
	if resp.Status != 200 || resp.JSON(&all) != nil {
		return nil, fmt.Errorf("GET /%s/ticks = %s", worker, resp)
	}
	return slices.DeleteFunc(all, func(t tick) bool { return path != "" && t.Path != path }), nil
}

// cronOf reads a worker's cron record through s.
func cronOf(t *testing.T, s *harness.Server, worker string) api.WorkerCron {
	t.Helper()
	var c api.WorkerCron
	if resp := s.Get(s.API+"/workers/_/"+worker+"/cron", harness.WithKey(rootKey)); resp.Status != 200 || resp.JSON(&c) != nil {
		t.Fatalf("GET cron = %s", resp)
	}
	return c
}

// countTicks waits for d and returns how many ticks to path the worker received meanwhile.
func countTicks(t *testing.T, s *harness.Server, worker, path string, d time.Duration) int {
	t.Helper()
	before, err := ticksOf(s, worker, path)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(d)
	after, err := ticksOf(s, worker, path)
	if err != nil {
		t.Fatal(err)
	}
	return len(after) - len(before)
}

const cronManifest = "cron:\n" +
	"  - { schedule: \"@every 1s\", path: /tick/a }\n" +
	"  - { name: slow, schedule: \"@every 1s\", path: \"/tick/slow?sleep=2500ms\", timeout: 10s }\n"

// TestCronTriggers: an invalid schedule is refused at upload with the entry named; a worker
// with @every 1s is called about once a second with the header naming its trigger and a
// request id of its own; its runs are listed with status and duration, an overlong run's next
// ticks as skipped; a client's Runtime-Cron header never reaches the worker; pausing stops the
// calls and resuming starts them again.
func TestCronTriggers(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	key := harness.WithKey(rootKey)

	for _, bad := range []struct{ manifest, says string }{
		{"cron:\n  - { schedule: \"61 * * * *\", path: /tick/a }\n", `cron[0]: schedule \"61 * * * *\" is not valid`},
		{"cron:\n  - { schedule: \"@hourly\", path: /x }\n  - { name: nightly, schedule: \"@nightly\", path: /y }\n", `cron[1] (nightly): schedule \"@nightly\" is not valid`},
		{"cron:\n  - { schedule: \"@hourly\" }\n", "cron[0]: path is missing"},
	} {
		resp := s.Upload(s.API+"/workers/upload", "app.tgz", testWorkerArchive(t, "app", "0.1.0", bad.manifest), key)
		if resp.Status != 400 || resp.ErrorCode() != "INVALID_MANIFEST" || !strings.Contains(string(resp.Body), bad.says) {
			t.Fatalf("upload with %q = %s; want 400 INVALID_MANIFEST saying %s", bad.manifest, resp, bad.says)
		}
	}

	uploadOK(t, s, "workers", "app.tgz", testWorkerArchive(t, "app", "1.0.0", cronManifest), rootKey)
	harness.EventuallyNil(t, 15*time.Second, func() error {
		got, err := ticksOf(s, "app", "/tick/a")
		if err == nil && len(got) == 0 {
			err = fmt.Errorf("no tick yet")
		}
		return err
	})
	if n := countTicks(t, s, "app", "/tick/a", 6*time.Second); n < 3 || n > 8 {
		t.Fatalf("@every 1s called the worker %d times in 6 s; want about 6 (3 to 8)", n)
	}
	got, _ := ticksOf(s, "app", "/tick/a")
	for _, tk := range got {
		if tk.Method != "POST" || !slices.Equal(tk.Cron, []string{"0"}) || !strings.HasPrefix(tk.RequestID, "cron-") {
			t.Fatalf("a tick reached the worker as %+v; want POST with Runtime-Cron: 0 and a request id of its own", tk)
		}
	}

	// The runs: listed with status and duration, the slow trigger's overlapping ticks skipped.
	c := cronOf(t, s, "app")
	if len(c.Triggers) != 2 || c.Triggers[0].Name != "0" || c.Triggers[1].Name != "slow" || c.Triggers[0].NextRun == "" || c.Paused {
		t.Fatalf("cron = %+v", c)
	}
	byStatus := map[string]int{}
	for _, r := range c.Runs {
		byStatus[r.Trigger+" "+r.Status]++
		if r.Trigger == "0" && r.Status == "ok" && (r.HTTPStatus != 204 || r.Instance == "" || r.DurationMs < 0 || r.RequestID == "") {
			t.Fatalf("run = %+v", r)
		}
		if r.Trigger == "slow" && r.Status == "ok" && r.DurationMs < 2500 {
			t.Fatalf("the slow trigger's run took %d ms, under its 2.5 s sleep: %+v", r.DurationMs, r)
		}
	}
	if byStatus["0 ok"] < 3 || byStatus["slow skipped"] < 1 || byStatus["0 skipped"] > 0 {
		t.Fatalf("runs by trigger and status = %v; want ok runs of 0 and skipped ticks of slow", byStatus)
	}
	for _, r := range c.Runs {
		if r.Trigger == "slow" && r.Status == "skipped" && !strings.Contains(r.Error, "previous run had not ended") {
			t.Fatalf("skipped run = %+v", r)
		}
	}

	// The metrics count the runs by outcome and time them.
	m := scrape(t, s)
	if m[`runtime_cron_runs_total{outcome="ok"}`] < 3 || m[`runtime_cron_runs_total{outcome="skipped"}`] < 1 ||
		m[`runtime_cron_run_duration_seconds_count{outcome="ok"}`] < 3 {
		t.Fatalf("cron metrics: ok %v, skipped %v, timed %v", m[`runtime_cron_runs_total{outcome="ok"}`],
			m[`runtime_cron_runs_total{outcome="skipped"}`], m[`runtime_cron_run_duration_seconds_count{outcome="ok"}`])
	}

	// A client's Runtime-Cron header, in any spelling, is removed before the worker sees it.
	if resp := s.Do("POST", "/app/tick/outside", harness.WithHeader("Runtime-Cron", "0"), harness.WithHeader("Runtime_Cron", "0")); resp.Status != 204 {
		t.Fatalf("outside request = %s", resp)
	}
	outside, err := ticksOf(s, "app", "/tick/outside")
	if err != nil || len(outside) != 1 || len(outside[0].Cron) != 0 {
		t.Fatalf("the outside request reached the worker as %+v (%v); want it without Runtime-Cron", outside, err)
	}

	// Reading takes workers:read within the key's namespaces, pausing workers:install.
	viewer := harness.WithKey(s.CreateKey(rootKey, map[string]any{"name": "watcher", "role": "viewer"}).Secret)
	team := harness.WithKey(s.CreateKey(rootKey, map[string]any{"name": "team", "role": "editor", "namespaces": []string{"@team"}}).Secret)
	for _, c := range []struct {
		method, path string
		key          harness.Option
		status       int
		code         string
	}{
		{"GET", "/workers/_/app/cron", viewer, 200, ""},
		{"POST", "/workers/_/app/cron/pause", viewer, 403, "PERMISSION_DENIED"},
		{"GET", "/workers/_/app/cron", team, 403, "NAMESPACE_DENIED"},
		{"POST", "/workers/_/app/cron/pause", team, 403, "NAMESPACE_DENIED"},
		{"GET", "/workers/_/nobody/cron", key, 404, "WORKER_NOT_FOUND"},
	} {
		if resp := s.Do(c.method, s.API+c.path, c.key, harness.WithOrigin("")); resp.Status != c.status || c.code != "" && resp.ErrorCode() != c.code {
			t.Fatalf("%s %s = %s; want %d %s", c.method, c.path, resp, c.status, c.code)
		}
	}
	if cronOf(t, s, "app").Paused {
		t.Fatal("a refused pause paused the triggers")
	}

	// Pause: no tick reaches the worker; resume: they come again.
	var paused api.WorkerCron
	if resp := s.Do("POST", s.API+"/workers/_/app/cron/pause", key); resp.Status != 200 || resp.JSON(&paused) != nil || !paused.Paused || paused.PausedBy == "" {
		t.Fatalf("pause = %s", resp)
	}
	time.Sleep(1500 * time.Millisecond) // a tick under way when it was paused ends
	if n := countTicks(t, s, "app", "/tick/a", 3*time.Second); n != 0 {
		t.Fatalf("paused, the worker was called %d times in 3 s", n)
	}
	// The command line lists them paused, and resumes them.
	cli := newCLI(t)
	cli.env = []string{"RUNTIME_URL=" + s.URL, "RUNTIME_API_KEY=" + rootKey}
	if out := cli.ok("cron", "list", "app"); !strings.Contains(out, "triggers paused since") || !strings.Contains(out, "@every 1s") || !strings.Contains(out, "POST /tick/a") {
		t.Fatalf("cron list printed %q", out)
	}
	if out := cli.ok("cron", "resume", "app"); !strings.Contains(out, "app: cron triggers resumed") || !strings.Contains(out, "triggers active") {
		t.Fatalf("cron resume printed %q", out)
	}
	if n := countTicks(t, s, "app", "/tick/a", 4*time.Second); n < 1 {
		t.Fatal("resumed, the worker was not called in 4 s")
	}
	var trail struct {
		Entries []struct{ Action, Target, Outcome string }
	}
	if resp := s.Get(s.API+"/audit?action=worker.cron.pause", key); resp.Status != 200 || resp.JSON(&trail) != nil {
		t.Fatalf("audit = %s", resp)
	}
	if !slices.ContainsFunc(trail.Entries, func(e struct{ Action, Target, Outcome string }) bool {
		return e.Action == "worker.cron.pause" && e.Target == "app" && e.Outcome == "success"
	}) {
		t.Fatalf("the pause is not audited: %+v", trail.Entries)
	}
}

// TestCronCluster: in a cluster of two instances on a real sqld, each of 20 ticks of an
// @every 1s trigger runs on exactly one instance; when the instance holding the lease stops,
// the other runs the ticks within two ticks.
func TestCronCluster(t *testing.T) {
	t.Parallel()
	c := startCluster(t, time.Second)
	g := c.Start(t, "a", "b").In(t)
	a := g[0]
	uploadOK(t, a, "workers", "app.tgz", testWorkerArchive(t, "app", "1.0.0", "cron:\n  - { schedule: \"@every 1s\", path: /tick/c }\n"), rootKey)
	g.Each(t, converge, listed("app", "1.0.0", true))

	// 20 ticks after both serve it, each run once: one run per tick in the key store, one
	// request per run at the two workers together.
	var runs []api.CronRun
	harness.EventuallyNil(t, 60*time.Second, func() error {
		runs = slices.DeleteFunc(cronOf(t, a, "app").Runs, func(r api.CronRun) bool { return r.Status == "running" })
		if len(runs) < 22 {
			return fmt.Errorf("%d runs ended so far", len(runs))
		}
		return nil
	})
	runs = runs[1:21] // newest first; the first ticks may have come before b served the worker
	seen := map[string]string{}
	requests := map[string]bool{}
	for _, r := range runs {
		if other, ok := seen[r.ScheduledAt]; ok {
			t.Fatalf("the tick of %s ran on %s and %s", r.ScheduledAt, other, r.Instance)
		}
		seen[r.ScheduledAt] = r.Instance
		requests[r.RequestID] = true
		if r.Status != "ok" {
			t.Fatalf("run = %+v", r)
		}
	}
	first, _ := time.Parse(time.RFC3339Nano, runs[len(runs)-1].ScheduledAt)
	last, _ := time.Parse(time.RFC3339Nano, runs[0].ScheduledAt)
	// A second apart, none missed; a loaded machine may stall the scheduler past a tick or two
	// (a tick is never run late once the next is due).
	if gap := last.Sub(first); gap < 19*time.Second || gap > 21*time.Second {
		t.Fatalf("20 runs span %s, from %s to %s; want 20 ticks a second apart, at most two missed", gap, first, last)
	}
	calls := 0
	var held, other *harness.Server // the instance that ran the newest run, and the other
	for i, s := range g {
		ticks, err := ticksOf(s, "app", "/tick/c")
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range ticks {
			// Every request of those ticks, from either instance, whether it ran as a run or not.
			if !tk.At.Before(first) && tk.At.Before(last.Add(500*time.Millisecond)) {
				calls++
				if !requests[tk.RequestID] {
					t.Errorf("the worker of %s got a tick's request that is no run: %+v", s.Name(), tk)
				}
			}
			if tk.RequestID == runs[0].RequestID {
				held, other = s, g[1-i]
			}
		}
	}
	if calls != len(runs) || held == nil {
		t.Fatalf("the workers of both instances got %d requests in the time of the %d runs (the newest found: %v)", calls, len(runs), held != nil)
	}

	// The holder stops; the other runs the ticks from at most two ticks after its last one.
	holderID := runs[0].Instance
	held.Stop()
	harness.EventuallyNil(t, 30*time.Second, func() error {
		var lastHeld, firstOther time.Time
		runs := cronOf(t, other, "app").Runs
		for _, r := range runs {
			if at, _ := time.Parse(time.RFC3339Nano, r.ScheduledAt); r.Instance == holderID && at.After(lastHeld) {
				lastHeld = at
			}
		}
		for _, r := range runs {
			if at, _ := time.Parse(time.RFC3339Nano, r.ScheduledAt); r.Instance != holderID && at.After(lastHeld) && (firstOther.IsZero() || at.Before(firstOther)) {
				firstOther = at
			}
		}
		switch {
		case firstOther.IsZero():
			return fmt.Errorf("no tick has run on the other instance since the holder's last at %s", lastHeld)
		case firstOther.Sub(lastHeld) > 2*time.Second:
			t.Fatalf("the holder's last tick ran at %s, the other instance's first at %s: more than two ticks later", lastHeld, firstOther)
		}
		return nil
	})
}

// TestExampleCronDB: examples/cron-db, with its minute's schedule made a second's, is called
// by its trigger, keeps the ticks in its database (they are still counted after its process
// restarts), and refuses the task to a visitor who forges the header.
func TestExampleCronDB(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	manifest, err := os.ReadFile("../examples/cron-db/manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	server, err := os.ReadFile("../examples/cron-db/server.py")
	if err != nil {
		t.Fatal(err)
	}
	fast := strings.Replace(string(manifest), `"@every 1m"`, `"@every 1s"`, 1)
	if fast == string(manifest) {
		t.Fatal(`the example's schedule is no longer "@every 1m"; update the test`)
	}
	uploadOK(t, s, "workers", "cron-db.tgz", harness.TarGz(t, harness.File{Name: "manifest.yaml", Body: fast},
		harness.File{Name: "server.py", Body: string(server)}), rootKey)
	var state struct {
		Ticks int
		Last  struct{ Trigger, RequestID string }
	}
	harness.EventuallyNil(t, 20*time.Second, func() error {
		resp, err := s.Send("GET", "/cron-db/")
		if err != nil || resp.Status != 200 || resp.JSON(&state) != nil {
			return fmt.Errorf("GET /cron-db/ = %v %v", resp, err)
		}
		if state.Ticks < 2 {
			return fmt.Errorf("%d ticks so far", state.Ticks)
		}
		return nil
	})
	if state.Last.Trigger != "tick" || !strings.HasPrefix(state.Last.RequestID, "cron-") {
		t.Fatalf("the last tick = %+v", state.Last)
	}
	before := state.Ticks
	if resp := s.Do("POST", s.API+"/workers/_/cron-db/restart", harness.WithKey(rootKey)); resp.Status != 200 {
		t.Fatalf("restart = %s", resp)
	}
	if resp := s.Get("/cron-db/"); resp.Status != 200 || resp.JSON(&state) != nil || state.Ticks < before {
		t.Fatalf("after a restart of its process the worker counts %d ticks, want at least %d: %s", state.Ticks, before, resp)
	}
	if resp := s.Do("POST", "/cron-db/tasks/tick", harness.WithHeader("Runtime-Cron", "tick")); resp.Status != 403 {
		t.Fatalf("a visitor's forged tick = %s; want 403", resp)
	}
	// The ticks are rows of the worker's own database, which outlive its process.
	files, _ := filepath.Glob(filepath.Join(s.DataDir, "state", "databases", "cron-db", "*.sqlite"))
	if len(files) != 1 {
		t.Fatalf("the worker's database files: %v; want one under state_dir/databases/cron-db", files)
	}
	db, err := sql.Open("libsql", "file:"+files[0]+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows int
	var trigger, requestID string
	if err := db.QueryRow(`SELECT count(*), max(trigger), max(request_id) FROM ticks`).Scan(&rows, &trigger, &requestID); err != nil ||
		rows < state.Ticks || trigger != "tick" || !strings.HasPrefix(requestID, "cron-") {
		t.Errorf("the table ticks: %d rows (GET counted %d), trigger %q, request id %q, %v", rows, state.Ticks, trigger, requestID, err)
	}
	if resp := s.Do("POST", s.API+"/workers/_/cron-db/restart", harness.WithKey(rootKey)); resp.Status != 200 {
		t.Fatalf("restart = %s", resp)
	}
	var after struct{ Ticks int }
	if resp := s.Get("/cron-db/"); resp.Status != 200 || resp.JSON(&after) != nil || after.Ticks < rows {
		t.Errorf("after a restart GET /cron-db/ = %s; want at least the %d ticks recorded", resp, rows)
	}
}

// TestCPanelCron: an app's page shows its cron triggers with their next run and last runs,
// and its switch pauses and resumes them.
func TestCPanelCron(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	uploadOK(t, s, "workers", "app.tgz", testWorkerArchive(t, "app", "1.0.0", "cron:\n  - { name: beat, schedule: \"@every 1s\", path: /tick/a }\n"), rootKey)
	editor := s.CreateKey(rootKey, map[string]any{"name": "deployer", "role": "editor"}).Secret

	p, problems := openPanel(t, s)
	p.do("opening app's page", chromedp.Navigate(p.base+"/apps/app"))
	p.signIn(editor)
	p.do("waiting for the cron triggers", chromedp.WaitVisible(chromedp.CSS(`#cron-h`)), chromedp.WaitVisible(chromedp.CSS(`tr[data-trigger="beat"]`)))
	if sched := p.text(`tr[data-trigger="beat"] td[data-label="Schedule"]`); !strings.Contains(sched, "@every 1s") {
		t.Errorf("the trigger's schedule reads %q", sched)
	}
	// The page reads the runs again every 10 s.
	if _, err := poll[bool](p.ctx, `!!document.querySelector('table.cron-runs tr[data-status="ok"]')`, 30*time.Second); err != nil {
		t.Fatalf("waiting for a run: %v", err)
	}

	p.do("pausing", chromedp.Click(chromedp.CSS(`input[role=switch]`)), chromedp.WaitVisible(chromedp.CSS(`#cron-state.warn`)))
	if !cronOf(t, s, "app").Paused {
		t.Fatal("the switch did not pause the triggers")
	}
	if state := p.text(`#cron-state`); !strings.Contains(state, "Paused") || !strings.Contains(state, "no tick runs") {
		t.Errorf("paused, the page says %q", state)
	}
	p.do("resuming", chromedp.Click(chromedp.CSS(`input[role=switch]`)), chromedp.WaitNotPresent(chromedp.CSS(`#cron-state.warn`)))
	if cronOf(t, s, "app").Paused {
		t.Fatal("the switch did not resume the triggers")
	}
	problems.check(t)
}

// TestCronWasm: a WebAssembly worker's trigger runs through the engine like a process
// worker's, its answer recorded.
func TestCronWasm(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	uploadOK(t, s, "workers", "wasm.tgz", wasmPackage(t, "wapp", "1.0.0", "cron:\n  - { schedule: \"@every 1s\", path: /task, method: GET }\n"), rootKey)
	harness.EventuallyNil(t, 20*time.Second, func() error {
		for _, r := range cronOf(t, s, "wapp").Runs {
			if r.Status == "ok" && r.HTTPStatus == 200 {
				return nil
			}
		}
		return fmt.Errorf("no ok run yet")
	})
}

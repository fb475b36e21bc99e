// Command report turns `go test -bench` output of the bench package into bench/RESULTS.md:
// machine facts, the median ns/op and req/s of each benchmark over its runs, and the ratio of
// the authenticated request's throughput to the public one's against the 0.80 target.
//
// It reads the benchmark output on stdin and echoes it to stderr as it arrives, so make bench
// shows progress:
//
//	go test -run '^$' -bench . -benchtime=3s -count=5 ./bench/ 2>&1 | report -benchtime 3s -o bench/RESULTS.md
//
// It exits non-zero, writing nothing, when the output reports a failure or lacks either
// benchmark.
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The benchmarks compared, by name without the -GOMAXPROCS suffix, and the product target.
const (
	publicBench = "BenchmarkAPI/public-health"
	authBench   = "BenchmarkAPI/auth-session"
	target      = 0.80
)

func main() {
	out := flag.String("o", "", "write the report to this file instead of stdout")
	benchtime := flag.String("benchtime", "3s", "the -benchtime of the run, shown in the report")
	flag.Parse()
	res, err := parse(io.TeeReader(os.Stdin, os.Stderr))
	if err == nil {
		var buf bytes.Buffer
		write(&buf, res, machine(res), *benchtime)
		if *out == "" {
			_, err = os.Stdout.Write(buf.Bytes())
		} else {
			err = os.WriteFile(*out, buf.Bytes(), 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

// results is the parsed benchmark output.
type results struct {
	cpu   string              // the "cpu:" line of go test
	procs string              // GOMAXPROCS, from the benchmark name suffix
	runs  map[string][]sample // by benchmark name without the suffix
	order []string            // benchmark names in order of appearance
	raw   []string            // the result lines as printed
}

// sample is one result line.
type sample struct {
	nsPerOp, reqPerSec float64
}

var procsSuffix = regexp.MustCompile(`-(\d+)$`)

// roundSuffix is what go test appends to the repeated sub-benchmarks of later rounds.
var roundSuffix = regexp.MustCompile(`#\d+$`)

// parse reads go test -bench output, refusing output that reports a failure.
func parse(r io.Reader) (*results, error) {
	res := &results{runs: map[string][]sample{}}
	var failed bool
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "cpu: "):
			res.cpu = strings.TrimPrefix(line, "cpu: ")
		case strings.HasPrefix(line, "FAIL"), strings.HasPrefix(line, "--- FAIL"):
			failed = true
		case strings.HasPrefix(line, "Benchmark"):
			name, s, ok := parseLine(line)
			if !ok {
				continue
			}
			if m := procsSuffix.FindStringSubmatch(name); m != nil {
				name, res.procs = strings.TrimSuffix(name, m[0]), m[1]
			}
			name = roundSuffix.ReplaceAllString(name, "")
			if _, seen := res.runs[name]; !seen {
				res.order = append(res.order, name)
			}
			res.runs[name] = append(res.runs[name], s)
			res.raw = append(res.raw, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if failed {
		return nil, errors.New("the benchmark output reports a failure")
	}
	for _, name := range []string{publicBench, authBench} {
		if len(res.runs[name]) == 0 {
			return nil, fmt.Errorf("no results for %s", name)
		}
	}
	return res, nil
}

// parseLine parses "BenchmarkX-2  1000  1234 ns/op  810.5 req/s"; ok is false for lines that
// are not results with both values, such as a benchmark's log output.
func parseLine(line string) (name string, s sample, ok bool) {
	f := strings.Fields(line)
	if len(f) < 4 || len(f)%2 != 0 {
		return "", s, false
	}
	if _, err := strconv.Atoi(f[1]); err != nil {
		return "", s, false
	}
	for i := 2; i < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return "", s, false
		}
		switch f[i+1] {
		case "ns/op":
			s.nsPerOp = v
		case "req/s":
			s.reqPerSec = v
		}
	}
	return f[0], s, s.nsPerOp > 0 && s.reqPerSec > 0
}

// pairedRatio returns the median over rounds of auth req/s divided by public req/s, pairing
// the i-th run of each (they alternate).
func pairedRatio(public, auth []sample) float64 {
	n := min(len(public), len(auth))
	ratios := make([]sample, n)
	for i := range n {
		ratios[i] = sample{reqPerSec: auth[i].reqPerSec / public[i].reqPerSec}
	}
	return median(ratios, reqPerSec)
}

// median returns the median of the values pick takes from samples.
func median(samples []sample, pick func(sample) float64) float64 {
	v := make([]float64, len(samples))
	for i, s := range samples {
		v[i] = pick(s)
	}
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

func nsPerOp(s sample) float64   { return s.nsPerOp }
func reqPerSec(s sample) float64 { return s.reqPerSec }

// facts describes the machine the benchmarks ran on.
type facts struct {
	nproc, cpu, goVersion, date string
}

func machine(res *results) facts {
	f := facts{
		nproc:     strconv.Itoa(runtime.NumCPU()),
		cpu:       cpuModel(),
		goVersion: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		date:      time.Now().UTC().Format("2006-01-02 15:04 MST"),
	}
	if f.cpu == "" {
		f.cpu = res.cpu
	}
	return f
}

// cpuModel returns the first "model name" of /proc/cpuinfo, or "".
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// write renders the report.
func write(w io.Writer, res *results, m facts, benchtime string) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	pub, auth := median(res.runs[publicBench], reqPerSec), median(res.runs[authBench], reqPerSec)
	ratio := pairedRatio(res.runs[publicBench], res.runs[authBench])
	verdict := "PASS"
	if ratio < target {
		verdict = "FAIL"
	}
	runs := len(res.runs[publicBench])
	gotest := fmt.Sprintf("RUNTIME_BINARY=$PWD/bin/runtime go test -run '^$' -bench . -benchtime=%s -count=1 ./bench/ -rounds=%d", benchtime, runs)

	p("# Benchmark results")
	p("")
	p("Generated by `make bench` (bench/cmd/report); do not edit by hand.")
	p("")
	p("**Authenticated / public throughput: %.3f** (median of the per-round ratios; medians %.0f / %.0f req/s); target ≥ %.2f: **%s**.", ratio, auth, pub, target, verdict)
	p("")
	p("## What is measured")
	p("")
	p("Requests per second of the real runtime binary (`bin/runtime`, started by `integration/harness`")
	p("with its Caddyfile: HTTP/1.1 on 127.0.0.1, JSON logs at INFO) for two requests, against one")
	p("server process:")
	p("")
	p("- **public-health**: `GET /api/health`, no credential;")
	p("- **auth-session**: `GET /api/admin/session` with a `viewer` API key in `X-API-Key`.")
	p("")
	p("`bench/auth_test.go` sends each request from `b.RunParallel` goroutines (`parallelism` per")
	p("GOMAXPROCS) over one shared keep-alive `http.Client`, so each goroutine reuses a connection, and")
	p("fails on any response other than 200. The client runs on the same machine and shares its CPUs")
	p("with the server, so absolute numbers are below what a separate load generator would see; the")
	p("ratio compares both requests under the same conditions. The runtime writes its access log (one")
	p("JSON line per request) to a file in the server's folder rather than to the harness's stderr")
	p("pipe, which would keep every line in the load-generating process. Both requests are warmed up")
	p("for a few seconds first. The two requests then alternate for %d rounds of %s each, so a slow", runs, benchtime)
	p("spell of the shared machine falls on both; the figures are medians over the rounds, with the")
	p("slowest and fastest round beside them, and the verdict uses the median of the per-round ratios.")
	p("")
	p("## Machine")
	p("")
	p("| | |")
	p("|---|---|")
	p("| CPUs (`nproc`) | %s |", m.nproc)
	if res.procs != "" {
		p("| GOMAXPROCS of the benchmark | %s |", res.procs)
	}
	p("| CPU model (/proc/cpuinfo) | %s |", m.cpu)
	p("| Go | %s |", m.goVersion)
	p("| Date | %s |", m.date)
	p("")
	p("## Results")
	p("")
	p("| Benchmark | Runs | Median ns/op | Median req/s | Min req/s | Max req/s |")
	p("|---|---:|---:|---:|---:|---:|")
	byRate := func(a, b sample) int { return cmp.Compare(a.reqPerSec, b.reqPerSec) }
	for _, name := range res.order {
		s := res.runs[name]
		p("| %s | %d | %.0f | %.0f | %.0f | %.0f |", strings.TrimPrefix(name, "Benchmark"), len(s),
			median(s, nsPerOp), median(s, reqPerSec), slices.MinFunc(s, byRate).reqPerSec, slices.MaxFunc(s, byRate).reqPerSec)
	}
	p("")
	p("| Ratio | Value | Target | Result |")
	p("|---|---:|---:|---|")
	p("| auth-session / public-health req/s, median of per-round ratios | %.3f | ≥ %.2f | %s |", ratio, target, verdict)
	p("| ratio of the medians | %.3f | | |", auth/pub)
	p("")
	p("## Reproduce")
	p("")
	p("```sh")
	p("make bench")
	p("```")
	p("")
	p("It builds `bin/runtime`, runs `%s`", gotest)
	p("and writes this file from the output with `bench/cmd/report`.")
	p("")
	p("## Raw output")
	p("")
	p("```")
	if res.cpu != "" {
		p("cpu: %s", res.cpu)
	}
	for _, line := range res.raw {
		p("%s", line)
	}
	p("```")
}

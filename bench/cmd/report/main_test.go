package main

import (
	"strings"
	"testing"
)

const output = `goos: linux
goarch: amd64
pkg: github.com/caddy-runtime/runtime/bench
cpu: AMD EPYC
BenchmarkAPI/public-health-2         	   32985	     40000 ns/op	     25000 req/s
BenchmarkAPI/auth-session-2          	   28150	     46000 ns/op	     21700 req/s
    auth_test.go:1: a log line
BenchmarkAPI/public-health#01-2      	   32985	     30000 ns/op	     33000 req/s
BenchmarkAPI/auth-session#01-2       	   28150	     50000 ns/op	     20000 req/s
BenchmarkAPI/public-health#02-2      	   32985	     37000 ns/op	     27000 req/s
BenchmarkAPI/auth-session#02-2       	   28150	     41000 ns/op	     24300 req/s
PASS
ok  	github.com/caddy-runtime/runtime/bench	4.501s
`

// TestParse checks the medians and the verdict computed from go test -bench output, with the
// rounds of each request grouped and paired.
func TestParse(t *testing.T) {
	res, err := parse(strings.NewReader(output))
	if err != nil {
		t.Fatal(err)
	}
	if res.cpu != "AMD EPYC" || res.procs != "2" || len(res.raw) != 6 || len(res.order) != 2 {
		t.Errorf("cpu %q, procs %q, %d raw lines, benchmarks %v", res.cpu, res.procs, len(res.raw), res.order)
	}
	if got := median(res.runs[publicBench], reqPerSec); got != 27000 {
		t.Errorf("public median req/s = %v, want 27000", got)
	}
	if got := median(res.runs[authBench], nsPerOp); got != 46000 {
		t.Errorf("auth median ns/op = %v, want 46000", got)
	}
	// Per-round ratios 0.868, 0.606, 0.9: their median passes although one slow round does not.
	var b strings.Builder
	write(&b, res, facts{nproc: "2"}, "3s")
	if !strings.Contains(b.String(), "| auth-session / public-health req/s, median of per-round ratios | 0.868 | ≥ 0.80 | PASS |") {
		t.Errorf("report lacks the passing ratio:\n%s", b.String())
	}
	slow, _ := parse(strings.NewReader(strings.ReplaceAll(output, "24300 req/s", "19000 req/s")))
	b.Reset()
	write(&b, slow, facts{nproc: "2"}, "3s")
	if !strings.Contains(b.String(), "| 0.704 | ≥ 0.80 | FAIL |") {
		t.Errorf("report lacks the failing ratio:\n%s", b.String())
	}
}

// TestParseRefusesFailures checks that a failed or incomplete run gives no report.
func TestParseRefusesFailures(t *testing.T) {
	for name, in := range map[string]string{
		"failure":   output + "--- FAIL: BenchmarkAPI/auth-session\nFAIL\n",
		"no auth":   strings.ReplaceAll(output, "auth-session", "other"),
		"no output": "",
	} {
		if _, err := parse(strings.NewReader(in)); err == nil {
			t.Errorf("%s: parse succeeded", name)
		}
	}
}

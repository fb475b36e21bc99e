package main

import (
	"strings"
	"testing"
)

const output = `goos: linux
cpu: AMD EPYC
BenchmarkAPI/public-health-2         	   32985	     40000 ns/op	     25000 req/s
BenchmarkAPI/auth-session-2          	   28150	     46000 ns/op	     21700 req/s
BenchmarkAPI/cookie-session-2        	   28150	     46000 ns/op	     22500 req/s
    auth_test.go:1: a log line
BenchmarkAPI/public-health#01-2      	   32985	     30000 ns/op	     33000 req/s
BenchmarkAPI/auth-session#01-2       	   28150	     50000 ns/op	     20000 req/s
BenchmarkAPI/cookie-session#01-2     	   28150	     50000 ns/op	     19800 req/s
BenchmarkAPI/public-health#02-2      	   32985	     37000 ns/op	     27000 req/s
BenchmarkAPI/auth-session#02-2       	   28150	     41000 ns/op	     24300 req/s
BenchmarkAPI/cookie-session#02-2     	   28150	     41000 ns/op	     24000 req/s
BenchmarkKeyStore/local-auth-2       	   28150	     46000 ns/op	     20000 req/s
BenchmarkKeyStore/sync-auth-2        	   28150	     46000 ns/op	     19600 req/s
BenchmarkKeyStore/sync-auth#01-2     	   28150	     46000 ns/op	     18000 req/s
BenchmarkKeyStore/local-auth#01-2    	   28150	     46000 ns/op	     20000 req/s
BenchmarkDatabase/runtime-write-2     	     600	   2000000 ns/op
BenchmarkDatabase/sqld-write-2        	     600	   1600000 ns/op
BenchmarkDatabase/local-file-write-2  	     200	   5000000 ns/op
BenchmarkDatabase/runtime-read-2      	     600	   1800000 ns/op
BenchmarkDatabase/sqld-read-2         	    1000	   1200000 ns/op
BenchmarkDatabase/local-file-read-2   	   90000	     18000 ns/op
BenchmarkUpload/10MB-runtime-2       	       10	  200000000 ns/op
BenchmarkUpload/10MB-tar-xzf-2       	       10	  150000000 ns/op
BenchmarkUpload/50MB-runtime-2       	       3	  400000000 ns/op
BenchmarkUpload/50MB-tar-xzf-2       	       3	  400000000 ns/op
BenchmarkUpload/10MB-tar-xzf#01-2    	       10	  100000000 ns/op
BenchmarkUpload/10MB-runtime#01-2    	       10	  210000000 ns/op
BenchmarkUpload/50MB-tar-xzf#01-2    	       3	  500000000 ns/op
BenchmarkUpload/50MB-runtime#01-2    	       3	  550000000 ns/op
BenchmarkDeploy/cli-2                	       3	  900000000 ns/op
BenchmarkDeploy/tar-curl-2           	       3	 1000000000 ns/op
BenchmarkDeploy/cli#01-2             	       3	 1200000000 ns/op
BenchmarkDeploy/tar-curl#01-2        	       3	 1000000000 ns/op
BenchmarkServing/static-worker-2     	   10000	    100000 ns/op	     10000 req/s
BenchmarkServing/file-server-2       	   10000	    100000 ns/op	     10500 req/s
BenchmarkServing/process-worker-2    	   10000	    100000 ns/op	      8000 req/s
BenchmarkServing/reverse-proxy-2     	   10000	    100000 ns/op	     10000 req/s
BenchmarkServing/socket-worker-2     	   10000	    100000 ns/op	     12500 req/s
BenchmarkServing/pinned-worker-2     	   10000	    100000 ns/op	      9800 req/s
BenchmarkServing/inject-base-2       	   10000	    100000 ns/op	      9000 req/s
BenchmarkSplit/no-split-2            	   10000	    100000 ns/op	     10000 req/s
BenchmarkSplit/split-2               	   10000	    100000 ns/op	      9700 req/s
BenchmarkSplit/split-no-cookie-2     	   10000	    100000 ns/op	      8500 req/s
BenchmarkHosts/by-host-2             	   10000	    100000 ns/op	      9700 req/s
BenchmarkHosts/by-path-2             	   10000	    100000 ns/op	     10000 req/s
BenchmarkHostPermission-2            	 1000000	      2400 ns/op	         2.400 µs/check
BenchmarkManyWorkers/one-worker-2    	   10000	    100000 ns/op	     10000 req/s
BenchmarkManyWorkers/fifty-workers-2 	   10000	    100000 ns/op	      9500 req/s
BenchmarkManyWorkers/fifty-workers#01-2	   10000	    100000 ns/op	      8000 req/s
BenchmarkManyWorkers/one-worker#01-2 	   10000	    100000 ns/op	     10000 req/s
BenchmarkColdStart-2                 	      48	  24398436 ns/op	         4.000 bare-p50-ms	         6.000 bare-p90-ms	        11.00 p50-ms	         0.8462 p50/budget	        20.00 p90-ms	         1.111 p90/budget	        15.00 port-p50-ms
BenchmarkJSColdStart-2               	      30	  80000000 ns/op	        10.00 bare-p50-ms	        14.00 bare-p90-ms	        18.00 p50-ms	         8.000 p50-over-bare-ms	        30.00 p90-ms	        25.00 socket-p50-ms
BenchmarkJSServing/js-worker-2       	   10000	    200000 ns/op	      5000 req/s
BenchmarkJSServing/reverse-proxy-2   	   10000	    200000 ns/op	      5000 req/s
BenchmarkJSServing/js-socket-worker-2	   10000	    250000 ns/op	      4000 req/s
BenchmarkJSServing/reverse-proxy#01-2	   10000	    166666 ns/op	      6000 req/s
BenchmarkJSServing/js-socket-worker#01-2	   10000	    185185 ns/op	      5400 req/s
BenchmarkJSServing/js-worker#01-2    	   10000	    151515 ns/op	      6600 req/s
BenchmarkJSIdleRSS/idle-2            	1000000000	         0.14 ns/op	        87.0 MiB
BenchmarkJSIdleRSS/idle#01-2         	1000000000	         0.14 ns/op	        88.0 MiB
BenchmarkJSIdleRSS/after-ttl-2       	1000000000	         0.14 ns/op	        90.0 MiB
BenchmarkJSIdleRSS/after-ttl#01-2    	1000000000	         0.14 ns/op	        89.0 MiB
BenchmarkPluginReload-2              	     100	  30000000 ns/op	        30.0 ms/reload
BenchmarkHooks/no-hooks-2            	   10000	    100000 ns/op	     10000 req/s
BenchmarkHooks/five-hooks-2          	   10000	    100000 ns/op	      9500 req/s
BenchmarkListWorkers-2               	     400	    8500000 ns/op	         8.5 ms/list
BenchmarkCosts/health-2              	   10000	     50000 ns/op	     20000 req/s
BenchmarkCosts/respond-2             	   10000	     47619 ns/op	     21000 req/s
BenchmarkCosts/workers-20-2          	   10000	     83333 ns/op	     12000 req/s
BenchmarkCosts/keys-100-2            	   10000	     76923 ns/op	     13000 req/s
BenchmarkCosts/health-1000-2         	   10000	     50000 ns/op	     20000 req/s
BenchmarkCosts/workers-1000-2        	   10000	    111111 ns/op	      9000 req/s
BenchmarkCosts/keys-100-identity-2   	   10000	     62500 ns/op	     16000 req/s
BenchmarkCosts/keys-1-identity-2     	   10000	     35714 ns/op	     28000 req/s
BenchmarkCosts/workers-1000-page-identity-2	   10000	     83333 ns/op	     12000 req/s
BenchmarkCosts/bare-health-2         	   10000	     25000 ns/op	     40000 req/s
BenchmarkCosts/bare-keys-2           	   10000	     31250 ns/op	     32000 req/s
BenchmarkCosts/health#01-2           	   10000	     33333 ns/op	     30000 req/s
BenchmarkCosts/respond#01-2          	   10000	     33333 ns/op	     30000 req/s
BenchmarkCosts/workers-20#01-2       	   10000	     66666 ns/op	     15000 req/s
BenchmarkCosts/keys-100#01-2         	   10000	     66666 ns/op	     15000 req/s
BenchmarkCosts/health-1000#01-2      	   10000	     33333 ns/op	     30000 req/s
BenchmarkCosts/workers-1000#01-2     	   10000	     62500 ns/op	     16000 req/s
BenchmarkCosts/keys-100-identity#01-2	   10000	     41666 ns/op	     24000 req/s
BenchmarkCosts/keys-1-identity#01-2  	   10000	     34482 ns/op	     29000 req/s
BenchmarkCosts/workers-1000-page-identity#01-2	   10000	     71428 ns/op	     14000 req/s
BenchmarkCosts/bare-health#01-2      	   10000	     25000 ns/op	     40000 req/s
BenchmarkCosts/bare-keys#01-2        	   10000	     30769 ns/op	     32500 req/s
BenchmarkFlood/quiet-2               	   10000	    100000 ns/op	     10000 req/s
BenchmarkFlood/flooded-2             	   10000	    100000 ns/op	     99000 lines/s	      9700 req/s
BenchmarkFlood/quiet#01-2            	   10000	    100000 ns/op	     10000 req/s
BenchmarkFlood/flooded#01-2          	   10000	    100000 ns/op	    101000 lines/s	      9300 req/s
BenchmarkClusterPropagation-2        	       1	30000000000 ns/op	      1100 budget-ms	       640.0 p50-ms	         0.9000 p90/budget	       990.0 p90-ms
BenchmarkClusterJoin-2               	       1	5000000000 ns/op	      4800 ms/join
BenchmarkCronLateness-2              	       1	64000000000 ns/op	         1.968 p50-ms	         3.029 p99-ms	        60.00 ticks
BenchmarkClusterReconcile/idle-2     	   10000	    100000 ns/op	     10000 req/s
BenchmarkClusterReconcile/reconciling-2	       3	   1000000 ns/op	       900.0 ms/reconcile	      9600 req/s
BenchmarkClusterReconcile/reconciling#01-2	       3	   1000000 ns/op	       900.0 ms/reconcile	      9000 req/s
BenchmarkClusterReconcile/idle#01-2  	   10000	    100000 ns/op	     10000 req/s
BenchmarkIdleRSS/runtime-2           	1000000000	         0.14 ns/op	        70.0 MiB
BenchmarkIdleRSS/caddy-2             	1000000000	         0.15 ns/op	        52.0 MiB
BenchmarkIdleRSS/runtime#01-2        	1000000000	         0.14 ns/op	        58.0 MiB
BenchmarkIdleRSS/caddy#01-2          	1000000000	         0.15 ns/op	        40.0 MiB
BenchmarkIdleRSS/runtime#02-2        	1000000000	         0.14 ns/op	        60.0 MiB
BenchmarkIdleRSS/caddy#02-2          	1000000000	         0.15 ns/op	        58.0 MiB
BenchmarkWasm/tiny-first-2           	      20	   4353812 ns/op	         4.352 ms/first
BenchmarkWasm/go-first-2             	       3	5119593342 ns/op	      5120 ms/first
BenchmarkWasm/tiny-warm-2            	    1000	    250000 ns/op	         0.192 p50-ms
BenchmarkWasm/go-warm-2              	     100	  10634812 ns/op	         5.140 p50-ms
BenchmarkWasm/go-throughput-2        	     100	   5000000 ns/op	       200.0 req/s
BenchmarkWasm/process-throughput-2   	    1000	    500000 ns/op	      2000 req/s
BenchmarkWasmRestart-2               	       3	 100000000 ns/op	        40.0 ms/first
BenchmarkWasmIdleRSS/installed-2     	1000000000	         0.14 ns/op	        80.0 MiB
BenchmarkWasmIdleRSS/caddy-2         	1000000000	         0.14 ns/op	        60.0 MiB
BenchmarkWasmIdleRSS/served-2        	1000000000	         0.14 ns/op	       100.0 MiB
BenchmarkWasmIdleRSS/caddy-again-2   	1000000000	         0.14 ns/op	        60.0 MiB
PASS
ok  	github.com/caddy-runtime/runtime/bench	4.501s
`

// TestReport checks grouping of rounds, paired ratios and verdicts.
func TestReport(t *testing.T) {
	res, err := parse(strings.NewReader(output))
	if err != nil {
		t.Fatal(err)
	}
	if res.cpu != "AMD EPYC" || res.procs != "2" || len(res.raw) != 114 || len(res.order) != 74 {
		t.Errorf("cpu %q, procs %q, %d raw lines, benchmarks %v", res.cpu, res.procs, len(res.raw), res.order)
	}
	if got := median(res.runs["BenchmarkAPI/public-health"], "req/s"); got != 27000 {
		t.Errorf("public median req/s = %v, want 27000", got)
	}
	var b strings.Builder
	write(&b, res, facts{nproc: "2"}, "3s")
	for _, want := range []string{
		// per-round ratios 0.868, 0.606, 0.9: the median passes although one round does not
		"| authenticated / public throughput | 0.868 | ≥ 0.80 | **PASS** |",
		// per-round ratios 0.9, 0.6, 0.889
		"| cookie session / public throughput | 0.889 | ≥ 0.80 | **PASS** |",
		// per-round ratios 0.98 and 0.9 (the order alternates)
		"| authenticated request, `sync` / `local` key store throughput | 0.940 | ≥ 0.95 | **FAIL** |",
		"| a worker's database read through the runtime / straight to `sqld` time | 1.500 | — | measured |",
		"| a worker's database write through the runtime / on a local SQLite file time | 0.400 | — | measured |",
		// per-round ratios 1.333 and 2.1: median 1.717
		"| worker upload of 10 MB over HTTP / `tar -xzf` time | 1.717 | ≤ 1.30 | **FAIL** |",
		// per-round ratios 1 and 1.1
		"| worker upload of 50 MB over HTTP / `tar -xzf` time | 1.050 | ≤ 1.30 | **PASS** |",
		"| listing 1 000 workers × 3 versions (ms) | 8.500 | ≤ 20.00 | **PASS** |",
		// per-round ratios 0.9 and 1.2
		"| `runtime deploy` of a 10 MB folder / `tar -czf` + `curl` upload time | 1.050 | ≤ 1.50 | **PASS** |",
		"| static worker / `file_server` throughput | 0.952 | ≥ 0.90 | **PASS** |",
		"| process worker / `reverse_proxy` throughput | 0.800 | ≥ 0.90 | **FAIL** |",
		"| pinned version (`/site@^1.0.0/`) / unpinned static worker throughput | 0.980 | ≥ 0.95 | **PASS** |",
		"| `injectBase` page / plain static file throughput | 0.900 | ≥ 0.95 | **FAIL** |",
		"| static worker at its own host / at its path throughput | 0.970 | ≥ 0.95 | **PASS** |",
		"| TLS permission check over 10 000 names (µs) | 2.400 | ≤ 50.00 | **PASS** |",
		// per-round ratios 0.95 and 0.8
		"| a worker with a traffic split / without one throughput | 0.970 | ≥ 0.95 | **PASS** |",
		"| 64 connections over 50 workers / over one worker throughput | 0.875 | ≥ 0.90 | **FAIL** |",
		"| process worker cold start to first byte, p50 (ms) | 11.000 | — | measured |",
		"| bare start of the same program to first byte, p50 (ms) | 4.000 | — | measured |",
		"| cold start p50 / (2 × bare start p50 + 5 ms) | 0.846 | ≤ 1.00 | **PASS** |",
		"| cold start p90 / (3 × bare start p90) | 1.111 | ≤ 1.00 | **FAIL** |",
		"| process worker cold start with `listen: port`, p50 (ms) | 15.000 | — | measured |",
		"| process worker on its socket (`listen: socket`) / `reverse_proxy` throughput | 1.250 | ≥ 1.20 | **PASS** |",
		"| JavaScript worker (TypeScript on Bun) cold start to first byte, p50 (ms) | 18.000 | — | measured |",
		"| bare `bun run` of the same file to first byte, p50 (ms) | 10.000 | — | measured |",
		"| JavaScript worker cold start p50 − bare `bun run` p50 (ms) | 8.000 | ≤ 5.00 | **FAIL** |",
		"| JavaScript worker cold start with `listen: socket`, p50 (ms) | 25.000 | — | measured |",
		// per-round ratios 1 and 1.1
		"| JavaScript worker (Bun) / `Bun.serve` behind `reverse_proxy` throughput | 1.050 | ≥ 1.00 | **PASS** |",
		// per-round ratios 0.8 and 0.9
		"| JavaScript worker on its socket (`listen: socket`) / `Bun.serve` behind `reverse_proxy` throughput | 0.850 | — | measured |",
		// per-round differences 3 and 1
		"| idle RSS after 20 JavaScript workers served and stopped at their `ttl` − before (MiB) | 2.000 | ≤ 5.00 | **PASS** |",
		"| plugin reload with 50 plugins (ms) | 30.000 | ≤ 100.00 | **PASS** |",
		"| 5 pass-through hooks / no hooks throughput | 0.950 | ≥ 0.90 | **PASS** |",
		"| ListWorkers | 1 | 8500000 | 8.5 ms/list |",
		// per-round ratios 0.6 and 0.5
		"| `GET /api/workers` with 20 workers / health throughput | 0.550 | ≥ 0.50 | **PASS** |",
		// per-round ratios 0.45 and 0.533, each against the health of its own process
		"| `GET /api/workers` with 1 000 workers / health throughput | 0.492 | ≥ 0.50 | **FAIL** |",
		// per-round ratios 0.65 and 0.5
		"| `GET /api/keys` with 100 keys / health throughput | 0.575 | ≥ 0.60 | **FAIL** |",
		// per-round ratios 0.8 and 0.8
		"| `GET /api/keys` with 100 keys, without gzip / health throughput | 0.800 | ≥ 0.80 | **PASS** |",
		// per-round ratios 0.6 and 0.467, each against the health of its own process
		"| `GET /api/workers?limit=100` with 1 000 workers, without gzip / health throughput | 0.533 | ≥ 0.50 | **PASS** |",
		// per-round ratios 0.952 and 1
		"| health / Caddy `respond` throughput | 0.976 | ≥ 0.95 | **PASS** |",
		// per-round ratios 0.8 and 0.8125
		"| a bare `net/http` server, an answer of the keys listing's size / of health's size throughput | 0.806 | — | measured |",
		// per-round ratios 0.97 and 0.93
		"| process worker beside a flooding worker / alone throughput | 0.950 | ≥ 0.95 | **PASS** |",
		"| flooding worker's lines taken in (lines/s) | 100000.000 | — | measured |",
		"| upload's answer → served by all 3 instances, p50 (ms) | 640.000 | — | measured |",
		"| upload's answer → served by all 3 instances, p90 (ms) | 990.000 | — | measured |",
		"| p90 of upload → all serving / (pull interval + local install time) | 0.900 | ≤ 1.00 | **PASS** |",
		"| fresh instance converging on 200 workers, start to ready (ms) | 4800.000 | — | measured |",
		// per-round ratios 0.96 and 0.9
		"| serving during a reconcile / idle throughput | 0.930 | ≥ 0.95 | **FAIL** |",
		"| idle RSS of the runtime (MiB) | 60.000 | — | measured |",
		"| idle RSS of plain Caddy (MiB) | 52.000 | — | measured |",
		// per-round differences 18, 18 and 2: the median difference, not the medians' (8)
		"| idle RSS runtime − plain Caddy (MiB) | 18.000 | ≤ 10.00 | **FAIL** |",
		"| WebAssembly tiny module, warm request p50 (ms) | 0.192 | ≤ 1.00 | **PASS** |",
		"| WebAssembly Go hello-world, warm request p50 (ms) | 5.140 | ≤ 10.00 | **PASS** |",
		"| WebAssembly Go hello-world, first request after upload (ms) | 5120.000 | — | measured |",
		"| WebAssembly Go hello-world, first request after a restart (ms) | 40.000 | ≤ 50.00 | **PASS** |",
		"| WebAssembly Go hello-world / the same program as a process worker throughput | 0.100 | — | measured |",
		"| idle RSS with 1 000 tiny WebAssembly workers installed − plain Caddy (MiB) | 20.000 | ≤ 30.00 | **PASS** |",
		"| idle RSS with 1 000 tiny WebAssembly workers, each requested once − plain Caddy (MiB) | 40.000 | — | measured |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

// TestParseRefusesFailures checks that a failed or incomplete run gives no report.
func TestParseRefusesFailures(t *testing.T) {
	for name, in := range map[string]string{
		"failure":    output + "--- FAIL: BenchmarkAPI/auth-session\nFAIL\n",
		"no auth":    strings.ReplaceAll(output, "auth-session", "other"),
		"no cookie":  strings.ReplaceAll(output, "cookie-session", "other"),
		"no listing": strings.ReplaceAll(output, "BenchmarkListWorkers", "BenchmarkOther"),
		"no respond": strings.ReplaceAll(output, "Costs/respond", "Costs/other"),
		"no rss":     strings.ReplaceAll(output, "IdleRSS/caddy", "IdleRSS/other"),
		"no sync":    strings.ReplaceAll(output, "KeyStore/sync-auth", "KeyStore/other"),
		"no cluster": strings.ReplaceAll(output, "ClusterReconcile/reconciling", "ClusterReconcile/other"),
		"no wasm":    strings.ReplaceAll(output, "WasmRestart", "Other"),
		"no js":      strings.ReplaceAll(output, "JSServing/reverse-proxy", "JSServing/other"),
		"no output":  "",
	} {
		if _, err := parse(strings.NewReader(in)); err == nil {
			t.Errorf("%s: parse succeeded", name)
		}
	}
}

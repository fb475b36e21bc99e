// Command report turns `go test -bench` output of the bench package into bench/RESULTS.md:
// machine facts, the medians of every benchmark over its rounds, and a verdict on each product
// target (see checks).
//
// It reads the benchmark output on stdin and echoes it to stderr as it arrives, so make bench
// shows progress:
//
//	go test -run '^$' -bench . -benchtime=3s -count=1 ./bench/ -rounds=7 2>&1 | report -benchtime 3s -o bench/RESULTS.md
//
// It exits non-zero, writing nothing, when the output reports a failure or lacks a benchmark a
// check needs.
package main

import (
	"bufio"
	"bytes"
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

// check is one product target. A ratio check pairs the i-th round of two benchmarks (they
// alternate) and judges the median of the per-round ratios, a difference check the median of
// the per-round differences; a ceiling check judges the median of one metric.
type check struct {
	title  string
	a, b   string // benchmarks; b is empty for a ceiling
	metric string // the metric compared, e.g. "req/s", "ns/op", "ms/list"
	target float64
	atMost bool // the value must not exceed the target (else: must reach it)
	diff   bool // a's metric minus b's, instead of a's over b's
	info   bool // measured only: no target
	what   string
}

var checks = []check{
	{
		title: "authenticated / public throughput", a: "BenchmarkAPI/auth-session", b: "BenchmarkAPI/public-health",
		metric: "req/s", target: 0.80,
		what: "`GET /api/admin/session` with a `viewer` key in `X-API-Key` against `GET /api/health`, on one real " +
			"runtime process (`bin/runtime` started by `integration/harness`, HTTP/1.1 on 127.0.0.1), from `b.RunParallel` " +
			"goroutines over keep-alive connections; the access log goes to a file.",
	},
	{
		title: "cookie session / public throughput", a: "BenchmarkAPI/cookie-session", b: "BenchmarkAPI/public-health",
		metric: "req/s", target: 0.80,
		what: "`GET /api/admin/session` with a `viewer` key's cpanel session cookie (an opaque token looked up in the " +
			"key store, through its cache) against `GET /api/health`, on the same process and in the same rounds as the row above.",
	},
	{
		title: "authenticated request, `sync` / `local` key store throughput", a: "BenchmarkKeyStore/sync-auth", b: "BenchmarkKeyStore/local-auth",
		metric: "req/s", target: 0.95,
		what: "`GET /api/admin/session` with a `viewer` key on a runtime whose key store is a replica of a libSQL primary " +
			"(`key_store sync`, `sqld` 0.24.32 on the same machine) against the same request on a runtime with a local key store, " +
			"in alternating order round by round: credentials are checked against the replica, never over the network.",
	},
	{
		title: "a worker's database write through the runtime / straight to `sqld` time", a: "BenchmarkDatabase/runtime-write", b: "BenchmarkDatabase/sqld-write",
		metric: "ns/op", info: true,
		what: "one `INSERT OR REPLACE` of a row, a Hrana-over-HTTP pipeline (`POST /v2/pipeline`) over keep-alive HTTP, to a worker's " +
			"database in sync mode (`database: true`: a namespace on `sqld` 0.24.32 with `--enable-namespaces`, on the same machine) " +
			"through the endpoint the runtime made for the worker's process (its token; the runtime picks the namespace and sends the " +
			"primary's token), against the same pipeline straight to `sqld` (the namespace by its host, the primary's token).",
	},
	{
		title: "a worker's database read through the runtime / straight to `sqld` time", a: "BenchmarkDatabase/runtime-read", b: "BenchmarkDatabase/sqld-read",
		metric: "ns/op", info: true,
		what: "the same with one `SELECT` of a row by its primary key.",
	},
	{
		title: "a worker's database write through the runtime / on a local SQLite file time", a: "BenchmarkDatabase/runtime-write", b: "BenchmarkDatabase/local-file-write",
		metric: "ns/op", info: true,
		what: "the write of the rows above through the runtime's endpoint against the same statement on a local SQLite file " +
			"through libSQL's Go driver (what a worker does itself in local mode, where nothing of the runtime stands between): " +
			"each local write commits and syncs the file.",
	},
	{
		title: "a worker's database read through the runtime / on a local SQLite file time", a: "BenchmarkDatabase/runtime-read", b: "BenchmarkDatabase/local-file-read",
		metric: "ns/op", info: true,
		what: "the same with the read.",
	},
	{
		title: "worker upload of 10 MB over HTTP / `tar -xzf` time", a: "BenchmarkUpload/10MB-runtime", b: "BenchmarkUpload/10MB-tar-xzf",
		metric: "ns/op", target: 1.3, atMost: true,
		what: "a `.tgz` of 2 000 files of incompressible content, about 10 MB, POSTed as `multipart/form-data` to " +
			"`/api/workers/upload` of one runtime process, timed as its client sees it, from the first byte sent until the " +
			"answer is read (streamed unpacking, SHA-256, every limit and check, the atomic swap, the audit record), each " +
			"replacing the version the one before installed, against `tar -xzf` of the same file run as a process into a " +
			"fresh folder on the same disk, from its start until it exits. Nothing is deleted while the benchmark runs (the " +
			"replaced trees wait for the retire delay, an hour): on ext4 without a journal, inodes freed in the last minute " +
			"are skipped, one inode block read each, when a file is created, which made the old benchmark's `tar` 20 times " +
			"slower than by hand. Before each timed iteration the disk is synced (untimed).",
	},
	{
		title: "worker upload of 50 MB over HTTP / `tar -xzf` time", a: "BenchmarkUpload/50MB-runtime", b: "BenchmarkUpload/50MB-tar-xzf",
		metric: "ns/op", target: 1.3, atMost: true,
		what: "the same with 2 000 files of about 25 KB, a `.tgz` of about 50 MB.",
	},
	{
		title: "`runtime deploy` of a 10 MB folder / `tar -czf` + `curl` upload time", a: "BenchmarkDeploy/cli", b: "BenchmarkDeploy/tar-curl",
		metric: "ns/op", target: 1.5, atMost: true,
		what: "`runtime deploy DIR` (the command-line client in `bin/runtime`: reading the manifest, packing the folder " +
			"of 2 000 files of incompressible content, about 10 MB, as `.tgz`, the upload and the install) against " +
			"`tar -czf` of the same folder followed by a bare `curl -F file=@…` upload of the result, against one " +
			"runtime, each installing the same version again.",
	},
	{
		title: "static worker / `file_server` throughput", a: "BenchmarkServing/static-worker", b: "BenchmarkServing/file-server",
		metric: "req/s", target: 0.9,
		what: "`GET /site/`, a static worker's index file, against `file_server` on the same file " +
			"(`handle_path /fs/*` in front of the runtime), on one runtime process.",
	},
	{
		title: "process worker / `reverse_proxy` throughput", a: "BenchmarkServing/process-worker", b: "BenchmarkServing/reverse-proxy",
		metric: "req/s", target: 0.9,
		what: "a request through the runtime's process pool to the test worker against `reverse_proxy` straight to " +
			"another instance of the same program (`handle_path /rp/*`), on one runtime process; the worker runs in its sandbox " +
			"with `worker_cpu` set to the machine's cores, as the backend has them, and the backend runs in a session of its own, " +
			"as each worker does (the kernel schedules a session as one group).",
	},
	{
		title: "process worker on its socket (`listen: socket`) / `reverse_proxy` throughput", a: "BenchmarkServing/socket-worker", b: "BenchmarkServing/reverse-proxy",
		metric: "req/s", target: 1.2,
		what: "the row above with the worker handed its listener as descriptor 3: the runtime proxies to it over the unix " +
			"socket, not loopback TCP (the rows' requests go the direct proxy's way either way: over connections kept per worker, " +
			"written and read on the request's goroutine); `reverse_proxy` still goes to the other " +
			"instance of the program over TCP.",
	},
	{
		title: "pinned version (`/site@^1.0.0/`) / unpinned static worker throughput", a: "BenchmarkServing/pinned-worker", b: "BenchmarkServing/static-worker",
		metric: "req/s", target: 0.95,
		what: "the static worker's index file through a semver-range pin against the same file unpinned, on the process of " +
			"the `file_server` row: the pin's range is parsed once, not per request.",
	},
	{
		title: "`injectBase` page / plain static file throughput", a: "BenchmarkServing/inject-base", b: "BenchmarkServing/static-worker",
		metric: "req/s", target: 0.95,
		what: "a single-page app's entrypoint with `injectBase: true` (a `<base href>` inserted after `<head>`) against the " +
			"same page from a worker without it, on the same process: the rewritten page is kept per version and base.",
	},
	{
		title: "a worker with a traffic split / without one throughput", a: "BenchmarkSplit/split", b: "BenchmarkSplit/no-split",
		metric: "req/s", target: 0.95,
		what: "a static worker's page whose unpinned requests a split shares between two versions (90/10) against an " +
			"identical worker without a split, on one runtime process, from 100 visitors in turn, each sending its " +
			"`runtime_visitor` cookie: the split is read without a lock and the visitor's bucket hashed without allocating.",
	},
	{
		title: "a split worker, requests without a cookie / with one throughput", a: "BenchmarkSplit/split-no-cookie", b: "BenchmarkSplit/split",
		metric: "req/s", info: true,
		what: "the split worker of the row above, requests without a visitor cookie (each gets a new random id and a " +
			"`Set-Cookie`) against requests with one.",
	},
	{
		title: "static worker at its own host / at its path throughput", a: "BenchmarkHosts/by-host", b: "BenchmarkHosts/by-path",
		metric: "req/s", target: 0.95,
		what: "a static worker's index file at the worker's host under `workers_domain` (`Host: site.apps.localhost`) " +
			"against the same file at its path (`/site/`), on one runtime process: routing by host is a map lookup of the " +
			"host's labels, with the version chosen as for the path.",
	},
	{
		title: "TLS permission check over 10 000 names (µs)", a: "BenchmarkHostPermission", metric: "µs/check", target: 50, atMost: true,
		what: "the answer of `tls.permission.runtime` (`serving.HostServed`, which the module calls) over 5 000 workers and " +
			"5 000 verified custom domains, asked in turn for a worker's host, a scoped worker's host, a custom domain and two " +
			"names it refuses, in one goroutine: from memory (the host router and the worker catalog's snapshot), never the key store.",
	},
	{
		title: "64 connections over 50 workers / over one worker throughput", a: "BenchmarkManyWorkers/fifty-workers", b: "BenchmarkManyWorkers/one-worker",
		metric: "req/s", target: 0.9,
		what: "64 keep-alive connections each sending requests to 50 static workers in turn against the same connections " +
			"all sending to one of them, on one runtime process: finding a worker's version takes no lock.",
	},
	{
		title: "process worker cold start to first byte, p50 (ms)", a: "BenchmarkColdStart", metric: "p50-ms", info: true,
		what: "the first request to a process worker whose process is not running (`listen: socket`: it is handed its " +
			"listener as descriptor 3), with every sandbox layer the machine has on (the benchmark runs as root: cgroups, " +
			"Landlock, seccomp, a scratch tmpfs, and `worker_network isolated`; not `worker_user`): start, proxying, until " +
			"the answer's first byte; the worker has `ttl: 0`, so each request starts its process, and the benchmark waits, untimed, " +
			"until the last one has exited, then 250 ms more (before the bare starts too), so that no start shares the CPU with the " +
			"spare launcher the sandbox readies after the one before.",
	},
	{
		title: "process worker cold start to first byte, p90 (ms)", a: "BenchmarkColdStart", metric: "p90-ms", info: true,
		what: "the 90th percentile of the same starts.",
	},
	{
		title: "bare start of the same program to first byte, p50 (ms)", a: "BenchmarkColdStart", metric: "bare-p50-ms", info: true,
		what: "the test worker started by the benchmark itself on a free port, unconfined, timed from its start until the " +
			"first byte of the same request, dialled again every 100 µs until it listens; alternating with the starts above.",
	},
	{
		title: "bare start of the same program to first byte, p90 (ms)", a: "BenchmarkColdStart", metric: "bare-p90-ms", info: true,
		what: "the 90th percentile of the same bare starts.",
	},
	{
		title: "cold start p50 / (2 × bare start p50 + 5 ms)", a: "BenchmarkColdStart", metric: "p50/budget", target: 1, atMost: true,
		what: "the median cold start against its budget: twice the median bare start plus 5 ms.",
	},
	{
		title: "cold start p90 / (3 × bare start p90)", a: "BenchmarkColdStart", metric: "p90/budget", target: 1, atMost: true,
		what: "the 90th percentile of the cold starts against three times that of the bare starts.",
	},
	{
		title: "process worker cold start with `listen: port`, p50 (ms)", a: "BenchmarkColdStart", metric: "port-p50-ms", info: true,
		what: "the same program as a worker that listens on `$PORT`, which the runtime polls (after 0.5 ms, then half as " +
			"long again each time), on a runtime with `worker_network host`, alternating with the starts above.",
	},
	{
		title: "JavaScript worker (TypeScript on Bun) cold start to first byte, p50 (ms)", a: "BenchmarkJSColdStart", metric: "p50-ms", info: true,
		what: "the first request to a TypeScript hello-world on Bun 1.4 (`js_runtime` the binary; the runtime's loader imports the " +
			"module and serves its `fetch` with `Bun.serve` on `PORT`) with the default settings but `ttl: 0`, so that each request starts " +
			"its process and none is left from the version's activation check; the benchmark sees that no process of the worker runs " +
			"before each timed request. Every sandbox layer the machine has is on (as root: cgroups, Landlock, seccomp, a scratch tmpfs; " +
			"`worker_network host`), from the request until the answer's first byte. Each start (the bare ones too) begins 250 ms " +
			"after the one before ended, so that none shares the CPU with the spare launcher the sandbox readies after a start.",
	},
	{
		title: "JavaScript worker cold start to first byte, p90 (ms)", a: "BenchmarkJSColdStart", metric: "p90-ms", info: true,
		what: "the 90th percentile of the same starts.",
	},
	{
		title: "bare `bun run` of the same file to first byte, p50 (ms)", a: "BenchmarkJSColdStart", metric: "bare-p50-ms", info: true,
		what: "`bun run index.ts` of the same file (Bun serves a default export with `fetch` by itself, on `PORT`) started by the " +
			"benchmark, unconfined, timed from its start until the first byte of the same request, dialled again every 100 µs until " +
			"it listens; alternating with the starts above, request by request.",
	},
	{
		title: "JavaScript worker cold start p50 − bare `bun run` p50 (ms)", a: "BenchmarkJSColdStart", metric: "p50-over-bare-ms", target: 5, atMost: true,
		what: "the median cold start against its budget: the median bare start plus 5 ms.",
	},
	{
		title: "JavaScript worker cold start with `listen: socket`, p50 (ms)", a: "BenchmarkJSColdStart", metric: "socket-p50-ms", info: true,
		what: "the same worker handed its listener as descriptor 3 (`Bun.serve` cannot accept on it: the loader serves on the " +
			"worker's loopback and a forwarder of Bun's own sockets, `Bun.listen` on descriptor 3, passes each connection on), alternating with the starts above.",
	},
	{
		title: "JavaScript worker (Bun) / `Bun.serve` behind `reverse_proxy` throughput", a: "BenchmarkJSServing/js-worker", b: "BenchmarkJSServing/reverse-proxy",
		metric: "req/s", target: 1.0,
		what: "the TypeScript hello-world on Bun as a worker with the default settings (on `PORT`, `worker_network host`) against " +
			"`reverse_proxy` (`handle_path /rp/*` on the same runtime process) to a bare `bun run` of the same file in a session of its own, " +
			"as each worker runs; the worker may use the machine's cores (`worker_cpu`), as the bare Bun does.",
	},
	{
		title: "JavaScript worker on its socket (`listen: socket`) / `Bun.serve` behind `reverse_proxy` throughput", a: "BenchmarkJSServing/js-socket-worker",
		b: "BenchmarkJSServing/reverse-proxy", metric: "req/s", info: true,
		what: "the row above with the worker handed its listener as descriptor 3: the runtime proxies over the unix socket to the " +
			"loader's forwarder (`Bun.listen` on descriptor 3), which passes each connection on to `Bun.serve` on the worker's loopback, one hop more.",
	},
	{
		title: "idle RSS after 20 JavaScript workers served and stopped at their `ttl` − before (MiB)", a: "BenchmarkJSIdleRSS/after-ttl",
		b: "BenchmarkJSIdleRSS/idle", metric: "MiB", target: 5, atMost: true, diff: true,
		what: "`VmRSS` of one runtime process (read as the idle RSS rows below) with 20 TypeScript workers on Bun installed " +
			"(`ttl: 2s`, `pool_size 20`), after each answered one request and all their processes stopped at their `ttl`, minus the " +
			"same process's before any of them ran: the target is + 0, taken as within 5 MiB, a Go heap's growth between two " +
			"collections at this size.",
	},
	{
		title: "plugin reload with 50 plugins (ms)", a: "BenchmarkPluginReload", metric: "ms/reload", target: 100, atMost: true,
		what: "`POST /api/plugins/reload` with 50 plugins (routes under their own base, a dependency chain, every fifth " +
			"with a hook), timed from the client: rescan, plan, provisioning the new table in a child Caddy context, the swap.",
	},
	{
		title: "5 pass-through hooks / no hooks throughput", a: "BenchmarkHooks/five-hooks", b: "BenchmarkHooks/no-hooks",
		metric: "req/s", target: 0.90,
		what: "a static worker's page on a runtime with five `onRequest` hooks that pass the request on (a `vars` " +
			"handler each) against an identical runtime without plugins; a throughput ratio ≥ 0.90 is an overhead under 10%.",
	},
	{
		title: "listing 1 000 workers × 3 versions (ms)", a: "BenchmarkListWorkers", metric: "ms/list", target: 20, atMost: true,
		what: "`GET /api/workers` through the real handler (routing, auth, the listing, JSON) with the caches warm: the " +
			"listing and its encoding are kept while the watched folders do not change.",
	},
	{
		title: "`GET /api/workers` with 20 workers / health throughput", a: "BenchmarkCosts/workers-20", b: "BenchmarkCosts/health",
		metric: "req/s", target: 0.5,
		what: "`GET /api/workers` with an `admin` key on a runtime with 20 static workers against `GET /api/health` on the " +
			"same process, in the same rounds as the other `Costs` rows.",
	},
	{
		title: "`GET /api/workers` with 1 000 workers / health throughput", a: "BenchmarkCosts/workers-1000", b: "BenchmarkCosts/health-1000",
		metric: "req/s", target: 0.5,
		what: "`GET /api/workers` with an `admin` key on a second runtime process with 1 000 static workers against " +
			"`GET /api/health` on that process. The listing is asked for in gzip (`Accept-Encoding: gzip`), as browsers and " +
			"Go's default client ask: it (about 200 KB of JSON) goes out in the gzip form kept with it; health is too small to compress.",
	},
	{
		title: "`GET /api/workers?limit=100` with 1 000 workers, without gzip / health throughput", a: "BenchmarkCosts/workers-1000-page-identity",
		b: "BenchmarkCosts/health-1000", metric: "req/s", target: 0.5,
		what: "the 1 000-worker listing above walked in pages of 100 (about 19 KB of JSON each, the next page's cursor in " +
			"`X-Next-Cursor`): each client sends the ten page requests in turn, with an `admin` key and no `Accept-Encoding` " +
			"(as curl and most scripts send), against `GET /api/health` on that process. Pages are kept, in both encodings, " +
			"while the listing does not change.",
	},
	{
		title: "`GET /api/keys` with 100 keys / health throughput", a: "BenchmarkCosts/keys-100", b: "BenchmarkCosts/health",
		metric: "req/s", target: 0.6,
		what: "`GET /api/keys` with an `admin` key, listing 100 keys (that one included), asked for in gzip, against " +
			"`GET /api/health` on the 20-worker runtime.",
	},
	{
		title: "`GET /api/keys` with 100 keys, without gzip / health throughput", a: "BenchmarkCosts/keys-100-identity", b: "BenchmarkCosts/health",
		metric: "req/s", target: 0.8,
		what: "the same listing (about 17 KB of JSON) with no `Accept-Encoding`, as curl and most scripts ask: the identity " +
			"body is kept per generation of the key store, as the gzip one is, and written with the connection corked " +
			"(Linux), so that the header and the body reach the client together.",
	},
	{
		title: "`GET /api/keys?limit=1` with 100 keys, without gzip / health throughput", a: "BenchmarkCosts/keys-1-identity",
		b: "BenchmarkCosts/health", metric: "req/s", info: true,
		what: "the listing of the row above without its bytes: its first page of one key (about 200 bytes of JSON), the " +
			"same request, key check, kept listing and answer headers (`Cache-Control: no-store`, `Vary`, `X-Content-Type-Options`, " +
			"`X-Next-Cursor`), against `GET /api/health` in the same rounds. What it loses is the authenticated listing's own " +
			"cost; the row above pays that and the bytes' cost of the row below together.",
	},
	{
		title: "a bare `net/http` server, an answer of the keys listing's size / of health's size throughput", a: "BenchmarkCosts/bare-keys",
		b: "BenchmarkCosts/bare-health", metric: "req/s", info: true,
		what: "the floor of the row above on this machine: a Go `net/http` server outside the runtime (the test worker's " +
			"`/bytes`, no routing, authentication, logging or headers beyond `Content-Type`; started in the client's session, as " +
			"the runtime is) answering as many bytes as the keys listing without gzip, against as many as the health probe, to " +
			"the same client in the same rounds. On two " +
			"cores the client, the server and the kernel's loopback share the CPU, so the bytes themselves cost this much " +
			"throughput whatever serves them.",
	},
	{
		title: "health / Caddy `respond` throughput", a: "BenchmarkCosts/health", b: "BenchmarkCosts/respond",
		metric: "req/s", target: 0.95,
		what: "`GET /api/health` against a Caddy `respond` route (`handle /respond` in the same site) serving the same " +
			"bytes: the body, its `Content-Type` and an `X-Request-Id` made from Caddy's `{http.request.uuid}` (which " +
			"the runtime puts on every answer), on the 20-worker runtime.",
	},
	{
		title: "process worker beside a flooding worker / alone throughput", a: "BenchmarkFlood/flooded", b: "BenchmarkFlood/quiet",
		metric: "req/s", target: 0.95,
		what: "a process worker's requests while a second process worker writes 100 000 lines a second to stdout (each " +
			"line read, kept in its log ring and offered to Caddy's rate-limited log) against the same requests with the " +
			"second worker disabled, on one runtime process; ≥ 0.95 is a cost under 5%.",
	},
	{
		title: "flooding worker's lines taken in (lines/s)", a: "BenchmarkFlood/flooded", metric: "lines/s", info: true,
		what: "the rate at which the runtime took in the flooding worker's lines during the row above, from the " +
			"sequence numbers of its log ring: the flood the row claims did happen.",
	},
	{
		title: "upload's answer → served by all 3 instances, p50 (ms)", a: "BenchmarkClusterPropagation", metric: "p50-ms", info: true,
		what: "a cluster of three runtimes (`key_store sync` on one `sqld`, `package_store s3` on one `versitygw` bucket, " +
			"all on this machine, pulling every second): 20 uploads of a small static worker to A, each after a random " +
			"part of the interval, timed from the upload's answer until B and C both list the worker (polled every 5 ms " +
			"as the root key, which makes no instance pull early), each then checked to serve it.",
	},
	{
		title: "upload's answer → served by all 3 instances, p90 (ms)", a: "BenchmarkClusterPropagation", metric: "p90-ms", info: true,
		what: "the 90th percentile of the same 20 delays.",
	},
	{
		title: "p90 of upload → all serving / (pull interval + local install time)", a: "BenchmarkClusterPropagation",
		metric: "p90/budget", target: 1, atMost: true,
		what: "the p90 above against the issue's budget: the pull interval (1 s) plus the local install time, taken as " +
			"the median time A took to answer an upload (validation, extraction and install, and also the archive's " +
			"put to the store and the row on the primary, so more than an install).",
	},
	{
		title: "fresh instance converging on 200 workers, start to ready (ms)", a: "BenchmarkClusterJoin", metric: "ms/join", info: true,
		what: "a runtime with empty folders joining a cluster whose desired state holds 200 small static workers, from " +
			"starting the process until its readiness probe answers 200, which it does once its first reconcile has " +
			"downloaded, verified and installed all of them (checked after each start); process start-up included.",
	},
	{
		title: "serving during a reconcile / idle throughput", a: "BenchmarkClusterReconcile/reconciling", b: "BenchmarkClusterReconcile/idle",
		metric: "req/s", target: 0.95,
		what: "a static worker's page on instance B of a cluster while B reconciles (downloads, verifies and installs " +
			"10 workers of 1 MB uploaded to A beforehand; B pulls hourly, so a request for the first of them starts it, " +
			"and the load runs until all ten trees are in B's worker folder, looked at on disk so that the benchmark's " +
			"own polling costs B nothing, and B lists them) against the same requests while B is idle, round by round; " +
			"the store and the primary run on this machine, so their share of the work counts too.",
	},
	{
		title: "cron tick lateness, `@every 1s`, p50 (ms)", a: "BenchmarkCronLateness", metric: "p50-ms", info: true,
		what: "one runtime process with nothing else to do and a process worker (the test worker) with an `@every 1s` cron " +
			"trigger, watched for a minute: from each tick's scheduled second (its run's `scheduledAt`) until the worker " +
			"received the request (its own clock, the same machine's), through the run's row in the key store, the data " +
			"plane and the proxy to the process; the first tick, which starts the process, is left out.",
	},
	{
		title: "cron tick lateness, `@every 1s`, p99 (ms)", a: "BenchmarkCronLateness", metric: "p99-ms", target: 50, atMost: true,
		what: "the 99th percentile of the same ticks' lateness.",
	},
	{
		title: "idle RSS of the runtime (MiB)", a: "BenchmarkIdleRSS/runtime", metric: "MiB", info: true,
		what: "`VmRSS` of a runtime process with the default settings and no workers, read a few seconds after it " +
			"answered its readiness probe and the OpenAPI document.",
	},
	{
		title: "idle RSS of plain Caddy (MiB)", a: "BenchmarkIdleRSS/caddy", metric: "MiB", info: true,
		what: "`VmRSS` of the same binary serving a Caddyfile without the runtime (one `respond` site), read the same " +
			"way, at the same time.",
	},
	{
		title: "idle RSS runtime − plain Caddy (MiB)", a: "BenchmarkIdleRSS/runtime", b: "BenchmarkIdleRSS/caddy",
		metric: "MiB", target: 10, atMost: true, diff: true,
		what: "the difference of the two rows above, the median of the per-round differences.",
	},
	{
		title: "WebAssembly tiny module, warm request p50 (ms)", a: "BenchmarkWasm/tiny-warm", metric: "p50-ms", target: 1, atMost: true,
		what: "the median time of `GET /tiny/`, from one keep-alive connection, to the whole answer: a module of a few hundred " +
			"bytes emitted by the benchmark (one `fd_write` of a CGI answer), run in a fresh instance for each request.",
	},
	{
		title: "WebAssembly Go hello-world, warm request p50 (ms)", a: "BenchmarkWasm/go-warm", metric: "p50-ms", target: 10, atMost: true,
		what: "the same for a Go program built with `GOOS=wasip1 GOARCH=wasm` (`internal/testkit/hello`, about 2 MB) printing a " +
			"CGI answer: each request instantiates it and runs Go's runtime start-up and `main`.",
	},
	{
		title: "WebAssembly tiny module, first request after upload (ms)", a: "BenchmarkWasm/tiny-first", metric: "ms/first", info: true,
		what: "the first request to a version just uploaded, to the whole answer: reading and checking the module, compiling it " +
			"(each round uploads a module the compilation cache has not seen: a custom section of random bytes), the run.",
	},
	{
		title: "WebAssembly Go hello-world, first request after upload (ms)", a: "BenchmarkWasm/go-first", metric: "ms/first", info: true,
		what: "the same for the Go hello-world: compiling a Go module with wazero's compiler dominates.",
	},
	{
		title: "WebAssembly Go hello-world, first request after a restart (ms)", a: "BenchmarkWasmRestart", metric: "ms/first", target: 50, atMost: true,
		what: "the first request to the Go hello-world after the runtime was stopped and started again, timed from when " +
			"`/health/ready` answers 200: the modules kept compiled at the stop (listed in `state_dir/wasm-recent.json`) are read " +
			"back from the compilation cache before the runtime reports ready (wazero's decoding and validation of a module, about " +
			"30 ms for this one, happen there), so the request only runs it in a fresh instance.",
	},
	{
		title: "WebAssembly Go hello-world / the same program as a process worker throughput", a: "BenchmarkWasm/go-throughput", b: "BenchmarkWasm/process-throughput",
		metric: "req/s", info: true,
		what: "warm requests from `b.RunParallel` goroutines over keep-alive connections to the Go hello-world as a WebAssembly " +
			"worker (a fresh instance each) against the same program built for the machine as a process worker (one HTTP server " +
			"in the pool, `worker_cpu` the machine's cores), on one runtime process.",
	},
	{
		title: "idle RSS with 1 000 tiny WebAssembly workers installed − plain Caddy (MiB)", a: "BenchmarkWasmIdleRSS/installed", b: "BenchmarkWasmIdleRSS/caddy",
		metric: "MiB", target: 30, atMost: true, diff: true,
		what: "`VmRSS` of a runtime with 1 000 tiny WebAssembly workers installed (each its own module) minus plain Caddy's, read " +
			"as the idle RSS rows above.",
	},
	{
		title: "idle RSS with 1 000 tiny WebAssembly workers, each requested once − plain Caddy (MiB)", a: "BenchmarkWasmIdleRSS/served", b: "BenchmarkWasmIdleRSS/caddy-again",
		metric: "MiB", info: true, diff: true,
		what: "the same after each worker answered one request, so each module was compiled and is kept (within " +
			"`wasm_compiled_memory`), with its version's folder handle and request series.",
	},
}

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
	runs  map[string][]sample // by benchmark name without suffixes, in round order
	order []string            // benchmark names in order of appearance
	raw   []string            // the result lines as printed
}

// sample holds one result line's metrics by unit.
type sample map[string]float64

var (
	procsSuffix = regexp.MustCompile(`-(\d+)$`)
	roundSuffix = regexp.MustCompile(`#\d+$`) // go test's suffix for later rounds of a sub-benchmark
)

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
		return nil, errors.New("the benchmark run failed; no report written")
	}
	for _, c := range checks {
		for _, name := range []string{c.a, c.b} {
			if name != "" && len(res.runs[name]) == 0 {
				return nil, fmt.Errorf("no results for %s", name)
			}
		}
	}
	return res, nil
}

// parseLine reads "Name  N  v1 unit1  v2 unit2 ...".
func parseLine(line string) (string, sample, bool) {
	f := strings.Fields(line)
	if len(f) < 4 || len(f)%2 != 0 {
		return "", nil, false
	}
	s := sample{}
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return "", nil, false
		}
		s[f[i+1]] = v
	}
	return f[0], s, true
}

// median returns the median of a metric over samples.
func median(samples []sample, metric string) float64 {
	vs := make([]float64, 0, len(samples))
	for _, s := range samples {
		vs = append(vs, s[metric])
	}
	slices.Sort(vs)
	if n := len(vs); n%2 == 1 {
		return vs[n/2]
	} else if n > 0 {
		return (vs[n/2-1] + vs[n/2]) / 2
	}
	return 0
}

// value computes a check's value: the median per-round ratio or difference, or the median.
func (c check) value(res *results) float64 {
	if c.b == "" {
		return median(res.runs[c.a], c.metric)
	}
	a, b := res.runs[c.a], res.runs[c.b]
	paired := make([]sample, min(len(a), len(b)))
	for i := range paired {
		v := a[i][c.metric] / b[i][c.metric]
		if c.diff {
			v = a[i][c.metric] - b[i][c.metric]
		}
		paired[i] = sample{"value": v}
	}
	return median(paired, "value")
}

func (c check) passes(v float64) bool {
	if c.atMost {
		return v <= c.target
	}
	return v >= c.target
}

// facts describe the machine the benchmarks ran on.
type facts struct{ nproc, cpu, goVersion, date string }

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
	p("# Benchmark results")
	p("")
	p("Generated by `make bench` (bench/cmd/report) from one run on one machine; do not edit by hand.")
	p("")
	p("| Target | Value | Target | Result |")
	p("|---|---:|---:|---|")
	for _, c := range checks {
		v := c.value(res)
		if c.info {
			p("| %s | %.3f | — | measured |", c.title, v)
			continue
		}
		verdict, op := "PASS", "≥"
		if !c.passes(v) {
			verdict = "FAIL"
		}
		if c.atMost {
			op = "≤"
		}
		p("| %s | %.3f | %s %.2f | **%s** |", c.title, v, op, c.target, verdict)
	}
	p("")
	p("## What is measured")
	p("")
	for _, c := range checks {
		p("- **%s**: %s", c.title, c.what)
	}
	p("")
	p("Compared benchmarks alternate round by round (`-rounds`, each round %s), so a slow spell of", benchtime)
	p("the shared machine falls on both, and their order changes from round to round, so neither")
	p("always runs first; a ratio is the median of the per-round ratios. The client")
	p("runs on the same machine as the server, so absolute figures are lower than a separate load")
	p("generator would see.")
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
	p("| Benchmark | Rounds | Median ns/op | Other medians |")
	p("|---|---:|---:|---|")
	for _, name := range res.order {
		s := res.runs[name]
		var other []string
		for unit := range s[0] {
			if unit != "ns/op" {
				other = append(other, fmt.Sprintf("%.1f %s", median(s, unit), unit))
			}
		}
		slices.Sort(other)
		p("| %s | %d | %.0f | %s |", strings.TrimPrefix(name, "Benchmark"), len(s), median(s, "ns/op"), strings.Join(other, ", "))
	}
	p("")
	p("## Reproduce")
	p("")
	p("```sh")
	p("make bench")
	p("```")
	p("")
	p("## Raw output")
	p("")
	p("```")
	for _, line := range res.raw {
		p("%s", line)
	}
	p("```")
}

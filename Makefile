# The runtime: a Caddy module that turns Caddy into a serverless runtime.
MODULE        := github.com/caddy-runtime/runtime
CADDY_VERSION := v2.11.9
VERSION       ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS       := -X $(MODULE)/version.value=$(VERSION)
BIN           := bin/runtime
UNIT_PKGS      = $(shell go list ./... | grep -v '/integration')

.PHONY: run build test vet unit fuzz integration xcaddy clean

## build: compile the runtime binary (Caddy + standard modules + the runtime) into bin/runtime
build:
	go build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/runtime

## run: start the runtime on :8080 with Caddyfile.example, data under ./data
run: build
	./$(BIN) run --config Caddyfile.example --adapter caddyfile

## test: everything CI runs
test: vet unit fuzz integration xcaddy

vet:
	go vet ./...
	@unformatted="$$(gofmt -l .)"; if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi

unit:
	go test -race $(UNIT_PKGS)

## fuzz: a short, fixed run of the archive extraction fuzzer over its committed seed corpus
FUZZTIME ?= 20s
fuzz:
	go test -run '^$$' -fuzz '^FuzzExtract$$' -fuzztime $(FUZZTIME) ./packages/

integration: build
	RUNTIME_BINARY=$(CURDIR)/$(BIN) RUNTIME_EXPECT_VERSION=$(VERSION) go test -count=1 ./integration/...

## xcaddy: build a stock Caddy with this checkout through xcaddy and check the module is in it
xcaddy:
	GOPRIVATE=$(MODULE) go tool xcaddy build $(CADDY_VERSION) --with $(MODULE)@v0.0.0=. --output bin/caddy
	./bin/caddy list-modules | grep -qx 'http.handlers.runtime'
	@echo "xcaddy build has http.handlers.runtime"

clean:
	rm -rf bin

## bench: benchmark the real binary (authenticated vs public request throughput) into bench/RESULTS.md
BENCHTIME   ?= 3s
BENCHROUNDS ?= 5
.PHONY: bench
bench: build
	go build -o bin/bench-report ./bench/cmd/report
	RUNTIME_BINARY=$(CURDIR)/$(BIN) go test -run '^$$' -bench . -benchtime=$(BENCHTIME) -count=1 ./bench/ -rounds=$(BENCHROUNDS) 2>&1 \
		| ./bin/bench-report -benchtime $(BENCHTIME) -o bench/RESULTS.md

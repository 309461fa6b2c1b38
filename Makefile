# agentbus — `make run` starts everything on embedded defaults, `make test`
# runs every test against real Postgres, Redis and NATS.

export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)
GO      ?= go
BIN     := bin/agentbus
NATSCLI := github.com/nats-io/natscli@v0.4.0

.PHONY: deps build run test bench tools clean

## deps: install the Postgres and Redis servers the stack and the tests need
deps:
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || command -v postgres >/dev/null 2>&1 || missing="$$missing postgresql"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "missing:$$missing — install them (sudo apt-get install$$missing) or set DATABASE_URL / REDIS_URL"; exit 1; \
	  fi; \
	fi
	@$(GO) version >/dev/null || { echo "Go 1.26 is needed: https://go.dev/dl/"; exit 1; }

## build: build the agentbus binary into bin/
build:
	$(GO) build -o $(BIN) ./cmd/agentbus

## run: start the whole stack in one process (embedded NATS, private Postgres and Redis)
run: deps build
	./$(BIN) up

## test: vet and run every test with the race detector
test: deps
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m ./...

## bench: run the Go benchmarks and print a table
bench: deps
	$(GO) test -run '^$$' -bench . -benchmem -count 1 -timeout 30m ./... | tee bench.out
	@echo; echo "benchmark table:"; grep -E '^(Benchmark|ok|pkg)' bench.out | column -t

## tools: build the nats CLI (natscli) into bin/
tools:
	@mkdir -p bin
	$(GO) mod download -json $(NATSCLI) >/dev/null
	cd $$($(GO) env GOMODCACHE)/github.com/nats-io/natscli@v0.4.0 && GOFLAGS=-mod=mod $(GO) build -o $(CURDIR)/bin/nats ./nats
	@echo "bin/nats built: bin/nats --server 127.0.0.1:4222 stream ls"

clean:
	rm -rf bin bench.out

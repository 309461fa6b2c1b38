# agentbus — `make run` starts everything on embedded defaults, `make test`
# runs every test against real Postgres, Redis and NATS.

export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)
GO      ?= go
BIN     := bin/agentbus
NATSCLI_VERSION := v0.4.0
NATSCLI := github.com/nats-io/natscli@$(NATSCLI_VERSION)
# The Claude Code CLI the claude engine drives (sidecar/engine/claude.Version),
# installed project-locally by `make claude` (and by `make deps` when the
# claude engine is chosen).
CLAUDE_CODE_VERSION := 2.1.330
TOOLS_NODE := $(CURDIR)/.tools/node
CLAUDE_BIN := $(TOOLS_NODE)/node_modules/.bin/claude

.PHONY: deps claude build run test fuzz bench tools clean

## deps: install the Postgres and Redis servers the stack and the tests need, curl and jq for the README walkthrough,
## headless Chromium for the /docs test,
## and the Claude Code CLI when the claude engine is chosen (AGENTBUS_ENGINE=claude)
deps:
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v curl >/dev/null 2>&1 || missing="$$missing curl"; \
	command -v jq >/dev/null 2>&1 || missing="$$missing jq"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
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
	@if [ "$$AGENTBUS_ENGINE" = claude ]; then $(MAKE) --no-print-directory claude; fi

## claude: install the pinned Claude Code CLI into .tools/node (the claude engine and its tests use it)
claude:
	@if [ "$$($(CLAUDE_BIN) --version 2>/dev/null | cut -d' ' -f1)" != "$(CLAUDE_CODE_VERSION)" ]; then \
	  mkdir -p $(TOOLS_NODE); \
	  if ! command -v npm >/dev/null 2>&1; then \
	    echo "npm is not installed" > $(CURDIR)/.tools/claude-install.log; \
	    echo "npm is missing: the Claude Code CLI is not installed and the claude engine's tests are skipped"; \
	  else \
	    echo "installing the Claude Code CLI $(CLAUDE_CODE_VERSION) into .tools/node"; \
	    if npm install --prefix $(TOOLS_NODE) --save-exact --no-audit --no-fund --loglevel=error \
	         @anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) > $(CURDIR)/.tools/claude-install.log 2>&1; then \
	      rm -f $(CURDIR)/.tools/claude-install.log; \
	    else \
	      echo "npm install failed (.tools/claude-install.log): the claude engine's tests are skipped"; \
	    fi; \
	  fi; \
	fi

## build: build the agentbus binary into bin/
build:
	$(GO) build -o $(BIN) ./cmd/agentbus

## run: start the whole stack in one process (embedded NATS, private Postgres and Redis)
run: deps build
	./$(BIN) up

## test: vet and run every test with the race detector
test: deps claude
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m ./...

# The fuzz targets, as <package>:<target>. Their seed corpora (f.Add and
# testdata/fuzz/<target>) run in every `make test`.
FUZZ_TARGETS := ./sidecar/protocol:FuzzParseEntry ./handlers/acl:FuzzTranslate ./api:FuzzRequestDecoding \
	./domain:FuzzParseUSD ./domain:FuzzValidateCron ./internal/jsontext:FuzzCheck
FUZZTIME ?= 5s

## fuzz: run each fuzz target for $(FUZZTIME) (FUZZTIME=1m make fuzz for longer)
fuzz:
	@for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; name=$${t##*:}; echo "fuzz $$name ($$pkg, $(FUZZTIME))"; \
	  $(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	done

## bench: run the Go benchmarks and print a table
bench: deps
	$(GO) test -run '^$$' -bench . -benchmem -count 1 -timeout 30m ./... | tee bench.out
	@echo; echo "benchmark table:"; grep -E '^(Benchmark|ok|pkg)' bench.out | column -t

## tools: build the nats CLI (natscli) into bin/
tools:
	@mkdir -p bin
	$(GO) mod download -json $(NATSCLI) >/dev/null
	cd $$($(GO) env GOMODCACHE)/$(NATSCLI) && GOFLAGS=-mod=mod $(GO) build \
	  -ldflags "-X main.version=$(NATSCLI_VERSION)" -o $(CURDIR)/bin/nats ./nats
	@echo "bin/nats built: bin/nats --server 127.0.0.1:4222 stream ls"

clean:
	rm -rf bin bench.out

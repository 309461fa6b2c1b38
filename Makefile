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

.PHONY: servers deps apt-install claude build run test fuzz bench bench-relay bench-fleet chaos tools ui clean

# What `make run` needs from the machine: the Postgres and Redis servers,
# bubblewrap, which confines each session's agent in a sandbox, and
# util-linux's prlimit, which sets the sandbox's limits.
RUN_DEPS := redis-server postgresql bubblewrap util-linux
# What the tests need besides: curl and jq for the README walkthrough, socat
# for the local socket, headless Chromium for the dashboard and /docs.
TEST_DEPS := curl jq socat chromium

## servers: install the Postgres and Redis servers `make run` starts when missing, and bubblewrap and prlimit for the sessions' sandboxes (all `make run` needs from the machine)
servers:
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(RUN_DEPS)"

## deps: install the Postgres and Redis servers, bubblewrap and prlimit (the sessions' sandboxes), curl and jq for the README walkthrough,
## socat and headless Chromium for the tests (the local socket, the dashboard and /docs),
## and the Claude Code CLI when the claude engine is chosen (AGENTBUS_ENGINE=claude)
deps:
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(RUN_DEPS) $(TEST_DEPS)"
	@$(GO) version >/dev/null || { echo "Go 1.26 is needed: https://go.dev/dl/"; exit 1; }
	@if [ "$$AGENTBUS_ENGINE" = claude ]; then $(MAKE) --no-print-directory claude; fi

# apt-install installs the Debian PACKAGES whose program is missing, in one
# apt-get run, and does nothing (no apt-get update) when none is.
apt-install:
	@missing=""; \
	for p in $(PACKAGES); do \
	  case $$p in \
	    postgresql) ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || command -v postgres >/dev/null 2>&1 || missing="$$missing $$p";; \
	    bubblewrap) command -v bwrap >/dev/null 2>&1 || missing="$$missing $$p";; \
	    util-linux) command -v prlimit >/dev/null 2>&1 || missing="$$missing $$p";; \
	    *) command -v $$p >/dev/null 2>&1 || missing="$$missing $$p";; \
	  esac; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "missing:$$missing — install them (sudo apt-get install$$missing) or set DATABASE_URL / REDIS_URL"; exit 1; \
	  fi; \
	fi

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
	@echo "building $(BIN) (the first build downloads and compiles the dependencies: a few minutes)"
	@$(GO) build -o $(BIN) ./cmd/agentbus
	@echo "built $(BIN)"

# Where `make run` serves the API and the dashboard (make run HTTP=127.0.0.1:9090).
HTTP ?= 127.0.0.1:8080
# Where `make run`'s sessions work: outside the checkout, so that an
# agent's git commands never reach this repository.
WORKSPACE ?= $(HOME)/.local/share/agentbus/workspace
# What `make run` logs besides its banner (debug, info, warn, error).
LOG_LEVEL ?= warn

## run: start the whole stack in one process (embedded NATS, private Postgres and Redis) on $(HTTP), with
## sessions in $(WORKSPACE); it needs only the two servers (and the claude engine's CLI when AGENTBUS_ENGINE=claude)
run: servers build
	@if [ "$$AGENTBUS_ENGINE" = claude ]; then $(MAKE) --no-print-directory claude; fi
	AGENTBUS_LOG_LEVEL=$(LOG_LEVEL) ./$(BIN) up --http $(HTTP) --workspace $(WORKSPACE)

## test: vet and run every test with the race detector
test: deps claude
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 40m ./...

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

# The chaos suite's full run: CHAOS_KILLS kills of random processes of the
# multi-process deployment while CHAOS_SESSIONS sessions are driven at once,
# a third of them fed poison raw events (CHAOS_SEED=<seed> replays a run;
# its table, its failed sessions with their reasons, its 5xx answers and
# its seed are printed). `make test` runs it with a dozen kills and three
# sessions.
CHAOS_KILLS ?= 220
CHAOS_SEED ?= 0
CHAOS_SESSIONS ?= 30
# Runner processes that run the sidecars, as compose runs them: each is
# killed alone (its sidecars suspend) and with all its sidecars at once.
CHAOS_RUNNERS ?= 2

## chaos: kill -9 random processes of the multi-process deployment CHAOS_KILLS times while CHAOS_SESSIONS sessions stream, some with poison events, then check nothing was lost or doubled
chaos: deps
	$(GO) test -count=1 -v -timeout 15m -run '^TestChaos$$' ./internal/chaos \
	  -chaos.kills $(CHAOS_KILLS) -chaos.seed $(CHAOS_SEED) -chaos.sessions $(CHAOS_SESSIONS) -chaos.runners $(CHAOS_RUNNERS) -chaos.gap-min 700ms -chaos.gap-max 1700ms

# The end-to-end steering benchmark's knobs: messages per row, live
# sessions and messages held per steered session (comma-separated), and
# whether a row runs with a write transaction held open elsewhere.
STEERING_SAMPLES  ?= 200
STEERING_SESSIONS ?= 10,1000
STEERING_HISTORY  ?= 0,1000
STEERING_HOLD_TX  ?= 1
# Live sessions at which the density benchmark measures a sidecar's memory
# (private and PSS per session; comma-separated).
LIVE_SIDECARS ?= 1,10,50
# Requests per row of the commands-over-HTTP benchmark: up to 20 per
# session (200 sessions) stay within each session's rate limit burst.
COMMANDS_HTTP_REQUESTS ?= 4000
# Live sessions and messages of the delivery-under-load benchmark.
DELIVERY_SESSIONS ?= 200
DELIVERY_MESSAGES ?= 2000

## bench: run the Go benchmarks and the end-to-end steering benchmark (plot in steering.png), and print a table
bench: deps
	AGENTBUS_BENCH_LIVE_SIDECARS=$(LIVE_SIDECARS) \
	  $(GO) test -run '^$$' -bench . -skip '^Benchmark(Steering|CommandsHTTP|RelayScale|DeliveryUnderLoad|RunnerFleet)$$' -benchmem -count 1 -timeout 30m ./... | tee bench.out
	$(GO) test -run '^$$' -bench '^BenchmarkCommandsHTTP$$' -benchtime $(COMMANDS_HTTP_REQUESTS)x -count 1 -timeout 30m ./cmd/agentbus | tee -a bench.out
	AGENTBUS_BENCH_SESSIONS=$(STEERING_SESSIONS) AGENTBUS_BENCH_HISTORY=$(STEERING_HISTORY) \
	AGENTBUS_BENCH_HOLD_TX=$(filter-out 0,$(STEERING_HOLD_TX)) AGENTBUS_BENCH_PLOT=$(CURDIR)/steering.png \
	  $(GO) test -run '^$$' -bench '^BenchmarkSteering$$' -benchtime $(STEERING_SAMPLES)x -count 1 -timeout 30m ./cmd/agentbus | tee -a bench.out
	AGENTBUS_BENCH_DELIVERY_SESSIONS=$(DELIVERY_SESSIONS) \
	  $(GO) test -run '^$$' -bench '^BenchmarkDeliveryUnderLoad$$' -benchtime $(DELIVERY_MESSAGES)x -count 1 -timeout 30m ./cmd/agentbus | tee -a bench.out
	@echo; echo "benchmark table:"; grep -E '^(Benchmark|ok|pkg)' bench.out | column -t
	@echo; awk '/beside (its|the) skeleton/ {p = 1} /^(PASS|ok|Benchmark|steering plot)/ {p = 0} p' bench.out

# The live sessions at which the relay's scale is measured (comma-separated).
RELAY_SESSIONS ?= 100,1000,10000

## bench-relay: the relay's scale at $(RELAY_SESSIONS) live sessions: idle CPU of `up`, its Redis and Postgres,
## Redis CPU per forwarded event beside a bare XADD's; then the relay alone on a Redis of its own; a table (bench-relay.out)
bench-relay: deps
	AGENTBUS_BENCH_SCALE_SESSIONS=$(RELAY_SESSIONS) \
	  $(GO) test -run '^$$' -bench '^BenchmarkRelayScale$$' -count 1 -timeout 60m ./cmd/agentbus | tee bench-relay.out
	$(GO) test -run '^$$' -bench '^BenchmarkRedisCost$$' -count 1 -timeout 30m ./relay | tee -a bench-relay.out
	@echo; echo "relay scale:"; grep -E '^(Benchmark|ok|pkg)' bench-relay.out | column -t

# The fleet's size: sessions over runner processes.
FLEET_SESSIONS ?= 1000
FLEET_RUNNERS ?= 10

## bench-fleet: $(FLEET_SESSIONS) sessions over $(FLEET_RUNNERS) runner processes: placement latency p50/p99, and how long after
## a runner's kill -9 its sessions resume on the others, beside the lease TTL (bench-fleet.out)
bench-fleet: deps
	AGENTBUS_BENCH_FLEET_SESSIONS=$(FLEET_SESSIONS) AGENTBUS_BENCH_FLEET_RUNNERS=$(FLEET_RUNNERS) \
	  $(GO) test -run '^$$' -bench '^BenchmarkRunnerFleet$$' -benchtime 1x -count 1 -timeout 30m ./cmd/agentbus | tee bench-fleet.out
	@echo; grep -E '^fleet:' bench-fleet.out

## ui: rebuild the dashboard (ui/dist, embedded in the binary) from ui/web with npm, its client types generated from the OpenAPI document
ui:
	$(GO) run ./cmd/agentbus openapi > ui/web/openapi.json
	cd ui/web && npm ci --no-audit --no-fund --loglevel=error && npm run schema && npm run check && npm run build

## tools: build the nats CLI (natscli) into bin/
tools:
	@mkdir -p bin
	$(GO) mod download -json $(NATSCLI) >/dev/null
	cd $$($(GO) env GOMODCACHE)/$(NATSCLI) && GOFLAGS=-mod=mod $(GO) build \
	  -ldflags "-X main.version=$(NATSCLI_VERSION)" -o $(CURDIR)/bin/nats ./nats
	@echo "bin/nats built: set -a; . .agentbus/credentials.env; set +a; bin/nats --server \"\$$NATS_URL\" stream ls"

clean:
	rm -rf bin bench.out bench-relay.out bench-fleet.out steering.png

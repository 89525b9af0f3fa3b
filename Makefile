# hpcq: run `make help` for the targets.
GO        ?= go
BIN       := bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X github.com/hpcq/hpcq/internal/version.Version=$(VERSION)
EXAMPLES  := examples/hello/task.json examples/stencil-omp/task.json
# Where services.sh keeps the servers of `make services-up`.
SERVICES_DIR ?= $(CURDIR)/.services

.PHONY: help build run run-exec test test-go test-multihost lint bench-queue bench-engine bench-engine-cluster bench-memory bench-tokens bench-search bench-slurm services-up services-down services-install clean

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

build: ## build scheduler, worker, slurm-bridge into bin/
	@mkdir -p $(BIN)
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/...

gpu-bundle: ## static, compressed scheduler, worker and sandbox in bin/gpu-bundle/ (about 40 MB), for scripts/gpu-check.sh on a GPU machine that gets the tree and little room
	@mkdir -p $(BIN)/gpu-bundle
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o $(BIN)/gpu-bundle/ ./cmd/scheduler ./cmd/worker ./cmd/hpcq-sandbox
	gzip -9f $(BIN)/gpu-bundle/scheduler $(BIN)/gpu-bundle/worker $(BIN)/gpu-bundle/hpcq-sandbox

run: build ## the tree search on examples/stencil-omp, locally (embedded NATS, in-process workers, SQLite; scripted replies unless OPENAI_API_KEY is set)
	$(BIN)/scheduler run --local examples/stencil-omp

run-exec: build ## the bundled hand-written tasks as a plain job queue (no LLM)
	$(BIN)/scheduler exec --local $(EXAMPLES)
	@echo 'results: $(BIN)/scheduler query "SELECT node, phase, status, duration_ms FROM phase_runs"'

test: services-install lint test-go ## install what the tests need, then vet and run every test (race detector on)

# Tests whose result is a line (multinode ...) also append it to $(TEST_LINES): go test shows a passing
# package's output only with -v, so the lines are printed after the run.
# ./tests/ first: the longest package (about 10 minutes on 2 cores) starts first and the others run
# beside it, rather than after them all (go test starts packages in the order they are named).
TEST_LINES := $(abspath $(BIN))/test-lines.txt
test-go:
	@mkdir -p $(BIN); rm -f $(TEST_LINES)
	HPCQ_TEST_LINES=$(TEST_LINES) $(GO) test -race -count=1 -timeout 20m ./tests/ ./...; rc=$$?; cat $(TEST_LINES) 2>/dev/null; exit $$rc

test-multihost: build ## the cluster on network namespaces (3 NATS hosts, a service host, a head with slurmctld, 2 compute hosts with slurmd, faults); part of `make test`; needs root
	$(GO) test -count=1 -v -run 'TestMultiHost|TestQueueDeclaredAtOnceOnACluster|TestSlurmAcrossHosts' ./tests/
	$(GO) test -count=1 ./internal/netns/

lint: ## gofmt, go vet and golangci-lint (.golangci.yml; a tool of tools/go.mod, built by go tool)
	@out=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool -modfile=tools/go.mod golangci-lint run ./...

bench-queue: build ## queue benchmark (embedded server, file storage); prints the bench-queue lines; spawn tasks run in the sandbox as installed (hpcq-sandbox beside the binary)
	$(GO) build -o $(BIN)/bench-queue ./bench/queue
	$(BIN)/bench-queue

bench-engine: ## the real engine growing 1,000- and 10,000-node trees (no-op workers with 64 slots, an endpoint answering at once); prints the bench-engine lines
	$(GO) run ./bench/engine

bench-engine-cluster: ## bench-engine in cluster mode: memory in Redis + ClickHouse, results in ClickHouse, a nats-server (all started for it); adds each server's CPU
	$(GO) build -o $(BIN)/bench-engine ./bench/engine
	scripts/bench-engine-cluster.sh $(BIN)/bench-engine

# The memory traces live beside the repository (../shared/bench); each trace
# runs in a fresh process against a fresh store, on SQLite and on Redis +
# ClickHouse (started for the run); then one million archival texts on each
# (BENCH_ARCHIVAL_DOCS to change it).
BENCH_DIR ?= ../shared/bench
bench-memory: ## memory benchmark: bench-memory lines per trace and store, then bench-archival lines
	$(GO) build -o $(BIN)/bench-memory ./bench/memory
	scripts/bench-memory.sh $(BIN)/bench-memory $(BENCH_DIR)

bench-tokens: ## memory formats in cl100k_base tokens (seed 004): a bench-tokens line per trace order and format
	$(GO) run ./bench/tokens -dir $(BENCH_DIR)

bench-search: ## tree-search benchmark: asynchronous expansion against lockstep batches (simulated nodes)
	$(GO) run ./bench/search

bench-slurm: build ## 1000 tasks (TASKS=N) as one sbatch job each vs hpcq workers started by slurm-bridge, same local Slurm; prints the bench-slurm line
	scripts/services.sh install slurm nats
	$(GO) run ./bench/slurm --bin $(BIN) $(if $(TASKS),-tasks $(TASKS))

services-install: ## install the servers the tests need (Debian packages) if missing
	scripts/services.sh install

services-up: ## start the servers on private loopback ports; env in $(SERVICES_DIR)/services.env
	scripts/services.sh up $(SERVICES_DIR)

services-down: ## stop the servers started by services-up
	scripts/services.sh down $(SERVICES_DIR)

clean: ## remove bin/ and runs/
	rm -rf $(BIN) runs

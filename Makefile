# audit: see README.md. `make demo` runs the main job, `make test` the whole suite.
SHELL := /bin/bash
GO ?= go
GOBIN ?= $(shell $(GO) env GOPATH)/bin
export PATH := $(GOBIN):$(PATH)

# Generator versions are pinned: the committed pb/*.pb.go must be reproducible.
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2

BIN := bin/audit

.PHONY: all build test deps tools proto proto-check lint depcheck demo bench fuzz fixtures real-capture h2-captures corpus-table clean

all: build

# deps installs the system packages the build and the tests need (as root), or
# says exactly what is missing, and the grpc-js client's npm packages
# (npm ci --prefix testdata/clients/grpcjs, only when they are not there).
deps:
	@./.ci/deps.sh

build: deps
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/audit

test: deps
	$(GO) vet ./...
	$(MAKE) --no-print-directory depcheck
	$(GO) test -race -count=1 -timeout 9m ./...

depcheck:
	$(GO) test -count=1 -run TestImportGraph ./cmd/audit

tools:
	@command -v protoc >/dev/null || { echo "protoc missing: apt-get install -y protobuf-compiler"; exit 1; }
	@[ "$$($(GOBIN)/protoc-gen-go --version 2>/dev/null)" = "protoc-gen-go $(PROTOC_GEN_GO_VERSION)" ] || \
		$(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	@[ "$$($(GOBIN)/protoc-gen-go-grpc --version 2>/dev/null)" = "protoc-gen-go-grpc $(PROTOC_GEN_GO_GRPC_VERSION:v%=%)" ] || \
		$(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

proto: tools
	protoc --proto_path=pb --go_out=pb --go_opt=paths=source_relative \
		--go-grpc_out=pb --go-grpc_opt=paths=source_relative pb/reconnect.proto

# proto-check regenerates into a scratch folder and fails when the committed
# code differs (a stale or hand-edited pb/).
proto-check: tools
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && \
	protoc --proto_path=pb --go_out=$$tmp --go_opt=paths=source_relative \
		--go-grpc_out=$$tmp --go-grpc_opt=paths=source_relative pb/reconnect.proto && \
	for f in reconnect.pb.go reconnect_grpc.pb.go; do \
		diff -u pb/$$f $$tmp/$$f || { echo "pb/$$f is stale: run 'make proto'"; exit 1; }; \
	done && echo "proto-check: pb/ is up to date"

lint: proto-check
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); [ -z "$$out" ] || { echo "gofmt: $$out"; exit 1; }
	$(GO) vet ./...

# demo: the main job on a built-in default: `audit live --iface lo` with the
# project's server, and `audit client` against it (about 20 s).
demo: build
	./.ci/demo.sh $(BIN)

# bench: the speed comparison (cat, tcpdump, tshark, audit pcap) on
# generated captures, plus the Go benchmarks; then the scale table (.ci/scale.sh:
# 10 000 to 1 000 000 peers, waves, audit h2 on 100 000 connections; SCALE=0
# skips the 1 000 000-peer capture). Results go to BENCHMARKS.md by hand.
bench: build
	./.ci/bench.sh
	./.ci/scale.sh

# fuzz: every fuzz target for FUZZTIME each (default 60s).
fuzz:
	./.ci/fuzz.sh

# corpus-table: outcome and peak RSS of `audit pcap` on every file of a
# capture corpus (AUDIT_CORPUS=DIR), written to docs/corpus-table.md.
corpus-table: build
	./.ci/corpus-table.sh -o docs/corpus-table.md

# fixtures: rewrite the generated captures in testdata/ (byte-for-byte
# reproducible; TestFixturesAreReproducible checks them).
fixtures:
	$(GO) run ./capture/internal/gen -out testdata

# real-capture: remake testdata/real-* from a real server and grpc-go client on
# lo under tcpdump (needs root).
real-capture: build
	./testdata/make-real-capture.sh $(BIN)

# h2-captures: remake testdata/h2/*.pcap from real grpc-go stacks on lo under
# tcpdump (needs root, about a minute); then rewrite their golden reports
# (testdata/README.md, "HTTP/2 captures").
h2-captures:
	$(GO) run ./h2/internal/h2gen -out testdata/h2

clean:
	rm -rf bin

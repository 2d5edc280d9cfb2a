# tinyhost — run `make help` for the targets.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO      ?= go
BIN     := $(CURDIR)/bin
MODULES := $(BIN)/modules
SDK     := github.com/tinyhost/tinyhost/sdk

# Component modules: every main package under plugins/ and examples/ that
# imports the SDK. Each builds to bin/modules/<directory name>.wasm.
COMPONENT_PKGS = $(shell GOOS=wasip1 GOARCH=wasm $(GO) list -f '{{if eq .Name "main"}}{{range .Imports}}{{if eq . "$(SDK)"}}{{$$.ImportPath}}{{end}}{{end}}{{end}}' ./plugins/... ./examples/...)

.PHONY: help
help: ## Show the targets.
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

.PHONY: plugins
plugins: ## Build every component module into bin/modules/<name>.wasm.
	@mkdir -p $(MODULES)
	@for pkg in $(COMPONENT_PKGS); do \
	  name=$${pkg##*/}; \
	  echo "wasm  $$pkg -> bin/modules/$$name.wasm"; \
	  GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -o $(MODULES)/$$name.wasm $$pkg; \
	done

.PHONY: test
test: plugins ## Run every test (builds all wasm it needs from source).
	$(GO) test -race -count=1 ./...
	cd abi && $(GO) test -race -count=1 ./...
	cd sdk && $(GO) test -race -count=1 ./...

.PHONY: bench
bench: plugins ## Run the benchmarks and print ratios against their baselines.
	$(GO) test -run '^$$' -bench . -benchmem ./host/... | tee $(BIN)/bench.txt

# Pinned code generators, installed into bin/ on first use. protoc itself
# comes from the system (Debian: protobuf-compiler).
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
PROTO_FILES := $(shell find host/proto -name '*.proto')

$(BIN)/protoc-gen-go-$(PROTOC_GEN_GO_VERSION):
	GOBIN=$(BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	mv $(BIN)/protoc-gen-go $@

$(BIN)/protoc-gen-go-grpc-$(PROTOC_GEN_GO_GRPC_VERSION):
	GOBIN=$(BIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	mv $(BIN)/protoc-gen-go-grpc $@

.PHONY: proto
proto: $(BIN)/protoc-gen-go-$(PROTOC_GEN_GO_VERSION) $(BIN)/protoc-gen-go-grpc-$(PROTOC_GEN_GO_GRPC_VERSION) ## Regenerate the gRPC code (needs protoc).
	@command -v protoc >/dev/null || { echo "protoc not found: apt-get install protobuf-compiler" >&2; exit 1; }
	cd host/proto && protoc \
	  --plugin=protoc-gen-go=$(BIN)/protoc-gen-go-$(PROTOC_GEN_GO_VERSION) \
	  --plugin=protoc-gen-go-grpc=$(BIN)/protoc-gen-go-grpc-$(PROTOC_GEN_GO_GRPC_VERSION) \
	  --go_out=. --go_opt=paths=source_relative \
	  --go-grpc_out=. --go-grpc_opt=paths=source_relative \
	  $(patsubst host/proto/%,%,$(PROTO_FILES))

.PHONY: clean
clean: ## Remove build outputs.
	rm -rf $(BIN)

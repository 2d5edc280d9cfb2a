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

# Hand-written hostile guests of the conformance kit: each .wat beside the
# .wasm made from it, which the kit embeds, so that make test needs no wat2wasm.
# A source whose comments hold "wat2wasm: <flags>" is built with those flags
# (--no-check for the guests that are invalid on purpose). The .wasm ends in a
# custom section "abitest.wat-sha256" holding the hex SHA-256 of its .wat,
# which TestFixtures compares with the source.
WAT_FIXTURES := $(wildcard abi/abitest/wat/*.wat host/testdata/*.wat host/testdata/wat/*.wat host/server/testdata/*.wat cmd/tinyhost/internal/hostfarm/testdata/*.wat)

.PHONY: fixtures
fixtures: ## Regenerate the .wasm of every hand-written .wat fixture (needs wabt).
	@command -v wat2wasm >/dev/null || { \
	  echo "wat2wasm not found: installing Debian's wabt"; \
	  sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  $$sudo apt-get update -qq && $$sudo apt-get install -y -qq wabt; }
	@for wat in $(WAT_FIXTURES); do \
	  wasm=$${wat%.wat}.wasm; \
	  flags=$$(sed -n 's/^;; wat2wasm: //p' $$wat); \
	  echo "wat2wasm $$flags $$wat -> $$wasm"; \
	  wat2wasm $$flags -o $$wasm $$wat; \
	  sum=$$(sha256sum $$wat | cut -c1-64); \
	  printf '\000\123\022abitest.wat-sha256%s' $$sum >> $$wasm; \
	done

.PHONY: test
# -timeout: the host's conformance runs (fresh and from snapshots) compile
# dozens of guests under -race, which on two busy cores takes longer than
# half an hour; the timeout is a liveness bound, not a speed target.
test: plugins ## Run every test (builds all wasm it needs from source).
	$(GO) test -race -count=1 -timeout 60m ./...
	cd abi && $(GO) test -race -count=1 -timeout 60m ./...
	cd sdk && $(GO) test -race -count=1 -timeout 60m ./...

# A bounded run of each fuzz target that feeds the host hostile modules
# (their seed corpora also run in the plain tests). Each runs a count of
# inputs, about 20 s on an idle machine: a count, not a duration, because
# with a duration Go 1.26's fuzzing coordinator may fail a run that found
# nothing ("context deadline exceeded") when the machine is busy as the
# time runs out. FUZZTIME=10m (or any -fuzztime) runs every target longer.
FUZZTIME ?=
fuzztime = $(if $(FUZZTIME),$(FUZZTIME),$(1))

.PHONY: fuzz
fuzz: ## Fuzz the rewrite, the host and guest text on the wire and in the log for a bounded count per target.
	$(GO) test -run '^$$' -fuzz '^FuzzInjected$$' -fuzztime $(call fuzztime,60000x) -fuzzminimizetime 10x ./host/internal/instrument
	$(GO) test -run '^$$' -fuzz '^FuzzSnapshot$$' -fuzztime $(call fuzztime,200000x) -fuzzminimizetime 10x ./host/internal/instrument
	$(GO) test -run '^$$' -fuzz '^FuzzHostLoad$$' -fuzztime $(call fuzztime,60x) -fuzzminimizetime 10x ./host/
	$(GO) test -run '^$$' -fuzz '^FuzzHostCode$$' -fuzztime $(call fuzztime,60x) -fuzzminimizetime 10x ./host/
	$(GO) test -run '^$$' -fuzz '^FuzzGuestText$$' -fuzztime $(call fuzztime,25000x) -fuzzminimizetime 10x ./host/server/

test: fuzz

.PHONY: bench
bench: plugins ## Run the benchmarks and print ratios against their baselines.
	@mkdir -p $(BIN)
	$(GO) test -p 1 -run '^$$' -bench . -benchmem ./host/... ./cmd/tinyhost | tee $(BIN)/bench.txt
	@awk -f internal/bench-ratios.awk $(BIN)/bench.txt

# ---------------------------------------------------------------------------
# The host daemon and the CLI.

# grpcurl, for the README's tour and the tests (they build it the same way
# when it is missing; internal/e2e.GrpcurlVersion must match).
GRPCURL_VERSION := v1.9.4
GRPCURL         := $(BIN)/grpcurl-$(GRPCURL_VERSION)

$(GRPCURL):
	@mkdir -p $(BIN)
	rm -rf $(BIN)/.grpcurl-make && mkdir -p $(BIN)/.grpcurl-make
	GOBIN=$(BIN)/.grpcurl-make $(GO) install github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)
	mv $(BIN)/.grpcurl-make/grpcurl $@ && rm -rf $(BIN)/.grpcurl-make

.PHONY: tools
tools: $(GRPCURL) ## Build the pinned grpcurl into bin/ (bin/grpcurl links to it).
	ln -sf $(notdir $(GRPCURL)) $(BIN)/grpcurl

.PHONY: build
# The version binaries report: the nearest tag, the commit, and -dirty for
# uncommitted changes.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)

build: plugins ## Build the binaries of cmd/ into bin/ and the modules into bin/modules.
	$(GO) build -ldflags "-X github.com/tinyhost/tinyhost/internal/buildinfo.version=$(VERSION)" -o $(BIN)/ ./cmd/...

.PHONY: run
# The example modules are ours: the host grants them timer and kv too,
# which a module gets only when granted (common's ticker sets timers,
# kvtally keeps its total in its bucket under bin/state). None calls
# another module (split's emits are wired), so none is granted messaging.
run: build ## Build everything and run tinyhost on 127.0.0.1:50051 with bin/modules.
	$(BIN)/tinyhost --listen 127.0.0.1:50051 --modules $(MODULES) --cache-dir $(BIN)/cache \
	  --capabilities log,config,timer,kv --state-dir $(BIN)/state

# The daemon's end-to-end tests call grpcurl; build it before they run.
test: tools

# golangci-lint, pinned, with .golangci.yml: the standard linters, plus
# Kubernetes kept out of host/ and abi/ and context.Background out of tests.
# abi and sdk are modules of their own, linted from their directories with
# the same file. The cache stays in bin/ with the other build outputs.
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT         := $(BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
export GOLANGCI_LINT_CACHE := $(BIN)/.golangci-lint-cache

$(GOLANGCI_LINT):
	@mkdir -p $(BIN)
	rm -rf $(BIN)/.golangci-lint-make && mkdir -p $(BIN)/.golangci-lint-make
	GOBIN=$(BIN)/.golangci-lint-make $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(BIN)/.golangci-lint-make/golangci-lint $@ && rm -rf $(BIN)/.golangci-lint-make

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint (pinned, built into bin/) on the main, abi and sdk modules.
	$(GOLANGCI_LINT) run ./...
	cd abi && $(GOLANGCI_LINT) run --config ../.golangci.yml ./...
	cd sdk && $(GOLANGCI_LINT) run --config ../.golangci.yml ./...

test: lint

# Pinned code generators, installed into bin/ on first use. protoc itself
# comes from the system: Debian's protobuf-compiler (3.21.12 on bookworm),
# the version the generated files name; `make protoc` installs it as root.
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2

$(BIN)/protoc-gen-go-$(PROTOC_GEN_GO_VERSION):
	GOBIN=$(BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	mv $(BIN)/protoc-gen-go $@

$(BIN)/protoc-gen-go-grpc-$(PROTOC_GEN_GO_GRPC_VERSION):
	GOBIN=$(BIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	mv $(BIN)/protoc-gen-go-grpc $@

.PHONY: protoc
protoc: ## Install protoc (Debian's protobuf-compiler) when it is missing.
	@command -v protoc >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  { apt-get install -y -q protobuf-compiler >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null && apt-get install -y -q protobuf-compiler >/dev/null; }; }; } || \
	  { echo "protoc not found: apt-get install protobuf-compiler" >&2; exit 1; }

# The proto drift test (host/hostv1/generated_test.go) runs protoc.
test: protoc

# host.proto sits beside its Go package (host/hostv1) but keeps the import
# path tinyhost/host/v1/host.proto (the -I virtual=disk mapping), the name
# its descriptor is registered and reflected under.
.PHONY: proto
proto: protoc $(BIN)/protoc-gen-go-$(PROTOC_GEN_GO_VERSION) $(BIN)/protoc-gen-go-grpc-$(PROTOC_GEN_GO_GRPC_VERSION) ## Regenerate the gRPC code.
	protoc -Itinyhost/host/v1=host/hostv1 -Ihost/hostv1/third_party \
	  --plugin=protoc-gen-go=$(BIN)/protoc-gen-go-$(PROTOC_GEN_GO_VERSION) \
	  --plugin=protoc-gen-go-grpc=$(BIN)/protoc-gen-go-grpc-$(PROTOC_GEN_GO_GRPC_VERSION) \
	  --go_out=. --go_opt=module=github.com/tinyhost/tinyhost \
	  --go-grpc_out=. --go-grpc_opt=module=github.com/tinyhost/tinyhost \
	  tinyhost/host/v1/host.proto

.PHONY: clean
clean: ## Remove build outputs.
	rm -rf $(BIN)

# ---------------------------------------------------------------------------
# Operator: envtest binaries, controller-gen, generated code and manifests.
#
# kube-apiserver, kubectl and etcd cannot be downloaded here; they are built
# from the Go module proxy by the tool modules in operator/tools (see its
# README), whose go.mod files hold the versions. Each build runs once: a stamp
# named after the version marks it done, so a version bump rebuilds.
TOOLS        := $(CURDIR)/operator/tools
KUBE_VERSION := $(shell sed -n 's/^require k8s.io\/kubernetes \(v[^ ]*\).*/\1/p' operator/tools/kube/go.mod)
KUBE_MINOR   := $(word 2,$(subst ., ,$(KUBE_VERSION)))
ETCD_VERSION := $(shell sed -n 's/^require go.etcd.io\/etcd\/server\/v3 \(v[^ ]*\).*/\1/p' operator/tools/etcd/go.mod)
KUBE_LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
                -X k8s.io/component-base/version.gitMajor=1 \
                -X k8s.io/component-base/version.gitMinor=$(KUBE_MINOR) \
                -X k8s.io/component-base/version.gitTreeState=clean
CONTROLLER_GEN_VERSION := v0.23.0
CONTROLLER_GEN         := $(BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)

# A binary removed by hand is rebuilt even though its stamp is there.
ifneq ($(words $(wildcard $(BIN)/kube-apiserver $(BIN)/kubectl)),2)
.PHONY: $(BIN)/.kube-$(KUBE_VERSION)
endif
ifeq ($(wildcard $(BIN)/etcd),)
.PHONY: $(BIN)/.etcd-$(ETCD_VERSION)
endif

$(BIN)/.kube-$(KUBE_VERSION): operator/tools/kube/go.mod operator/tools/kube/go.sum
	@mkdir -p $(BIN)
	cd $(TOOLS)/kube && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(KUBE_LDFLAGS)" -o $(BIN)/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
	cd $(TOOLS)/kube && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(KUBE_LDFLAGS)" -o $(BIN)/kubectl k8s.io/kubernetes/cmd/kubectl
	@touch $@

$(BIN)/.etcd-$(ETCD_VERSION): operator/tools/etcd/go.mod operator/tools/etcd/go.sum
	@mkdir -p $(BIN)
	cd $(TOOLS)/etcd && CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/etcd go.etcd.io/etcd/server/v3
	@touch $@

.PHONY: envtest
envtest: $(BIN)/.kube-$(KUBE_VERSION) $(BIN)/.etcd-$(ETCD_VERSION) ## Build kube-apiserver, kubectl and etcd into bin/ (once).

$(CONTROLLER_GEN):
	GOBIN=$(BIN) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(BIN)/controller-gen $@

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN) ## Build the pinned controller-gen into bin/.

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Regenerate the operator's deepcopy code.
	$(CONTROLLER_GEN) object paths=./operator/api/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Regenerate the CRD and RBAC manifests under operator/config, and the chart's CRDs.
	$(CONTROLLER_GEN) crd rbac:roleName=tinyhost-operator paths=./operator/... \
	  output:crd:artifacts:config=operator/config/crd/bases \
	  output:rbac:artifacts:config=operator/config/rbac
	cp operator/config/crd/bases/*.yaml charts/tinyhost/crds/

# The operator's tests run against the binaries above and check that the
# generated code is what the pinned controller-gen makes of the types.
test: envtest controller-gen
test: export KUBEBUILDER_ASSETS := $(BIN)
test: export CONTROLLER_GEN := $(CONTROLLER_GEN)

# The images of tinyhost and tinyhost-operator, built without a container
# engine or a base image (internal/image, with go-containerregistry): each a
# static binary on a filesystem of its own (CA certificates from
# IMAGE_CA_CERTS, the user nonroot 65532, /tmp, no shell), one per platform
# of IMAGE_PLATFORMS, written as an OCI layout bin/images/<name> tagged
# $(VERSION) (`podman pull oci:bin/images/tinyhost:<version>`), its
# reference in bin/images/<name>.ref. With IMAGE_REGISTRY (e.g.
# ghcr.io/acme) each is pushed to $(IMAGE_REGISTRY)/<name>:$(VERSION) with
# the credentials of docker's config file, and referenced by digest.
# bin/images/kustomization.yaml is operator/config/default with them.
IMAGE_REGISTRY  ?=
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
IMAGE_SOURCE    ?= https://github.com/tinyhost/tinyhost
IMAGE_CA_CERTS  ?= /etc/ssl/certs/ca-certificates.crt

.PHONY: images
images: ## Build the tinyhost and tinyhost-operator images into bin/images (no docker); push them to IMAGE_REGISTRY when set.
	$(GO) run ./internal/image/mkimage --out $(BIN)/images --version $(VERSION) \
	  --source $(IMAGE_SOURCE) --revision "$$(git rev-parse HEAD 2>/dev/null || true)" \
	  --created "$$(git log -1 --format=%ct 2>/dev/null || echo 0)" \
	  --platforms $(IMAGE_PLATFORMS) --ca-certs $(IMAGE_CA_CERTS) --registry "$(IMAGE_REGISTRY)" \
	  --kustomize ../../operator/config/default \
	  tinyhost=./cmd/tinyhost tinyhost-operator=./cmd/tinyhost-operator

# The end-to-end tests run the images with Debian's podman and runc
# (internal/e2e/containers.conf configures them); `make podman` installs
# both as root, as `make protoc` installs protoc.
.PHONY: podman
podman: ## Install podman and runc (Debian's) when missing.
	@{ command -v podman && command -v runc; } >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  { apt-get install -y -q podman runc >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null && apt-get install -y -q podman runc >/dev/null; }; }; } || \
	  { echo "podman or runc not found: apt-get install podman runc (as root)" >&2; exit 1; }

test: podman

# The operator's benchmarks run once each (-benchtime=1x): each round starts
# a control plane and real hosts, so one round is the measurement. Every
# benchmark runs alone (-p 1): two packages' benchmarks at once would share
# the cores each measures.
.PHONY: bench-operator
bench-operator: envtest ## Run the operator's benchmarks once: apply to Ready (1 and 100 modules), host loss, scale (1,000 modules over 100 hosts).
	@mkdir -p $(BIN)
	KUBEBUILDER_ASSETS=$(BIN) $(GO) test -p 1 -run '^$$' -bench . -benchtime=1x ./operator/... | tee $(BIN)/bench-operator.txt

bench: bench-operator

# ---------------------------------------------------------------------------
# A real nats-server process for the tests of many hosts on one NATS
# (internal/e2e.StartNATSServer), built from the nats-server version go.mod
# requires: the server the daemon embeds. Its stamp names the version, so
# that a bump rebuilds; the tests build it the same way when it is missing.
NATS_SERVER_VERSION := $(shell $(GO) list -m -f '{{.Version}}' github.com/nats-io/nats-server/v2)

ifeq ($(wildcard $(BIN)/nats-server),)
.PHONY: $(BIN)/.nats-server-$(NATS_SERVER_VERSION)
endif

$(BIN)/.nats-server-$(NATS_SERVER_VERSION):
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/nats-server github.com/nats-io/nats-server/v2
	@touch $@

.PHONY: nats-server
nats-server: $(BIN)/.nats-server-$(NATS_SERVER_VERSION) ## Build the nats-server of go.mod's version into bin/ (once).

test: nats-server

# AstraBox developer commands. `make` alone lists them.

GO        ?= go
BIN       ?= bin/astrabox
VERSION   ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X github.com/astrabox/astrabox/internal/app.Version=$(VERSION)
TOOLS     := $(CURDIR)/bin/tools
STATICCHECK_VERSION := v0.8.2
TEST_TIMEOUT ?= 45m
BENCH_FLAGS  ?=
RUN_FLAGS    ?=

.DEFAULT_GOAL := help

# A target whose recipe fails is removed (a half-written rootfs tarball
# must not pass for a built one).
.DELETE_ON_ERROR:

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# The web console (console/, Vite + React) is built into internal/console/ui/app,
# which the binary embeds. Without npm, `make build` and `go build` skip it and
# the server's / says how to build it.
CONSOLE     := $(if $(shell command -v npm 2>/dev/null),console)
CONSOLE_OUT := internal/console/ui/app/index.html
CONSOLE_SRC := $(shell find console/src console/public -type f 2>/dev/null) console/index.html \
	console/package.json console/package-lock.json console/vite.config.ts console/tsconfig.json

.PHONY: build
build: $(CONSOLE) ## build the static astrabox binary into bin/ (with the web console when npm is installed)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/astrabox

.PHONY: console
console: $(CONSOLE_OUT) ## build the web console (needs node and npm; make build runs it when npm is there)

$(CONSOLE_OUT): $(CONSOLE_SRC)
	cd console && npm ci --no-audit --no-fund && npm run build

.PHONY: run
run: build ## start AstraBox: the server on 127.0.0.1:8080 with native sandboxes (needs root)
	./$(BIN) serve $(RUN_FLAGS)

.PHONY: test
test: ## vet and run every test with the race detector
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

.PHONY: lint
lint: $(TOOLS)/staticcheck ## go vet, gofmt and staticcheck
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(TOOLS)/staticcheck ./...

$(TOOLS)/staticcheck:
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

.PHONY: bench
bench: build ## every scenario on the process harness and the native backend, one table (needs root; BENCH_FLAGS="--backends native,docker")
	./$(BIN) bench $(BENCH_FLAGS)

.PHONY: bench-execd
bench-execd: build ## execd's own costs against the raw host (BENCH_FLAGS="--n 3 --size 16MiB" for a smoke run)
	./$(BIN) bench execd $(BENCH_FLAGS)

.PHONY: image-debian
image-debian: build ## build a Debian bookworm image with python3 (debootstrap) and import it as "debian" (root)
	mkdir -p dist
	image/debootstrap.sh debian $(CURDIR)/dist/debian-rootfs.tar.gz

# The rootfs tarball alone (no import): what the tests of imported images
# use, through ASTRABOX_TEST_ROOTFS.
dist/debian-rootfs.tar.gz:
	mkdir -p dist
	NO_IMPORT=1 image/debootstrap.sh debian $(CURDIR)/$@

.PHONY: image-pi
image-pi: build dist/pi-rootfs.tar.gz ## build the image of engine kind pi (Debian + Node + pi) and import it as "pi", into Docker too when it answers (root, npm)
	./$(BIN) image import --replace $$(docker info >/dev/null 2>&1 && echo --docker) pi dist/pi-rootfs.tar.gz

# The pi image's rootfs tarball (no import): what the pi tests use, through
# ASTRABOX_TEST_PI_ROOTFS.
dist/pi-rootfs.tar.gz: image/pi.sh image/pi/install.sh image/pi/package-lock.json
	mkdir -p dist
	NO_IMPORT=1 image/pi.sh pi $(CURDIR)/$@

# The kubernetes backend's execd image: only the static binary, as
# /astrabox, in an OCI archive (docker-archive layout) for
# `ctr -n k8s.io images import` or a registry push (skopeo, crane).
EXECD_IMAGE ?= astrabox.local/execd:$(VERSION)

.PHONY: image-execd
image-execd: build ## build the kubernetes backend's execd image as dist/execd-image.tar (EXECD_IMAGE=ref)
	mkdir -p dist
	hack/k8s/cluster.sh binary_image dist/execd-image.tar $(EXECD_IMAGE) $(BIN)

.PHONY: k8s-up
k8s-up: ## start the offline single-node test cluster (hack/k8s/cluster.sh; root; first run builds Kubernetes, ~10 min)
	hack/k8s/cluster.sh up

.PHONY: k8s-down
k8s-down: ## stop the test cluster and leave the host as it was
	hack/k8s/cluster.sh down

.PHONY: fuzz
fuzz: ## run each fuzz test for 20 s
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime 20s $$pkg || exit 1; \
	  done; \
	done

.PHONY: clean
clean: ## remove build output
	rm -rf bin dist

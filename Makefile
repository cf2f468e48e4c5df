# cryochamber: make demo runs the bundled plan on real OS timers; make test runs every test.
GO       ?= go
BIN      := bin/cryochamber
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
FUZZTIME ?= 20s

.PHONY: all build test demo fuzz bench lint darwin clean

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) .

# The whole suite: vet, unit tests, and the end-to-end tests against a private systemd user
# manager (they skip, saying why, where root and unshare are missing).
test:
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 12m ./...

demo: build
	./scripts/demo.sh

# Each fuzz target for $(FUZZTIME); crashers land in testdata/fuzz/ of their package.
fuzz:
	./scripts/fuzz.sh $(FUZZTIME)

bench: build
	./scripts/bench.sh

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

# The macOS build must at least compile and vet on Linux CI.
darwin:
	GOOS=darwin GOARCH=arm64 $(GO) build ./...
	GOOS=darwin GOARCH=arm64 $(GO) vet ./...

clean:
	rm -rf bin

# cryochamber: make demo runs the bundled plan on real OS timers; make test runs every test.
GO       ?= go
BIN      := bin/cryochamber
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
FUZZTIME ?= 20s
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: all build install test demo fuzz bench lint darwin clean man

# How the binary is built, by make build and by the tests (internal/e2e/fixture reads these two
# lines, so that the tests run what ships). Static, without cgo: a dynamically linked binary
# pays the dynamic loader and libc's start at every command (os/user then reads /etc/passwd and
# falls back to $USER, env_user.go; net uses Go's own resolver). The tag leaves out urfave/cli's
# docs.go, whose blackfriday and md2man every command initialised: the man page is generated
# ahead and embedded (man.go; `make man` regenerates it). docs/DESIGN.md, "The binary".
BUILD_ENV   := CGO_ENABLED=0
BUILD_FLAGS := -trimpath -tags=urfave_cli_no_docs

# Where `make install` puts things (a user install: no root needed).
PREFIX   ?= $(HOME)/.local
BINDIR   ?= $(PREFIX)/bin
MANDIR   ?= $(PREFIX)/share/man/man1
BASHCOMP ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMP  ?= $(PREFIX)/share/zsh/site-functions
FISHCOMP ?= $(PREFIX)/share/fish/vendor_completions.d

all: build

build:
	$(BUILD_ENV) $(GO) build $(BUILD_FLAGS) -ldflags '$(LDFLAGS)' -o $(BIN) .

# docs/cryochamber.1, the man page the binary embeds, generated from the help text by urfave/cli
# (TestManPageFileIsCurrent fails until this is run after a change to a command's help).
man:
	$(GO) test -count=1 -run TestManPageFileIsCurrent . -update

# The whole suite: vet, unit tests, and the end-to-end tests against real components (a private
# systemd user manager, a real SMTP server, the agent CLIs, ...). Where a real component cannot
# run here its test skips and says why; CRYO_REQUIRE_E2E=1 (CI sets it) makes that a failure.
# gotestsum (a tool of go.mod) prints a line per package and the output of each failed test,
# then lists every skipped test with its reason; scripts/test-summary.sh adds the counts.
# -parallel 4: the end-to-end tests mostly wait on timers, so four at a time on two CPUs halve
# the run (internal/e2e/binary: 18 to 11 minutes, all passing at load 3 to 9).
test:
	$(GO) vet ./...
	$(GO) tool gotestsum --format pkgname-and-test-fails --format-icons text --format-hide-empty-pkg \
		--post-run-command scripts/test-summary.sh -- -count=1 -parallel 4 -timeout 40m ./...

# The binary in ~/.local/bin (the timers run it by this path: keep it there), the man page and
# the shell completions; then say whether ~/.local/bin is on PATH.
install: build
	install -d "$(BINDIR)" "$(MANDIR)" "$(BASHCOMP)" "$(ZSHCOMP)" "$(FISHCOMP)"
	install -m 0755 $(BIN) "$(BINDIR)/cryochamber"
	"$(BINDIR)/cryochamber" man > "$(MANDIR)/cryochamber.1"
	"$(BINDIR)/cryochamber" completion bash > "$(BASHCOMP)/cryochamber"
	"$(BINDIR)/cryochamber" completion zsh > "$(ZSHCOMP)/_cryochamber"
	"$(BINDIR)/cryochamber" completion fish > "$(FISHCOMP)/cryochamber.fish"
	@echo "installed $(BINDIR)/cryochamber, its man page and shell completions"
	@case ":$$PATH:" in *":$(BINDIR):"*) echo "$(BINDIR) is on your PATH";; \
	  *) echo "$(BINDIR) is NOT on your PATH: add  export PATH=\"$(BINDIR):\$$PATH\"  to your shell profile";; esac

demo: build
	./scripts/demo.sh

# Each fuzz target for $(FUZZTIME); crashers land in testdata/fuzz/ of their package.
fuzz:
	./scripts/fuzz.sh $(FUZZTIME)

bench: build
	./scripts/bench.sh

# gofmt, go vet and staticcheck (pinned; run with its own go.mod, as its authors release it).
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo 'gofmt -w these files:'; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GO) vet $(BUILD_FLAGS) .
	$(GO) run $(STATICCHECK) ./...

# The macOS build must at least compile, vet and pass staticcheck on Linux CI (staticcheck is
# built for this machine and told to check the darwin files).
darwin:
	GOOS=darwin GOARCH=arm64 $(GO) build ./...
	GOOS=darwin GOARCH=arm64 $(BUILD_ENV) $(GO) build $(BUILD_FLAGS) -o /dev/null .
	GOOS=darwin GOARCH=arm64 $(GO) vet ./...
	$(GO) run -exec 'env GOOS=darwin GOARCH=arm64' $(STATICCHECK) ./...

clean:
	rm -rf bin

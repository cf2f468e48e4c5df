package main

import (
	"debug/elf"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
)

// The binary the tests run is built as `make build` builds it (fixture.BuildCommand reads the
// Makefile's BUILD_ENV and BUILD_FLAGS): these check that build for what issue 28 took out of
// every command's start. It is static (no dynamic loader, no libc), and it links neither
// blackfriday nor md2man (urfave/cli's docs.go is left out; the man page is embedded, man.go).
func TestShippedBuildStartsLean(t *testing.T) {
	out, err := exec.Command("go", "version", "-m", fixture.Binary()).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	info := string(out)
	var wrong []string
	for _, want := range []string{"\tbuild\tCGO_ENABLED=0\n", "\tbuild\t-tags=urfave_cli_no_docs\n"} {
		if !strings.Contains(info, want) {
			wrong = append(wrong, "it was not built with "+strings.TrimSpace(want))
		}
	}
	for _, dep := range []string{"github.com/russross/blackfriday", "github.com/cpuguy83/go-md2man"} {
		if strings.Contains(info, "\tdep\t"+dep) {
			wrong = append(wrong, "it links "+dep+" (urfave/cli's docs.go)")
		}
	}
	if len(wrong) > 0 {
		t.Errorf("the binary the tests run is not the lean build: %s\n%s", strings.Join(wrong, "; "), info)
	}
	if runtime.GOOS != "linux" {
		return // a macOS binary always loads libSystem
	}
	f, err := elf.Open(fixture.Binary())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the binary is dynamically linked (it names a program interpreter): every command pays the loader")
		}
	}
}

//go:build !urfave_cli_no_docs

package main

import (
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
)

// The man page is generated here, not at run time (man.go): ToManWithSection is in urfave/cli's
// docs.go, which the shipped build leaves out. These tests need it, so they build without the
// tag urfave_cli_no_docs (`make test`, plain `go test`).

// manPageFile is the generated page that the binary embeds.
const manPageFile = "docs/cryochamber.1"

// manPage is the roff manual page, section 1 (make install puts it in man1). urfave/cli renders
// the app's description as Markdown, where "[CRYO:WAKE ...] (or ...)" reads as a link and loses
// its brackets: the description goes in as a literal block, followed by every command's examples.
func manPage(app *cli.App) (string, error) {
	saved := app.Description
	defer func() { app.Description = saved }()
	var b strings.Builder
	b.WriteString("```\n" + saved + "\n```\n\n# EXAMPLES\n\n```\n")
	for _, c := range app.Commands {
		for _, e := range examples[c.Name] {
			b.WriteString(e + "\n")
		}
	}
	b.WriteString("```")
	app.Description = b.String()
	return app.ToManWithSection(1)
}

// generatedManPage renders the page from the app as newApp builds it and as a command sees it
// when it runs: set up by urfave/cli (Setup adds --help, --version and the help command, as Run
// does before any command).
func generatedManPage(t *testing.T) string {
	t.Helper()
	app := newApp(newEnv(io.Discard, io.Discard))
	app.Setup()
	s, err := manPage(app)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestManPageFileIsCurrent: the embedded page is what the help text renders to. A change to a
// command's usage, flags or examples fails here until the page is regenerated (`make man`, or
// go test -run TestManPageFileIsCurrent -update .), so that `man cryochamber` and `help` agree.
func TestManPageFileIsCurrent(t *testing.T) {
	got := generatedManPage(t)
	if *update {
		if err := os.WriteFile(manPageFile, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	file, err := os.ReadFile(manPageFile)
	if err != nil {
		t.Fatalf("%v (make man writes it)", err)
	}
	if string(file) != got {
		t.Errorf("%s is not what the help text renders to: the help changed and the page was not regenerated; run `make man` (go test -run TestManPageFileIsCurrent -update .)", manPageFile)
	}
	if manPageRoff != string(file) {
		t.Errorf("the embedded page differs from %s: the test binary was built before it changed", manPageFile)
	}
}

// TestManOfTheShippedBinary: `cryochamber man` of the binary the tests run (built as make build
// builds it, without docs.go) prints the page ToManWithSection renders, byte for byte.
func TestManOfTheShippedBinary(t *testing.T) {
	out, err := exec.Command(fixture.Binary(), "man").Output()
	if err != nil {
		t.Fatalf("cryochamber man: %v", err)
	}
	if want := generatedManPage(t); string(out) != want {
		t.Errorf("cryochamber man printed %d bytes that differ from the %d ToManWithSection renders", len(out), len(want))
	}
}

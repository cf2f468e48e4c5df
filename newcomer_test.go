package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cryochamber/cryochamber/internal/e2e"
	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
)

// The things a newcomer tripped on (issue 24), each where the behaviour changed.

func TestHistoryRangeWords(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"yesterday", "today", "-3d", "2026-03-31"} {
		_, _, stderr := runCLI(t, "history", "--dir", dir, "--since", v, "--until", v)
		if strings.Contains(stderr, "--since") || strings.Contains(stderr, "--until") {
			t.Errorf("history --since/--until %s refused:\n%s", v, stderr)
		}
	}
	code, _, stderr := runCLI(t, "history", "--dir", dir, "--since", "+0d")
	if code != exitUsage || !strings.Contains(stderr, "history looks back") || strings.Contains(stderr[strings.Index(stderr, "hint:")+1:], "+0d") {
		t.Errorf("--since +0d: exit %d, want 2, a reason, and no hint suggesting +0d:\n%s", code, stderr)
	}
}

func TestManPage(t *testing.T) {
	code, out, stderr := runCLI(t, "man")
	if code != 0 {
		t.Fatalf("man: exit %d: %s", code, stderr)
	}
	// make install puts it in man1: it must say section 1.
	if !strings.Contains(out, ".TH cryochamber 1") {
		t.Errorf("the man page does not call itself section 1:\n%s", out[:min(len(out), 200)])
	}
	for _, want := range []string{"[CRYO:EXIT 0]", "[CRYO:WAKE 2026-03-08T09:00]", "[CRYO:CMD opencode", "[CRYO:TODO-DONE s3-1]", ".SH EXAMPLES", "cryochamber history --dir ~/plans/x --since 2026-03-01 --until 2026-03-31"} {
		if !strings.Contains(out, want) {
			t.Errorf("the man page lacks %q", want)
		}
	}
}

func TestHelpHasExamples(t *testing.T) {
	for _, cmd := range []string{"init", "start", "status", "history", "send", "pause", "cancel", "ps", "sync", "web"} {
		code, out, _ := runCLI(t, "help", cmd)
		if code != 0 || !strings.Contains(out, "EXAMPLES:") || !strings.Contains(out, "cryochamber "+cmd) {
			t.Errorf("help %s: exit %d, no examples:\n%s", cmd, code, out)
		}
	}
}

// start names what a missing secret is for: the sync channel's IMAP password is not an alert's.
func TestStartNamesWhatTheSecretIsFor(t *testing.T) {
	dir := t.TempDir()
	if code, _, stderr := runCLI(t, "init", dir); code != 0 {
		t.Fatal(stderr)
	}
	toml := `[channels.email]
to = ["me@example.com"]
imap_host = "imap.example.com"
imap_username = "me@example.com"
password_env = "CRYO_TEST_IMAP_PASSWORD"

[email]
host = "smtp.example.com"
from = "cryo@example.com"
`
	if err := os.WriteFile(filepath.Join(dir, "cryo.toml"), []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CRYO_TEST_IMAP_PASSWORD", "") // restored after the test
	os.Unsetenv("CRYO_TEST_IMAP_PASSWORD")
	code, stderr := runBinary(t, "start", "--force", "--dir", dir)
	if code != exitUsage || !strings.Contains(stderr, "CRYO_TEST_IMAP_PASSWORD") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	if strings.Contains(stderr, "alert delivery") || !strings.Contains(stderr, "channels.email") {
		t.Errorf("start misnames what the password is for:\n%s", stderr)
	}
}

// runBinary runs the built binary (start refuses to arm timers for a test binary); it returns
// the exit status and what it printed on stderr.
func runBinary(t *testing.T, args ...string) (int, string) {
	t.Helper()
	r := fixture.Cmd{Env: os.Environ()}.Run(t, args...)
	return r.Code, r.Stderr
}

// The bash completion script, sourced in a real bash, completes flags and completion's shells.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	complete := func(words ...string) string {
		t.Helper()
		script := `source <(cryochamber completion bash)
COMP_WORDS=(` + strings.Join(words, " ") + `)
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
_cryochamber_complete
echo "${COMPREPLY[*]}"`
		cmd := exec.Command(bash, "-c", script)
		cmd.Env = append(os.Environ(), "PATH="+fixture.BinDir()+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", words, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for _, c := range []struct {
		words []string
		want  []string
	}{
		{[]string{"cryochamber", "status", "--"}, []string{"--dir", "--json", "--lines"}},
		{[]string{"cryochamber", "status", "--j"}, []string{"--json"}},
		{[]string{"cryochamber", "history", "--s"}, []string{"--since"}},
		{[]string{"cryochamber", "completion", "''"}, []string{"bash", "zsh", "fish"}},
		{[]string{"cryochamber", "st"}, []string{"start", "status"}},
		{[]string{"cryochamber", "-C", "x", "pause", "--u"}, []string{"--until"}},
		{[]string{"cryochamber", "todo", "''"}, []string{"list", "done", "remove"}},
		{[]string{"cryochamber", "todo", "list", "--j"}, []string{"--json"}},
	} {
		got := strings.Fields(complete(c.words...))
		for _, w := range c.want {
			if !slices.Contains(got, w) {
				t.Errorf("%v<TAB>: %v, want %s among them", c.words, got, w)
			}
		}
		if c.words[len(c.words)-1] == "--j" && len(got) != 1 {
			t.Errorf("%v<TAB>: %v, want only --json", c.words, got)
		}
	}
}

// make demo ends with a command to read the whole log: it must work when pasted in the shell
// that ran the demo, also where the demo started its own user manager with its own HOME.
func TestDemoLastHint(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo takes a minute")
	}
	if exec.Command("systemctl", "--user", "show-environment").Run() != nil && (os.Getuid() != 0 || !fixture.Exists("/lib/systemd/systemd")) {
		e2e.Skipf(t, "the demo needs a systemd user manager, or root to start a private one")
	}
	root, _ := os.Getwd()
	cmd := exec.Command("sh", filepath.Join(root, "scripts", "demo.sh"))
	cmd.Env = append(os.Environ(), "CRYOCHAMBER="+fixture.Binary(), "TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	last := lines[len(lines)-1]
	hint, ok := strings.CutPrefix(last, "demo: the whole log: ")
	if !ok {
		t.Fatalf("the demo's last line is %q", last)
	}
	got, err := exec.Command("sh", "-c", hint).CombinedOutput()
	if err != nil || !strings.Contains(string(got), "--- CRYO END 3") {
		t.Errorf("the demo's last hint %q: %v\n%s", hint, err, got)
	}
}

func TestVersionAndDidYouMean(t *testing.T) {
	code, out, _ := runCLI(t, "version")
	if code != 0 || !strings.HasPrefix(out, "cryochamber version ") {
		t.Errorf("version: exit %d %q", code, out)
	}
	code, _, stderr := runCLI(t, "stauts")
	if code != exitUsage || !strings.Contains(stderr, `cryochamber: unknown command "stauts"`) || !strings.Contains(stderr, "hint: did you mean `cryochamber status`?") {
		t.Errorf("a misspelt command: exit %d\n%s", code, stderr)
	}
}

// --json says what it prints: history, ps and receive print an array; status one object, whose
// state and phase are told apart.
func TestJSONFlagSaysWhatItPrints(t *testing.T) {
	for cmd, want := range map[string]string{"history": "a JSON array", "ps": "a JSON array", "receive": "a JSON array", "status": "one JSON object", "validate": "one JSON object"} {
		_, out, _ := runCLI(t, "help", cmd)
		if !strings.Contains(out, want) {
			t.Errorf("help %s: --json does not say %q:\n%s", cmd, want, out)
		}
	}
	_, out, _ := runCLI(t, "help", "status")
	if !strings.Contains(out, "state") || !strings.Contains(out, "phase") {
		t.Errorf("help status does not tell state from phase:\n%s", out)
	}
}

func TestTemplateHasSlowRetry(t *testing.T) {
	dir := t.TempDir()
	if code, _, stderr := runCLI(t, "init", dir); code != 0 {
		t.Fatal(stderr)
	}
	b, err := os.ReadFile(filepath.Join(dir, "cryo.toml"))
	if err != nil || !strings.Contains(string(b), `# slow_retry = "6h"`) {
		t.Errorf("the cryo.toml template lacks slow_retry: %v\n%s", err, b)
	}
}

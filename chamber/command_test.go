package chamber

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cryochamber/cryochamber/agent"
)

// TestCommandFiles: the files an interpreter in the operator's lines may run are found, so that
// they are pinned like a program; inline code, modules, flags and placeholders name none, and a
// plain step a CMD chose has none.
func TestCommandFiles(t *testing.T) {
	for _, c := range []struct {
		command, args []string // an agent command (the agent line, an [agents.NAME] table)
		plain         []string // a plain step a CMD chose
		want          []string
	}{
		{command: []string{"./agent.sh"}},
		{command: []string{"opencode", "run"}}, // not an interpreter
		{command: []string{"sh", "agent.sh"}, want: []string{"agent.sh"}},
		{command: []string{"/bin/bash", "-eu", "./run.sh", "x"}, want: []string{"./run.sh", "x"}},
		{command: []string{"python3.12", "-u", "/srv/agent.py"}, want: []string{"/srv/agent.py"}},
		{command: []string{"python3", "-W", "ignore", "agent.py"}, want: []string{"ignore", "agent.py"}},
		{command: []string{"node", "--require", "./hook.js", "wrap.js"}, want: []string{"./hook.js", "wrap.js"}},
		{command: []string{"python3"}, args: []string{"wrap.py"}, want: []string{"wrap.py"}},
		{command: []string{"python3", "-m", "agent"}, want: []string{"agent.py", "agent/__init__.py", "agent/__main__.py"}},
		{command: []string{"python3", "agent.py", "-c", "x"}, want: []string{"agent.py"}},
		{command: []string{"sh", "-c", "echo hi"}},
		{command: []string{"env"}, args: []string{"-u", "X"}},             // runs nothing
		{command: []string{"timeout", "600"}, args: []string{"opencode"}}, // no file
		{command: []string{"perl", "-e", "print 1"}},
		{command: []string{"bash"}},
		{command: []string{"python3", "wrap.py", "{prompt}"}, want: []string{"wrap.py"}},
		{command: []string{"python3", "{prompt_file}"}},
		{plain: []string{"python3", "evil.py"}},
	} {
		cmd := Command{Words: c.plain}
		if c.command != nil {
			cmd = Command{Words: c.command, Agent: &agent.Spec{Command: c.command, Args: c.args}}
		}
		if got := cmd.Files(); !slices.Equal(got, c.want) {
			t.Errorf("%q %q %q: Files() = %q, want %q", c.command, c.args, c.plain, got, c.want)
		}
	}
}

// TestWrapperLines: the nine agent lines of issue 22 (item 4), of which only the first had its
// code pinned before: under each, the file the line really runs is found, so that it is pinned.
// (Before the change Files() found nothing under env, stdbuf, timeout, nice, -c and -m.) More
// wrappers and their option forms follow.
func TestWrapperLines(t *testing.T) {
	mod := []string{"mod.py", "mod/__init__.py", "mod/__main__.py"}
	for _, c := range []struct {
		line string
		want []string
	}{
		{"sh agent.sh", []string{"agent.sh"}},
		{"env sh agent.sh", []string{"agent.sh"}},
		{"stdbuf -oL sh agent.sh", []string{"agent.sh"}},
		{"timeout 600 sh agent.sh", []string{"agent.sh"}},
		{"nice -n 5 sh agent.sh", []string{"agent.sh"}},
		{"env VAR=1 python3 agent.py", []string{"agent.py"}},
		{"sh -c ./agent.sh", []string{"./agent.sh"}},
		{"python3 -m mod", mod},
		{"python3 -m opsagent", []string{"opsagent.py", "opsagent/__init__.py", "opsagent/__main__.py"}},
		// more forms
		{"env ./agent.sh", []string{"./agent.sh"}},
		{"env -i PATH=/bin HOME=/h ./agent.sh --flag", []string{"./agent.sh"}},
		{"env - -- A=1 ./agent.sh", []string{"./agent.sh"}},
		{"env -u HOME --unset=X --chdir /tmp ./agent.sh", []string{"./agent.sh"}},
		{`env -S "sh agent.sh"`, []string{"agent.sh"}},
		{`env --split-string="python3 agent.py" extra`, []string{"agent.py", "extra"}},
		{"nice -5 ./agent.sh", []string{"./agent.sh"}},
		{"nice -n5 --adjustment=3 ./agent.sh", []string{"./agent.sh"}},
		{"timeout -k 5s --signal=TERM --preserve-status 10m ./agent.sh", []string{"./agent.sh"}},
		{"timeout -k5 600 python3 -u agent.py", []string{"agent.py"}},
		{"stdbuf -o L -e0 --input=0 ./agent.sh", []string{"./agent.sh"}},
		{"nohup setsid -w ionice -c 3 -n7 ./agent.sh", []string{"./agent.sh"}},
		{"nohup nice timeout 1h env A=1 stdbuf -oL sh agent.sh", []string{"agent.sh"}},
		{`bash -ec "sh run.sh"`, []string{"run.sh"}},
		{`sh -c "exec env python3 -m mod"`, mod},
		{"python3 -Im pkg.sub", []string{"pkg/__init__.py", "pkg/sub.py", "pkg/sub/__init__.py", "pkg/sub/__main__.py"}},
		{"python3 -c 'import x'", nil},
		{"env opencode run", nil},
		{"timeout 600 /usr/bin/opencode run", []string{"/usr/bin/opencode"}}, // outside: not pinned
	} {
		words, err := SplitAgentCommand(c.line)
		if err != nil {
			t.Fatal(err)
		}
		cmd := Command{Words: words, Agent: &agent.Spec{Command: words}}
		if got := cmd.Files(); !slices.Equal(got, c.want) {
			t.Errorf("%s: Files() = %q, want %q", c.line, got, c.want)
		}
	}
}

// TestPythonModuleWarning: `python -m` without -I or -P is warned about (the chamber is first
// on sys.path); with either, or for a script, it is not.
func TestPythonModuleWarning(t *testing.T) {
	for line, warn := range map[string]bool{
		"python3 -m mod":             true,
		"env A=1 python3 -u -m mod":  true,
		"python3 -W ignore -m mod":   true,
		"timeout 60 python3.12 -m x": true,
		"python3 -I -m mod":          false,
		"python3 -P -m mod":          false,
		"python3 -Im mod":            false,
		"python3 agent.py -m x":      false,
		"python3 -c 'x' -m y":        false,
		"sh -m agent.sh":             false,
	} {
		words, _ := SplitAgentCommand(line)
		got := pythonModuleWarning(words)
		if (got != "") != warn {
			t.Errorf("%s: warning %q, want one: %v", line, got, warn)
		}
		if warn && !strings.Contains(got, "add -P (Python 3.11+) or -I") {
			t.Errorf("%s: the warning does not say what to do: %s", line, got)
		}
	}
}

// TestWrappedProgramOnPath: a program a wrapper runs by name (`env mytool`, `timeout 5
// python3 a.py`) that the captured PATH finds in the chamber is pinned, and one planted there
// later is refused. (Before the change only the wrapper, outside the chamber, was looked at.)
func TestWrappedProgramOnPath(t *testing.T) {
	r := testRunner(t, "agent = \"env mytool\"\n", t0)
	bin := filepath.Join(r.dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "mytool"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.envLoaded, r.envVars = true, []string{"PATH=" + bin + ":/usr/bin:/bin"}
	if got := r.programsInChamber(); !slices.Contains(got, filepath.Join(bin, "mytool")) {
		t.Errorf("programsInChamber = %q, want %s in it", got, filepath.Join(bin, "mytool"))
	}
	// timeout 5 python3 a.py: a python3 planted in the chamber's bin later is refused.
	words := []string{"timeout", "5", "python3", "a.py"}
	cmd := Command{Words: words, Agent: &agent.Spec{Command: words}}
	r.pins = &pinFile{Programs: map[string]string{}}
	if err := r.checkPinned("/usr/bin/timeout", cmd); err != nil {
		t.Fatalf("nothing planted yet: %v", err)
	}
	if err := os.WriteFile(filepath.Join(bin, "python3"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := r.checkPinned("/usr/bin/timeout", cmd); err == nil || !strings.Contains(err.Error(), "python3 is inside the chamber but was not there") {
		t.Errorf("a python3 planted on the PATH in the chamber: %v", err)
	}
}

package chamber

import (
	"testing"

	"github.com/cryochamber/cryochamber/agent"
)

// TestCommandScript: the file an interpreter runs is found in the operator's lines, so that it
// is pinned like a program; inline code, modules and placeholders name no file.
func TestCommandScript(t *testing.T) {
	for _, c := range []struct {
		words []string
		spec  []string // an [agents.NAME] command instead of words
		want  string
	}{
		{words: []string{"./agent.sh"}, want: ""},
		{words: []string{"opencode", "run"}, want: ""}, // not an interpreter
		{words: []string{"sh", "agent.sh"}, want: "agent.sh"},
		{words: []string{"/bin/bash", "-eu", "./run.sh", "x"}, want: "./run.sh"},
		{words: []string{"python3", "agent.py"}, want: "agent.py"},
		{words: []string{"python3.12", "-u", "/srv/agent.py"}, want: "/srv/agent.py"},
		{words: []string{"node", "wrap.js"}, want: "wrap.js"},
		{words: []string{"python3", "-m", "agent"}, want: ""},
		{words: []string{"sh", "-c", "echo hi"}, want: ""},
		{words: []string{"perl", "-e", "print 1"}, want: ""},
		{words: []string{"bash"}, want: ""},
		{words: []string{"bash", "-x"}, want: ""},
		{spec: []string{"python3", "wrap.py", "{prompt}"}, want: "wrap.py"},
		{spec: []string{"python3", "{prompt_file}"}, want: ""},
	} {
		cmd := Command{Words: c.words}
		if c.spec != nil {
			cmd = Command{Agent: &agent.Spec{Command: c.spec}}
		}
		if got := cmd.Script(); got != c.want {
			t.Errorf("%q %q: Script() = %q, want %q", c.words, c.spec, got, c.want)
		}
	}
}

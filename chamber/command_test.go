package chamber

import (
	"slices"
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
		{command: []string{"python3", "-m", "agent"}},
		{command: []string{"python3", "agent.py", "-c", "x"}, want: []string{"agent.py"}},
		{command: []string{"sh", "-c", "echo hi"}},
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

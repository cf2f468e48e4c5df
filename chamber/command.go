package chamber

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/cryochamber/cryochamber/agent"
	"github.com/cryochamber/cryochamber/marker"
)

// Command is what one session runs: an agent with a task, or a plain step.
type Command struct {
	Line  string      // the command line as written (a CMD marker, or the agent line)
	Words []string    // Line split with shell word rules
	Agent *agent.Spec // nil for a plain step that prints its own markers
	Task  string      // for an agent: the session's task ("" = continue the plan)
}

// Program is the executable the command starts.
func (c Command) Program() string {
	if c.Agent != nil {
		return agent.Program(*c.Agent)
	}
	return c.Words[0]
}

// interpreters run the files named by their arguments: in the operator's
// `agent = "python3 agent.py"` that file is as much the program as python3 is.
var interpreters = map[string]bool{
	"sh": true, "bash": true, "dash": true, "ksh": true, "zsh": true, "fish": true,
	"python": true, "node": true, "nodejs": true, "deno": true, "bun": true, "ruby": true,
	"perl": true, "php": true, "lua": true, "Rscript": true, "tclsh": true, "pwsh": true,
}

// Files lists the words of the operator's own lines (an agent command: the agent line, an
// [agents.NAME] table with its args) that may name a file it runs or loads: under any
// wrappers (`env VAR=1`, `timeout 600`, `nice -n 5`, ...: wrappers.go), the program when it
// is a path, and for an interpreter (`python3 agent.py`, `node --require ./hook.js wrap.js`)
// every word after it that is not a flag or a placeholder, the command line of a shell's -c,
// and the files of a Python -m module; none for other inline code (-e). A plain step a CMD
// chose has none: an interpreter the operator allowed runs what the agent gives it.
func (c Command) Files() []string {
	if c.Agent == nil {
		return nil
	}
	words := append(append([]string(nil), c.Agent.Command...), c.Agent.Args...)
	if len(words) < 2 {
		return nil
	}
	return lineFiles(words, 0)
}

// SplitAgentCommand splits an agent line (`agent` in cryo.toml, `start --agent`) with the same
// shell word rules as CMD; no shell ever runs it.
func SplitAgentCommand(line string) ([]string, error) {
	words, err := marker.SplitCommand(line)
	if err != nil {
		return nil, err
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("empty command")
	}
	return words, nil
}

// agentSpec is the agent named name, merging a preset with an [agents.NAME] table of the same
// name. ok is false when name is neither.
func (c *Config) agentSpec(name string) (agent.Spec, bool) {
	spec, preset := agent.Presets()[name]
	t, table := c.Agents[name]
	if !preset && !table {
		return agent.Spec{}, false
	}
	if table {
		spec.Name = name
		if len(t.Command) > 0 {
			spec.Command = slices.Clone(t.Command)
			spec.Usage = "" // the operator's own command prints what it prints
		}
		if t.Stdin != nil {
			spec.Stdin = *t.Stdin
		}
		spec.Args = append(slices.Clone(spec.Args), t.Args...)
		keys := make([]string, 0, len(t.Env))
		for k := range t.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			spec.Env = append(spec.Env, k+"="+t.Env[k])
		}
	}
	return spec, true
}

// AgentLine resolves the agent line (`agent` in cryo.toml or `start --agent`): a preset or
// [agents.NAME] name followed by extra arguments, or a custom command line whose words are the
// argv template.
func (c *Config) AgentLine(line string) (Command, error) {
	words, err := SplitAgentCommand(line)
	if err != nil {
		return Command{}, fmt.Errorf("agent %q: %w", line, err)
	}
	if spec, ok := c.agentSpec(words[0]); ok {
		spec.Args = append(spec.Args, words[1:]...)
		return Command{Line: line, Words: words, Agent: &spec}, nil
	}
	return Command{Line: line, Words: words, Agent: &agent.Spec{Command: words}}, nil
}

// ResolveCMD resolves the command line of a CMD marker against the configuration. If its program
// is a configured agent, the remaining words are the task; any other program must be allowed and
// runs as a plain step. agentLine is the chamber's agent line (a CMD may name its program).
func (c *Config) ResolveCMD(line string, words []string, agentLine string) (Command, error) {
	if len(words) == 0 {
		return Command{}, fmt.Errorf("CMD is empty")
	}
	prog := words[0]
	if !c.Allowed(prog, agentLine) {
		return Command{}, &NotAllowedError{Program: prog, Allowed: c.AllowedList(agentLine)}
	}
	task := strings.Join(words[1:], " ")
	if al, err := c.AgentLine(agentLine); err == nil && al.Agent != nil && al.Words[0] == prog {
		// The chamber's own agent, by its name: keep the agent line's extra arguments
		// (`agent = "claude --model opus"`); the CMD's words are only the task.
		return Command{Line: line, Words: words, Agent: al.Agent, Task: task}, nil
	}
	if spec, ok := c.agentSpec(prog); ok {
		return Command{Line: line, Words: words, Agent: &spec, Task: task}, nil
	}
	return Command{Line: line, Words: words}, nil
}

// NotAllowedError is a CMD naming a program the operator did not allow.
type NotAllowedError struct {
	Program string
	Allowed []string
}

func (e *NotAllowedError) Error() string {
	return fmt.Sprintf("CMD program %q is not allowed (allowed: %s); a marker may only name a configured agent or a program in allowed_commands",
		e.Program, strings.Join(e.Allowed, ", "))
}

// AllowedList is the programs a CMD may name: allowed_commands when set, else only the chamber's
// own agent, which is always allowed. (Every preset by default would let one CMD move a
// sandboxed codex chamber onto a CLI without that sandbox.)
func (c *Config) AllowedList(agentLine string) []string {
	list := slices.Clone(c.AllowedCommands)
	if words, err := SplitAgentCommand(agentLine); err == nil {
		list = append(list, words[0])
	}
	sort.Strings(list)
	return slices.Compact(list)
}

// Allowed reports whether a CMD may name prog.
func (c *Config) Allowed(prog, agentLine string) bool {
	return slices.Contains(c.AllowedList(agentLine), prog)
}

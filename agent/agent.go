// Package agent knows how to run one AI agent session: the built-in presets (opencode, claude,
// codex), how a prompt reaches the agent (stdin, a placeholder in argv, or the last argument),
// the session prompt that teaches the marker protocol, and running the agent in its own process
// group with a timeout while its output streams to the caller.
//
// It never decides what happens after a session (markers, retries, timers belong to the chamber),
// never runs anything through a shell, and never reads the environment or $HOME: the caller
// passes the environment, paths and the current time in. It reads the clock only to measure how
// long a session ran and to bound the wait for a process group to end, never to decide a time.
package agent

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cryochamber/cryochamber/internal/envvars"
)

// Placeholders an argv template may contain. A word may hold other text around them
// ("--prompt={prompt}").
const (
	PromptPlaceholder     = "{prompt}"
	PromptFilePlaceholder = "{prompt_file}"
)

// MaxArgPrompt is the largest prompt that goes into argv as is. Linux caps one argument at
// 128 KiB (MAX_ARG_STRLEN) and all of argv plus the environment at ARG_MAX; a larger prompt is
// replaced in argv by a short text that points at the prompt file.
const MaxArgPrompt = 100 << 10

// Spec is how to run one agent: a preset, an [agents.NAME] table of cryo.toml, or a custom
// command line from `agent = "..."`.
type Spec struct {
	// Name is "opencode", "claude", "codex", an [agents.NAME] key, or "" for a custom command.
	Name string
	// Command is the argv template; words may contain {prompt} or {prompt_file}.
	Command []string
	// Stdin: the prompt goes on stdin, which is then closed (some CLIs hang on an open stdin).
	Stdin bool
	// Args are extra arguments from cryo.toml, inserted after Command (before an appended
	// prompt). They may contain the placeholders too.
	Args []string
	// Env is extra environment ("K=V") from cryo.toml.
	Env []string
	// DefaultEnv is environment ("K=V") the preset sets. The session's own environment (the
	// variables captured through agent_env) and Env override it, key by key: the operator
	// always has the last word.
	DefaultEnv []string
	// Usage names the JSON output form the command prints ("claude", "codex", "opencode"; see
	// usage.go): its text is read out of it with UsageWriter, and its usage recorded. "" for
	// plain text.
	Usage string
}

// Presets returns the built-in agents, keyed by name. Each call returns a fresh map, so a
// caller may merge cryo.toml's [agents.NAME] tables into it.
//
// Each preset was run against the real CLI (Claude Code 2.1.330, Codex CLI 0.169.0, opencode
// 1.18.33; see docs/AGENTS.md). What they share:
//   - The prompt goes on stdin, which is then closed: all three read a piped prompt to its end
//     (one argv word is capped at 128 KiB on Linux), and an open stdin makes codex and opencode
//     wait forever.
//   - Each prints only its final message on stdout. Progress, tool activity and errors go to
//     stderr (Claude prints its API errors on stdout); Codex also echoes the whole prompt, marker
//     examples included, to stderr. That is why markers are read from stdout only.
//   - Unattended, nobody answers a permission prompt: what would ask is refused. Each preset
//     grants what the protocol needs (editing NOTES.md in the chamber), and a refusal must
//     cost one tool call, never the session. cryo.toml's `[agents.NAME] args` come after the
//     preset's words, and for each of these flags a later one wins, so args can widen or
//     narrow it; `[agents.NAME] env` (and agent_env) override the preset's DefaultEnv.
//
// Per CLI (docs/AGENTS.md, "What each CLI allows", has the whole table, each row proved by
// agents_e2e_test.go):
//   - opencode: `opencode run`. `--title` spares a second model request per session that
//     would only name the session. Its defaults allow everything (its shell included, which
//     reads and writes anywhere the user can) except that its file tools ask before touching
//     a file outside the working directory (external_directory), before a third identical
//     tool call (doom_loop) and before reading a .env file. `opencode run` rejects every ask
//     and then ends the session with nothing on stdout: a plan whose work is in another
//     directory (the README's own example) failed every session. So the preset's
//     OPENCODE_PERMISSION allows external_directory, which gives the file tools no more than
//     the shell already had, and its OPENCODE_CONFIG_CONTENT sets
//     experimental.continue_loop_on_deny, so that an ask that remains (an operator's rule,
//     doom_loop, .env) is refused and the session goes on, as with the other two CLIs. Both
//     are environment, not a file in the chamber, where the agent itself could change them.
//   - claude: `claude -p --output-format text`. Without a permission mode, -p refuses every file
//     edit ("you haven't granted it yet"); `--permission-mode acceptEdits` lets it edit files in
//     the chamber and run simple file commands there, and still refuses other commands and any
//     file outside the chamber, reads included (`--add-dir=DIR` in args adds a directory).
//   - codex: `codex exec --skip-git-repo-check` (a chamber need not be a git repository). exec
//     never asks for approval, and its default sandbox is read-only, so `-c
//     sandbox_mode="workspace-write"` lets it write in the chamber (and /tmp) without network.
//     It is a -c override rather than `--sandbox`, which codex refuses to take twice: args
//     may still say `--sandbox danger-full-access`. The sandbox reads anywhere; `--add-dir DIR`
//     in args makes DIR writable too.
func Presets() map[string]Spec {
	return map[string]Spec{
		"opencode": {Name: "opencode", Command: []string{"opencode", "run", "--title", "cryochamber", "--format", "json"}, Stdin: true,
			DefaultEnv: []string{OpencodePermission, OpencodeConfigContent}, Usage: "opencode"},
		"claude": {Name: "claude", Command: []string{"claude", "-p", "--output-format", "json", "--permission-mode", "acceptEdits"}, Stdin: true, Usage: "claude"},
		"codex":  {Name: "codex", Command: []string{"codex", "exec", "--skip-git-repo-check", "--json", "-c", `sandbox_mode="workspace-write"`}, Stdin: true, Usage: "codex"},
	}
}

// The opencode preset's DefaultEnv (see Presets). opencode 1.18 merges OPENCODE_PERMISSION over
// the top-level permission of every config file, and OPENCODE_CONFIG_CONTENT over the global
// and project files (an agent's own permission in a file, agent.build.permission, still
// applies after both). An operator who sets either variable (agent_env or [agents.opencode]
// env) replaces the preset's value, so should keep what they need of it.
const (
	OpencodePermission    = `OPENCODE_PERMISSION={"external_directory":"allow"}`
	OpencodeConfigContent = `OPENCODE_CONFIG_CONTENT={"experimental":{"continue_loop_on_deny":true}}`
)

// Program is the executable that must resolve on PATH (Command[0]), or "" if there is none.
func Program(s Spec) string {
	if len(s.Command) == 0 {
		return ""
	}
	return s.Command[0]
}

// Vars are the CRYO_* variables every agent process gets.
type Vars struct {
	Dir        string // CRYO_DIR: the chamber
	Session    int    // CRYO_SESSION
	PromptFile string // CRYO_PROMPT_FILE: where the caller wrote the full prompt; also {prompt_file}
}

// Invocation is the argv, stdin and environment of one run.
type Invocation struct {
	Argv  []string
	Stdin []byte // nil: /dev/null
	Env   []string
}

// Invocation builds the argv, stdin and environment that run prompt with this agent. The caller
// writes the full prompt to vars.PromptFile before running it: {prompt_file} and an over-long
// prompt point there.
//
// With Stdin the prompt goes on stdin and is never appended to argv. Placeholders are replaced
// in Command and Args in every case, in one pass (a prompt that itself contains "{prompt_file}"
// is left alone). Without Stdin and without any placeholder, the prompt is the last argument.
// The environment is Spec.DefaultEnv, then base, then Spec.Env, then the CRYO_* variables; a
// later value wins and each key appears once, at the position of its first occurrence.
func (s Spec) Invocation(prompt string, base []string, vars Vars) Invocation {
	argPrompt := prompt
	if len(prompt) > MaxArgPrompt || strings.IndexByte(prompt, 0) >= 0 {
		// execve refuses a NUL inside an argument and a word over 128 KiB; the file holds it all.
		argPrompt = longPromptText(vars.PromptFile)
	}
	repl := strings.NewReplacer(PromptFilePlaceholder, vars.PromptFile, PromptPlaceholder, argPrompt)

	words := make([]string, 0, len(s.Command)+len(s.Args)+1)
	words = append(words, s.Command...)
	words = append(words, s.Args...)
	placeholder := false
	for i, w := range words {
		if strings.Contains(w, PromptPlaceholder) || strings.Contains(w, PromptFilePlaceholder) {
			placeholder = true
			words[i] = repl.Replace(w)
		}
	}
	inv := Invocation{Argv: words}
	switch {
	case s.Stdin:
		inv.Stdin = []byte(prompt)
	case !placeholder && len(words) > 0:
		inv.Argv = append(inv.Argv, argPrompt)
	}

	env := make([]string, 0, len(s.DefaultEnv)+len(base)+len(s.Env)+3)
	env = append(env, s.DefaultEnv...)
	env = append(env, base...)
	env = append(env, s.Env...)
	env = append(env,
		"CRYO_DIR="+vars.Dir,
		"CRYO_SESSION="+strconv.Itoa(vars.Session),
		"CRYO_PROMPT_FILE="+vars.PromptFile,
	)
	inv.Env = dedupEnv(env)
	return inv
}

// longPromptText stands in for a prompt too long for argv.
func longPromptText(file string) string {
	return fmt.Sprintf("Your full instructions for this cryochamber session are too long for the "+
		"command line. They are in the file %s (also named by the environment variable "+
		"CRYO_PROMPT_FILE). Read that whole file first and follow it.", file)
}

// dedupEnv keeps one entry per key: the last value, at the position of the first occurrence.
// An entry without "=" is its own key.
func dedupEnv(env []string) []string {
	idx := make(map[string]int, len(env))
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k := kv
		if i := strings.IndexByte(kv, '='); i >= 0 {
			k = kv[:i]
		}
		if j, ok := idx[k]; ok {
			out[j] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}

// lookupEnv returns the value of the last entry for key in env (the one lookup, envvars).
var lookupEnv = envvars.Lookup

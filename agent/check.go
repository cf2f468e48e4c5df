package agent

import (
	"github.com/cryochamber/cryochamber/internal/sandbox"

	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// CheckTimeout bounds `PROGRAM --version` in Check. The three CLIs answer in well under a
// second; one that takes longer is waiting for something (a first-run prompt, a login, an update).
const CheckTimeout = 10 * time.Second

// checkTimeout is CheckTimeout, shortened by tests.
var checkTimeout = CheckTimeout

// maxCheckOutput is how much of what `--version` printed Check keeps (the end of it).
const maxCheckOutput = 4 << 10

// cliHelp is what Check advises for one of the agent CLIs it knows, by program name.
type cliHelp struct {
	name    string // as people call it
	install string
	auth    string
}

// knownCLIs are the agent CLIs of the presets. Only these are run with --version: for any other
// program, --version is not a promise (a script could take it for its prompt and act on it).
var knownCLIs = map[string]cliHelp{
	"claude": {
		name:    "Claude Code",
		install: "npm install -g @anthropic-ai/claude-code",
		auth: "for unattended sessions create a long-lived token with `claude setup-token`, export it as " +
			"CLAUDE_CODE_OAUTH_TOKEN and list it in agent_env (or use ANTHROPIC_API_KEY); see docs/AGENTS.md",
	},
	"codex": {
		name:    "Codex CLI",
		install: "npm install -g @openai/codex (its launcher runs node: node must be on the same PATH)",
		auth: "log in once with `printenv OPENAI_API_KEY | codex login --with-api-key` (kept in ~/.codex/auth.json), " +
			"or list CODEX_API_KEY in agent_env; see docs/AGENTS.md",
	},
	"opencode": {
		name:    "opencode",
		install: "npm install -g opencode-ai",
		auth: "log in once with `opencode auth login`, or list the provider's API key variable " +
			"(ANTHROPIC_API_KEY, OPENAI_API_KEY, ...) in agent_env; see docs/AGENTS.md",
	},
}

// CheckError is why an agent cannot run. Error says what is wrong; Hint says what to do about
// it: show both (the CLI prints Hint on its `hint:` line).
type CheckError struct {
	Program string // the program as configured ("claude", "./agent.sh")
	Problem string // what is wrong, one sentence
	Output  string // the end of what `--version` printed, if it ran
	Hint    string // what to do
	Err     error  // the cause, if any (*NotFoundError, a context error)
}

func (e *CheckError) Error() string {
	msg := fmt.Sprintf("agent %q %s", e.Program, e.Problem)
	if e.Output != "" {
		msg += ": " + e.Output
	}
	return msg
}

func (e *CheckError) Unwrap() error { return e.Err }

// Check is what `start` runs before session 1, so that a chamber never hibernates with an agent
// that cannot run. The program must resolve on the PATH of env (the environment the agent will
// get: the captured PATH, not the caller's) or relative to dir. If it is one of the agent CLIs
// of the presets (claude, codex, opencode, by base name), it must also run headless and answer
// `--version` within CheckTimeout: stdin is /dev/null, the working directory is dir, and it runs
// in its own process group, which is killed afterwards. Spec.DefaultEnv and Spec.Env are
// applied as for a session.
//
// A failure is a *CheckError that says what to fix: the install command, the PATH that was
// searched, the login a headless service needs.
func Check(ctx context.Context, s Spec, env []string, dir string) error {
	return CheckIn(ctx, s, env, dir, nil)
}

// CheckIn is Check with `--version` run in cage (nil: unconfined): it runs in the chamber, where
// the agent may have planted what a CLI loads at start-up, so it gets the sessions' walls.
func CheckIn(ctx context.Context, s Spec, env []string, dir string, cage *sandbox.Cage) error {
	prog := Program(s)
	if prog == "" {
		return &CheckError{Program: s.Name, Problem: "has no command line",
			Hint: "set `agent` in cryo.toml, or `command` in its [agents.NAME] table"}
	}
	env = dedupEnv(append(append(append([]string(nil), s.DefaultEnv...), env...), s.Env...))
	help, known := knownCLIs[filepath.Base(prog)]

	path, err := lookPath(prog, env, dir)
	if err != nil {
		ce := &CheckError{Program: prog, Err: err}
		var nf *NotFoundError
		switch {
		case errors.As(err, &nf):
			pathVar, _ := lookupEnv(env, "PATH")
			ce.Problem = fmt.Sprintf("is not on the PATH the agent runs with (%s)", pathVar)
			where := "if `which " + prog + "` finds it in your shell, run `cryochamber start` from that shell " +
				"(PATH is captured at start); otherwise add its directory to PATH"
			if known {
				ce.Hint = "install " + help.name + ": " + help.install + "; " + where + " (npm puts it in `$(npm prefix -g)/bin`); then " + help.auth
			} else {
				ce.Hint = "install it, or give its absolute path in cryo.toml; " + where
			}
		default:
			// Found but not runnable, or a path that does not exist: the message says which.
			ce.Problem = "cannot run: " + err.Error()
			ce.Hint = "fix the agent's path in cryo.toml (`agent`, or `command` in [agents.NAME]); relative paths are relative to the chamber"
		}
		return ce
	}
	if !known {
		return nil
	}

	out := &tailBuffer{max: maxCheckOutput}
	res := Exec(ctx, Run{
		Invocation: Invocation{Argv: []string{path, "--version"}, Env: env},
		Dir:        dir,
		Cage:       cage,
		Timeout:    checkTimeout,
		Grace:      time.Second,
		Stdout:     out,
		Stderr:     out,
	})
	version := oneLine(out.String())
	shown := prog + " --version"
	switch {
	case res.Canceled:
		return &CheckError{Program: prog, Problem: "check interrupted", Err: ctx.Err()}
	case res.Err != nil:
		return &CheckError{Program: prog, Problem: "cannot be started", Err: res.Err,
			Output: res.Err.Error(), Hint: "reinstall " + help.name + ": " + help.install}
	case res.TimedOut:
		return &CheckError{Program: prog, Output: version,
			Problem: fmt.Sprintf("did not answer `%s` within %s (run headless, stdin closed)", shown, checkTimeout),
			Hint: "run `" + shown + "` in a terminal as the user the timers run as: it may wait for a first-run " +
				"prompt, an update or a login that no one answers in a service; " + help.auth}
	case res.ExitCode != 0:
		ce := &CheckError{Program: prog, Output: version,
			Problem: fmt.Sprintf("failed `%s` (%s)", shown, exitText(res)),
			Hint:    "run `" + shown + "` in a terminal and fix what it says; reinstall with: " + help.install}
		if strings.Contains(out.String(), "node") && strings.Contains(out.String(), "No such file") {
			ce.Hint = prog + " is started by node, which is not on the PATH the agent runs with: install node " +
				"or add its directory to PATH, and run `cryochamber start` from a shell where `" + shown + "` works"
		}
		return ce
	case !strings.ContainsFunc(version, unicode.IsDigit):
		return &CheckError{Program: prog, Output: version,
			Problem: fmt.Sprintf("printed no version for `%s`", shown),
			Hint:    "check that " + path + " is " + help.name + "; reinstall with: " + help.install}
	}
	return nil
}

func exitText(res Result) string {
	if res.Signal != "" {
		return "killed by signal " + res.Signal
	}
	return fmt.Sprintf("exit status %d", res.ExitCode)
}

// oneLine makes output fit an error message: valid UTF-8, lines joined with " | ", at most a few
// hundred bytes (the end, which holds the error).
func oneLine(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.Map(func(r rune) rune {
			if unicode.IsControl(r) {
				return -1
			}
			return r
		}, l)
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	s = strings.Join(parts, " | ")
	const max = 400
	if len(s) > max {
		cut := len(s) - max
		for cut < len(s) && !utf8.RuneStart(s[cut]) {
			cut++
		}
		s = "..." + s[cut:]
	}
	return s
}

// tailBuffer keeps the last max bytes written to it. Exec writes stdout and stderr to it from
// one goroutine (same writer), but the lock keeps it safe regardless.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

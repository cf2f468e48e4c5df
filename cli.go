package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/cryochamber/cryochamber/chamber"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit statuses (documented in --help). They are decided here and only here, from the kind of
// error a command returns.
const (
	exitOK          = 0   // done: hibernated, plan complete, or nothing was due
	exitFailed      = 1   // refused or failed: validation, agent failure
	exitUsage       = 2   // usage or configuration error
	exitInterrupted = 130 // stopped by Ctrl-C or SIGTERM
)

const exitHelp = `EXIT STATUS:
   0    done: hibernated, plan complete, nothing due, or a live session holds the lock
   1    refused or failed: validation refused to hibernate, the agent failed, a timer
        could not be armed, reload found changes that need --yes
   2    usage or configuration error: bad flags, cryo.toml, a missing plan, not a chamber
   130  interrupted (Ctrl-C, SIGTERM)`

// usageError is a command-line mistake (exit 2).
type usageError struct{ msg, hint string }

func (e *usageError) Error() string { return e.msg }

// run is the whole program: it never calls os.Exit, so deferred cleanups (locks, temp files)
// always run, and tests call it directly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	env := newEnv(stdout, stderr)
	app := newApp(env)
	notFound := false
	app.CommandNotFound = func(c *cli.Context, name string) {
		notFound = true
		fmt.Fprintf(stderr, "cryochamber: unknown command %q\nhint: %s\n", name, didYouMean(c.App, name))
	}
	if completeWords(app, args, stdout) { // the shell completion scripts ask (cli_complete.go)
		return exitOK
	}
	err := app.RunContext(ctx, interspersedSub(app, interspersed(app, dirBeforeCommand(app, args))))
	if notFound && err == nil {
		return exitUsage
	}
	if ctx.Err() != nil && !errors.Is(err, context.Canceled) {
		// A signal stopped the command. Whatever it still did before exiting (a wake kills its
		// agent and arms the retry), the status says it was interrupted, as --help documents.
		err = &interruptedError{err}
	}
	return report(err, stderr)
}

// interruptedError is a command stopped by SIGTERM or Ctrl-C, with what it made of that (nil if
// it had nothing to say).
type interruptedError struct{ err error }

func (e *interruptedError) Error() string {
	if e.err == nil {
		return "interrupted"
	}
	return "interrupted: " + e.err.Error()
}

func (e *interruptedError) Unwrap() error { return e.err }

// report is the one place that maps errors to exit statuses and prints them in one voice:
// "cryochamber: <message>" then "hint: <what to do>".
func report(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	status := exitFailed
	hint := ""
	var ce *chamber.Error
	var cfgErr *chamber.ConfigError
	var ue *usageError
	var ie *interruptedError
	switch {
	case errors.As(err, &ie):
		status = exitInterrupted
		if errors.As(err, &ce) {
			hint = ce.Hint
		}
	case errors.Is(err, context.Canceled):
		status, err = exitInterrupted, errors.New("interrupted")
	case errors.As(err, &cfgErr):
		status, hint = exitUsage, "fix cryo.toml"
	case errors.As(err, &ce):
		hint = ce.Hint
		if ce.Kind == chamber.Usage {
			status = exitUsage
		}
	case errors.As(err, &ue):
		status, hint = exitUsage, ue.hint
	}
	fmt.Fprintf(stderr, "cryochamber: %s\n", err.Error())
	if hint != "" {
		fmt.Fprintf(stderr, "hint: %s\n", hint)
	}
	return status
}

// Flags several commands share.
func dirFlag() cli.Flag {
	return &cli.StringFlag{Name: "dir", Aliases: []string{"C"}, Value: ".", Usage: "the chamber `DIR`ectory", EnvVars: []string{"CRYO_DIR"}}
}

func jsonFlag() cli.Flag { return &cli.BoolFlag{Name: "json", Usage: "print one JSON object"} }

// jsonArrayFlag is --json of the commands that list rows (history, ps, receive).
func jsonArrayFlag() cli.Flag {
	return &cli.BoolFlag{Name: "json", Usage: "print a JSON array, one object per row ([] for none)"}
}

func newApp(env *chamber.Env) *cli.App {
	app := &cli.App{
		Name:    "cryochamber",
		Usage:   "let an AI agent carry out a plan over days, months or years, woken by OS timers",
		Version: version,
		Description: `cryochamber runs an AI coding agent (opencode, claude, codex, or any program) in short
sessions. Between sessions nothing of cryochamber runs: a systemd user timer (Linux) or a
launchd agent (macOS) starts ` + "`cryochamber wake`" + ` at the time the agent asked for.

The agent ends each session with markers on standard output:
   [CRYO:EXIT 0] what was done        (required: 0 success, 1 partial, 2 failure)
   [CRYO:WAKE 2026-03-08T09:00]       (or +2h, +1d; no WAKE = the plan is complete)
   [CRYO:CMD opencode "next task"]    (what to run next; default: the same)
   [CRYO:PLAN note for later]  [CRYO:FALLBACK email me@example.com "did not run"]
   [CRYO:REPLY "answer"]  [CRYO:TODO +3d "extra task"]  [CRYO:TODO-DONE s3-1]
   [CRYO:USAGE tokens_in=N tokens_out=N cost_usd=X.XX]  (a custom agent's usage: its claim)

The operator bounds the schedule the agent chooses in cryo.toml: min_interval (default 1m),
max_sessions_per_day (96), quiet_hours, stop_after, max_sessions, jitter, and the budgets
budget_per_day, budget_per_month (USD). A wake they move is told once; see README "Limits and costs".

Start with:
   cryochamber init ~/plans/x          (the agent is opencode; --agent claude, or agent in cryo.toml)
   $EDITOR ~/plans/x/plan.md
   cryochamber start ~/plans/x/plan.md
Then: status, log, send "a message", pause/resume, history, ps.
The chamber is the current directory, or --dir DIR (-C DIR, also before the command:
cryochamber -C ~/plans/x status), or $CRYO_DIR.

` + exitHelp,
		EnableBashCompletion: true,
		Writer:               env.Stdout,
		ErrWriter:            env.Stderr,
		// urfave/cli's default handler calls os.Exit; errors go back to run() instead.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(c *cli.Context, err error, isSubcommand bool) error {
			return &usageError{msg: err.Error(), hint: "see `" + commandPath(c) + " --help`"}
		},
		Commands: []*cli.Command{
			initCommand(env), startCommand(env), wakeCommand(env), statusCommand(env), logCommand(env),
			historyCommand(env), sendCommand(env), receiveCommand(env), pauseCommand(env), resumeCommand(env),
			cancelCommand(env), reloadCommand(env), validateCommand(env), psCommand(env), fallbackCommand(env),
			syncCommand(env), completionCommand(env), manCommand(env), webCommand(env),
			versionCommand(env), todoCommand(env), forgetCommand(env), // issue 24: cmd_version.go, cmd_todo.go
			digestCommand(env),                     // issue 26
			diffCommand(env), rollbackCommand(env), // issue 27: snapshots
		},
	}
	addExamples(app.Commands) // help CMD ends with the command's examples (cmd_examples.go)
	for _, c := range app.Commands {
		c.OnUsageError = app.OnUsageError
		c.HideHelpCommand = true
	}
	return app
}

// commandPath is "cryochamber" or "cryochamber CMD", for hints.
func commandPath(c *cli.Context) string {
	if c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name {
		return "cryochamber " + c.Command.Name
	}
	return "cryochamber"
}

// interspersed moves a command's flags that come after its arguments in front of them, so that
// `send "hello" --dir x` and `start plan.md --agent claude` work as people type them (urfave/cli
// v2 stops reading flags at the first argument). A flag's value goes with it; "--" ends the
// flags as usual.
func interspersed(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	cmd := app.Command(args[1])
	if cmd == nil {
		return args
	}
	takesValue := map[string]bool{}
	isFlag := map[string]bool{}
	for _, f := range cmd.Flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			isFlag[n] = true
			takesValue[n] = !isBool
		}
	}
	isFlag["help"], isFlag["h"] = true, true
	var flags, rest []string
	for i := 2; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		name := strings.TrimLeft(a, "-")
		name, _, hasValue := strings.Cut(name, "=")
		if strings.HasPrefix(a, "-") && a != "-" && isFlag[name] {
			flags = append(flags, a)
			if takesValue[name] && !hasValue && i+1 < len(args) {
				i++
				flags = append(flags, args[i])
			}
			continue
		}
		rest = append(rest, a)
	}
	out := append([]string{args[0], args[1]}, flags...)
	return append(out, rest...)
}

// oneArg returns the command's single optional argument, refusing more.
func oneArg(c *cli.Context, what, usage string) (string, error) {
	switch c.NArg() {
	case 0:
		return "", nil
	case 1:
		return c.Args().First(), nil
	}
	return "", &usageError{fmt.Sprintf("%s takes one %s, not %d arguments (%s)", c.Command.Name, what, c.NArg(), strings.Join(c.Args().Slice(), " ")), usage}
}

// noArgs refuses arguments for a command that takes none.
func noArgs(c *cli.Context) error {
	if c.NArg() > 0 {
		hint := "see `cryochamber " + c.Command.Name + " --help`"
		if c.NArg() == 1 && takesDir(c.Command) {
			// `status DIR`: the chamber goes with --dir.
			hint = "the chamber is given with --dir (or -C): cryochamber " + c.Command.Name + " --dir " + c.Args().First()
		}
		return &usageError{fmt.Sprintf("%s takes no arguments, got %q", c.Command.Name, strings.Join(c.Args().Slice(), " ")), hint}
	}
	return nil
}

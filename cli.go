package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cryochamber/cryochamber/chamber"
	"github.com/cryochamber/cryochamber/timer"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit statuses (documented in --help).
const (
	exitOK     = 0 // done: hibernated, plan complete, or nothing was due
	exitFailed = 1 // refused or failed: validation, agent failure
	exitUsage  = 2 // usage or configuration error
)

const exitHelp = `EXIT STATUS:
   0  done: hibernated, plan complete, nothing due, or a live session holds the lock
   1  refused or failed: validation refused to hibernate, the agent failed, a timer
      could not be armed
   2  usage or configuration error: bad flags, cryo.toml, a missing plan, not a chamber`

// usageError is a command-line mistake (exit 2).
type usageError struct{ msg, hint string }

func (e *usageError) Error() string { return e.msg }

// run is the whole program: it never calls os.Exit, so deferred cleanups (locks, temp files)
// always run, and tests call it directly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	env := newEnv(stdout, stderr)
	notFound := false
	app := newApp(env)
	app.CommandNotFound = func(c *cli.Context, name string) {
		notFound = true
		fmt.Fprintf(stderr, "cryochamber: unknown command %q\nhint: run `cryochamber --help` to see the commands\n", name)
	}
	err := app.RunContext(ctx, args)
	if notFound && err == nil {
		return exitUsage
	}
	return report(err, stderr)
}

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
	switch {
	case errors.As(err, &ce):
		status, hint = ce.Status, ce.Hint
	case errors.As(err, &cfgErr):
		status, hint = exitUsage, "fix cryo.toml"
	case errors.As(err, &ue):
		status, hint = exitUsage, ue.hint
	case errors.Is(err, context.Canceled):
		err = errors.New("interrupted")
	}
	msg := err.Error()
	fmt.Fprintf(stderr, "cryochamber: %s\n", msg)
	if hint != "" {
		fmt.Fprintf(stderr, "hint: %s\n", hint)
	}
	return status
}

func newApp(env *chamber.Env) *cli.App {
	dirFlag := &cli.StringFlag{Name: "dir", Aliases: []string{"C"}, Value: ".", Usage: "the chamber directory", EnvVars: []string{"CRYO_DIR"}}
	jsonFlag := &cli.BoolFlag{Name: "json", Usage: "print one JSON object"}
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
   [CRYO:REPLY "answer"]  [CRYO:TODO +3d "extra task"]

Start with: cryochamber init ~/plans/x && $EDITOR ~/plans/x/plan.md && cryochamber start ~/plans/x/plan.md

` + exitHelp,
		HideHelpCommand: true,
		Writer:          env.Stdout,
		ErrWriter:       env.Stderr,
		// urfave/cli's default handler calls os.Exit; errors go back to run() instead.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(c *cli.Context, err error, isSubcommand bool) error {
			name := "cryochamber"
			if c.Command != nil && c.Command.Name != "" {
				name += " " + c.Command.Name
			}
			return &usageError{msg: err.Error(), hint: "see `" + name + " --help`"}
		},
		Commands: []*cli.Command{
			{
				Name:      "init",
				Usage:     "create a chamber: plan.md, cryo.toml (commented defaults), NOTES.md, messages/",
				ArgsUsage: "[DIR]",
				Flags:     []cli.Flag{dirFlag},
				Action: func(c *cli.Context) error {
					dir := c.String("dir")
					if c.NArg() > 1 {
						return &usageError{"init takes at most one directory", "cryochamber init [DIR]"}
					}
					if c.NArg() == 1 {
						dir = c.Args().First()
					}
					return runInit(c.Context, env, initOptions{Dir: dir})
				},
			},
			{
				Name:      "start",
				Usage:     "make the plan's directory a chamber, run session 1 now, and hibernate",
				ArgsUsage: "PLAN.md",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "agent", Usage: "agent command line for this chamber (overrides `agent` in cryo.toml)"},
					&cli.StringFlag{Name: "backend", Usage: "timer backend: systemd or launchd (default: by OS, or `backend` in cryo.toml)"},
					dirFlag,
				},
				Action: func(c *cli.Context) error {
					plan := c.Args().First()
					if c.NArg() > 1 {
						return &usageError{"start takes one plan file", "cryochamber start path/to/plan.md"}
					}
					if plan == "" {
						plan = filepath.Join(c.String("dir"), chamber.DefaultPlan)
					}
					return runStart(c.Context, env, startOptions{Plan: plan, Agent: c.String("agent"), Backend: c.String("backend")})
				},
			},
			{
				Name:  "wake",
				Usage: "run the session that is due (what the OS timer runs); a wake that is not due does nothing",
				Flags: []cli.Flag{dirFlag, &cli.BoolFlag{Name: "now", Usage: "run a session now even if none is due"}},
				Action: func(c *cli.Context) error {
					return runWake(c.Context, env, wakeOptions{Dir: c.String("dir"), Now: c.Bool("now")})
				},
			},
			{
				Name:  "status",
				Usage: "show the plan, session, next wake, last result, timers as the OS reports them, the lock, and the latest block",
				Flags: []cli.Flag{dirFlag, jsonFlag, &cli.IntFlag{Name: "lines", Value: 10, Usage: "lines of the latest block to show"}},
				Action: func(c *cli.Context) error {
					return runStatus(c.Context, env, statusOptions{Dir: c.String("dir"), JSON: c.Bool("json"), Lines: c.Int("lines")})
				},
			},
			{
				Name:  "log",
				Usage: "print the session log, one session, or follow it",
				Flags: []cli.Flag{dirFlag,
					&cli.IntFlag{Name: "session", Aliases: []string{"n"}, Usage: "print only session `N`"},
					&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing what is appended (Ctrl-C to stop)"},
					&cli.BoolFlag{Name: "numbers", Usage: "number each line within its block (the line numbers marker errors use)"},
				},
				Action: func(c *cli.Context) error {
					return runLog(c.Context, env, logOptions{Dir: c.String("dir"), Session: c.Int("session"), Follow: c.Bool("follow"), Numbers: c.Bool("numbers")})
				},
			},
			{
				Name:  "cancel",
				Usage: "remove every timer of the chamber; keep the log",
				Flags: []cli.Flag{dirFlag},
				Action: func(c *cli.Context) error {
					return runCancel(c.Context, env, cancelOptions{Dir: c.String("dir")})
				},
			},
			{
				Name:  "reload",
				Usage: "accept an edited cryo.toml and re-capture the environment (PATH, HOME, agent_env) for a started chamber",
				Description: `The agent can write in its chamber, so the keys that decide what runs and where alerts go
(agent, agents, allowed_commands, agent_env, backend, fallback, fallback_allow, email, webhook)
are pinned when you start the chamber. A wake that finds them changed refuses to run and
alerts. After you edit them yourself, run reload. Other keys take effect at the next wake.`,
				Flags: []cli.Flag{dirFlag},
				Action: func(c *cli.Context) error {
					return runReload(c.Context, env, reloadOptions{Dir: c.String("dir")})
				},
			},
			{
				Name:  "validate",
				Usage: "run the pre-hibernate checks on the latest block and the armed timers, printing each step",
				Flags: []cli.Flag{dirFlag, jsonFlag},
				Action: func(c *cli.Context) error {
					return runValidate(c.Context, env, validateOptions{Dir: c.String("dir"), JSON: c.Bool("json")})
				},
			},
			{
				Name:      "send",
				Usage:     "write a message to the chamber's inbox (the next session reads and answers it)",
				ArgsUsage: `"TEXT" (or - to read it from standard input)`,
				Flags: []cli.Flag{dirFlag,
					&cli.StringFlag{Name: "from", Usage: "who the message is from (default: $USER)"},
					&cli.StringFlag{Name: "subject", Usage: "a subject line"},
					&cli.BoolFlag{Name: "wake", Usage: "start the chamber's wake service now instead of waiting"},
				},
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return &usageError{"send takes the message text as one argument", `cryochamber send "text" (quote it), or cryochamber send - < file`}
					}
					text := c.Args().First()
					if text == "-" {
						t, err := chamber.ReadText(os.Stdin)
						if err != nil {
							return &usageError{err.Error(), "messages are at most 1 MiB"}
						}
						text = t
					}
					return runSend(c.Context, env, sendOptions{Dir: c.String("dir"), Text: text, From: c.String("from"), Subject: c.String("subject"), Wake: c.Bool("wake")})
				},
			},
			{
				Name:  "receive",
				Usage: "print the outbox messages not printed before (replies, alerts) and mark them read",
				Flags: []cli.Flag{dirFlag, jsonFlag, &cli.BoolFlag{Name: "all", Usage: "also print what was printed before"}},
				Action: func(c *cli.Context) error {
					return runReceive(c.Context, env, receiveOptions{Dir: c.String("dir"), All: c.Bool("all"), JSON: c.Bool("json")})
				},
			},
			{
				Name:  "ps",
				Usage: "list every chamber of this user: state (active, complete, failed, cancelled, orphaned), next wake, last result",
				Flags: []cli.Flag{jsonFlag, &cli.StringFlag{Name: "backend", Usage: "timer backend to ask (default: by OS)"}},
				Action: func(c *cli.Context) error {
					return runPs(c.Context, env, psOptions{JSON: c.Bool("json"), Backend: c.String("backend")})
				},
			},
			{
				Name:  "fallback",
				Usage: "the dead-man check (what the fallback timer runs): alert if the due session has not finished",
				Flags: []cli.Flag{dirFlag},
				Action: func(c *cli.Context) error {
					return runFallback(c.Context, env, fallbackOptions{Dir: c.String("dir")})
				},
			},
			syncCommand(env, dirFlag, jsonFlag),
		},
	}
	for _, c := range app.Commands {
		c.OnUsageError = app.OnUsageError
		c.HideHelpCommand = true
	}
	return app
}

// newEnv gathers everything the chamber package needs from the process: the clock, the
// environment, the binary's path and the way to reach the OS timer manager.
func newEnv(stdout, stderr io.Writer) *chamber.Env {
	environ := os.Environ()
	exe := binaryPath()
	stateHome := os.Getenv("XDG_STATE_HOME")
	if stateHome == "" {
		if home := os.Getenv("HOME"); home != "" {
			stateHome = filepath.Join(home, ".local", "state")
		}
	}
	stateDir, registry := "", ""
	if stateHome != "" {
		stateDir = filepath.Join(stateHome, "cryochamber")
		registry = filepath.Join(stateDir, "registry")
	}
	env := &chamber.Env{
		Registry: registry,
		StateDir: stateDir,
		Now:      time.Now,
		Local:    time.Local,
		Binary:   exe,
		Environ:  environ,
		PID:      os.Getpid(),
		Stdout:   stdout,
		Stderr:   stderr,
	}
	env.Checkpoint = crashCheckpoint(os.Getenv("CRYOCHAMBER_CRASH_AT"))
	env.OpenBackend = func(ctx context.Context, name string) (timer.Backend, error) {
		return openBackend(ctx, env, name)
	}
	return env
}

// binaryPath is the path the timers will run. It keeps the path as invoked when that names this
// very binary (/opt/homebrew/bin/cryochamber, ~/go/bin/cryochamber) instead of resolving
// symlinks: a package upgrade replaces what the link points to and deletes the old target.
func binaryPath() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	arg := os.Args[0]
	if !strings.Contains(arg, "/") {
		if p, err := exec.LookPath(arg); err == nil {
			arg = p
		}
	}
	if abs, err := filepath.Abs(arg); err == nil {
		a, errA := os.Stat(abs)
		b, errB := os.Stat(exe)
		if errA == nil && errB == nil && os.SameFile(a, b) {
			return abs
		}
	}
	return exe
}

// crashCheckpoint is for the crash tests (docs/RELIABILITY.md): CRYOCHAMBER_CRASH_AT=point[:k]
// makes the process SIGKILL itself the k-th time (default 1st) it reaches that point of a wake.
// Unset, it does nothing.
func crashCheckpoint(spec string) func(string) {
	if spec == "" {
		return nil
	}
	point, nth := spec, 1
	if p, k, ok := strings.Cut(spec, ":"); ok {
		point = p
		if n, err := strconv.Atoi(k); err == nil && n > 0 {
			nth = n
		}
	}
	seen := 0
	return func(name string) {
		if name != point {
			return
		}
		seen++
		if seen == nth {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way; never return into the wake
		}
	}
}

// openBackend connects to the named timer backend ("" = this OS's default).
func openBackend(ctx context.Context, env *chamber.Env, name string) (timer.Backend, error) {
	if name == "" {
		name = timer.DefaultBackend
	}
	uid := os.Getuid()
	username := strconv.Itoa(uid)
	if u, err := user.Current(); err == nil {
		username = u.Username
	}
	home := env.Getenv("HOME")
	switch name {
	case "systemd":
		cfgHome := env.Getenv("XDG_CONFIG_HOME")
		if cfgHome == "" {
			cfgHome = filepath.Join(home, ".config")
		}
		runtimeDir := env.Getenv("XDG_RUNTIME_DIR")
		if runtimeDir == "" {
			runtimeDir = fmt.Sprintf("/run/user/%d", uid)
		}
		return timer.NewSystemd(ctx, timer.SystemdOptions{
			UnitDir:    filepath.Join(cfgHome, "systemd", "user"),
			RuntimeDir: runtimeDir,
			BusAddress: env.Getenv("DBUS_SESSION_BUS_ADDRESS"),
			LingerFile: filepath.Join("/var/lib/systemd/linger", username),
			User:       username,
		})
	case "launchd":
		return timer.NewLaunchd(ctx, timer.LaunchdOptions{
			AgentsDir: filepath.Join(home, "Library", "LaunchAgents"),
			UID:       uid,
			Location:  env.Local,
			Env:       env.Environ,
			Now:       env.Now,
		})
	case "":
		return nil, fmt.Errorf("%w: no timer backend for %s (cryochamber supports systemd on Linux and launchd on macOS)", timer.ErrUnavailable, runtime.GOOS)
	default:
		return nil, fmt.Errorf("unknown backend %q (want systemd or launchd)", name)
	}
}

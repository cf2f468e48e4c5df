package chamber

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/agent"
	"github.com/cryochamber/cryochamber/marker"
	"github.com/cryochamber/cryochamber/sessionlog"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/validate"
)

// armLead is how far ahead a wake that is already due is armed. A timer must not elapse while
// its own wake service is still running: systemd merges that start into the running job and the
// wake is lost. 5 s covers saving the state and exiting.
const armLead = 5 * time.Second

// retryDelays are the waits before retry 1, 2, 3 of a failed session; later retries use the last.
var retryDelays = []time.Duration{5 * time.Minute, 15 * time.Minute, 60 * time.Minute}

// runner is one command's hold on a chamber: the lock, the configuration and the state.
type runner struct {
	env  *Env
	dir  string
	cfg  *Config
	st   *State
	lock *Lock
	be   timer.Backend
	out  io.Writer

	warnings    []string       // for the next prompt
	lastMarkers *marker.Result // the markers being judged (a refusal still delivers their REPLYs)

	envLoaded bool     // envVars holds the environment file, read once
	envVars   []string // see capturedEnv
}

func (r *runner) now() time.Time { return r.env.Now() }

func (r *runner) path(name string) string    { return filepath.Join(r.dir, name) }
func (r *runner) private(name string) string { return filepath.Join(r.dir, PrivateDir, name) }
func (r *runner) logPath() string            { return r.path(LogFile) }

func (r *runner) printf(format string, args ...any) {
	fmt.Fprintf(r.out, format+"\n", args...)
}

func (r *runner) save() error {
	if err := r.st.Save(r.dir, r.now(), func() { r.env.checkpoint("state-temp") }); err != nil {
		return &Error{Status: 1, Msg: "cannot save timer.json", Err: err, Hint: "check that the chamber's file system is writable and not full"}
	}
	return nil
}

func (r *runner) close() {
	if r.be != nil {
		_ = r.be.Close()
		r.be = nil
	}
	r.lock.Unlock()
}

// backend connects to the OS timer manager on first use.
func (r *runner) backend(ctx context.Context) (timer.Backend, error) {
	if r.be != nil {
		return r.be, nil
	}
	name := r.cfg.Backend
	if name == "" {
		name = r.st.Backend
	}
	be, err := r.env.OpenBackend(ctx, name)
	if err != nil {
		return nil, err
	}
	r.be = be
	r.st.Backend = be.Name()
	return be, nil
}

// timerChamber describes the chamber to the timer backend.
func (r *runner) timerChamber() timer.Chamber {
	return timer.Chamber{
		ID:      r.st.ID,
		Dir:     r.dir,
		EnvFile: r.stateFile(EnvFileName),
		Env:     r.launchdEnv(),
		Stdout:  r.private("launchd.out"),
		Stderr:  r.private("launchd.err"),
	}
}

func (r *runner) wakeArgv() []string     { return []string{r.binary(), "wake", "--dir", r.dir} }
func (r *runner) fallbackArgv() []string { return []string{r.binary(), "fallback", "--dir", r.dir} }

// binary is what the timers run: the binary recorded at start. A manual `wake` with another
// build does not change it; but if it is gone (an upgrade moved it), the running one replaces it.
func (r *runner) binary() string {
	if b := r.st.Binary; b != "" {
		if _, err := os.Stat(b); err == nil || r.env.Binary == "" {
			return b
		}
		if checkBinary(r.env.Binary) == nil {
			r.printf("warning: the timers ran %s, which is gone; they now run %s", b, r.env.Binary)
			r.st.Binary = r.env.Binary
		}
	}
	if r.st.Binary == "" {
		r.st.Binary = r.env.Binary
	}
	return r.st.Binary
}

// agentEnv is the environment every session's agent gets, session 1 included: a few variables
// of this process that describe the user and the locale, then what `start` captured (PATH,
// HOME, agent_env), never the alert secrets. Session 1 runs from your shell and later ones from
// the timer; both get the same recipe, so a session that works now works at 3 a.m.
func (r *runner) agentEnv() []string {
	var base []string
	for _, kv := range r.env.Environ {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "USER", k == "LOGNAME", k == "SHELL", k == "LANG", k == "LANGUAGE", k == "TZ", k == "TMPDIR",
			k == "XDG_RUNTIME_DIR", k == "DBUS_SESSION_BUS_ADDRESS", strings.HasPrefix(k, "LC_"):
			base = append(base, kv)
		}
	}
	return withoutVars(mergeEnv(base, r.capturedEnv()), r.cfg.secretNames())
}

// capturedEnv is the environment file written at start: PATH, HOME and agent_env.
// capturedEnv is the environment file written at start (read once per command).
func (r *runner) capturedEnv() []string {
	if r.envLoaded {
		return r.envVars
	}
	r.envLoaded = true
	data, err := os.ReadFile(r.stateFile(EnvFileName))
	if err != nil {
		return nil
	}
	if r.envVars, err = timer.ParseEnvFile(data); err != nil {
		r.envVars = nil
	}
	return r.envVars
}

func (r *runner) capturedPath() string {
	for _, kv := range r.capturedEnv() {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			return v
		}
	}
	return r.env.Getenv("PATH")
}

func (r *runner) launchdEnv() []string {
	var out []string
	for _, kv := range r.capturedEnv() {
		if strings.HasPrefix(kv, "PATH=") || strings.HasPrefix(kv, "HOME=") {
			out = append(out, kv)
		}
	}
	return out
}

// agentLine is the chamber's agent: `start --agent`, else cryo.toml's agent.
func (r *runner) agentLine() string {
	if r.st.Agent != "" {
		return r.st.Agent
	}
	return r.cfg.Agent
}

// command resolves what the next session runs: the last CMD, or the agent.
func (r *runner) command() (Command, error) {
	if r.st.Command == "" {
		c, err := r.cfg.AgentLine(r.agentLine())
		if err != nil {
			return Command{}, err
		}
		c.Task = r.st.Task
		return c, nil
	}
	words, err := marker.SplitCommand(r.st.Command)
	if err != nil {
		return Command{}, fmt.Errorf("CMD %q: %w", r.st.Command, err)
	}
	return r.cfg.ResolveCMD(r.st.Command, words, r.agentLine())
}

// outcome is how a session's agent run ended, before its markers are judged.
type outcome struct {
	start, end time.Time
	exit       int    // the END line's exit
	reason     string // "" when the agent answered with a valid EXIT; else why it counts as exit 2
	detail     string
}

func (o outcome) failed() bool { return o.reason != "" && o.reason != "invalid" }

// runSession runs session n, due at due, then hibernates. It is the only place an agent runs.
func (r *runner) runSession(ctx context.Context, n int, due time.Time, reason string) error {
	start := r.now()
	var early *time.Time
	if pw := r.st.PlanWake; pw != nil && pw.After(start) && reason != "plan" && reason != "retry" && reason != "start" {
		// Woken before the plan's own WAKE: the prompt says how to keep it.
		t := *pw
		early = &t
	}
	cmd, cmdErr := r.command()

	r.st.Phase = PhaseRunning
	r.st.Session = n
	r.st.Wake = &due
	r.st.Reason = reason
	r.st.Holder = &Holder{PID: r.env.PID, Session: n, Since: start.UTC().Truncate(time.Second), Command: "wake"}
	// The claim is committed by saving timer.json (phase running, the claimed names); only then
	// are the files moved, so a crash at any point leaves the batch in the inbox or the archive,
	// and the next command hands the same batch to the same session.
	names, err := r.claimNames()
	if err != nil {
		return err
	}
	if err := r.save(); err != nil {
		return err
	}
	_ = os.Remove(r.private(WakeRequest))
	r.env.checkpoint("claimed")
	batch, err := r.claim(start, names)
	if err != nil {
		return err
	}

	r.checkLog(start)
	meta := []string{"task: " + oneLine(cmd.Task), "command: " + oneLine(cmd.Line), "due: " + due.UTC().Format(time.RFC3339) + " (" + reason + ")"}
	block, err := sessionlog.Begin(r.logPath(), n, start, meta)
	if err != nil {
		rep := validate.New(r.out)
		rep.Session = n
		rep.Add(7, validate.Fail, "cannot start session %d in %s: %v", n, r.logPath(), err)
		return r.refuse(ctx, n, rep, outcome{start: start, end: r.now(), exit: 2, reason: "log"})
	}
	r.st.LogOffset = block.Offset()
	if err := r.save(); err != nil {
		_ = block.End(r.now(), 2, "crashed")
		return err
	}
	r.env.checkpoint("header")

	parser := marker.NewParser(r.cfg.Location)
	block.OnStdoutLine(parser.Line)

	var res agent.Result
	if cmdErr != nil {
		_ = block.Note("cannot resolve the command: " + cmdErr.Error())
		res = agent.Result{ExitCode: -1, Err: cmdErr}
	} else {
		res = r.execute(ctx, n, cmd, due, reason, early, batch, block)
	}
	result := parser.Result()
	o := classify(res, result, r.cfg.SessionTimeout.D)
	// Whole seconds, as the log records them: a recovery that re-reads the block then derives
	// the same reply and notice names, and writes each once.
	o.start, o.end = start.UTC().Truncate(time.Second), r.now().UTC().Truncate(time.Second)
	if o.detail != "" {
		_ = block.Note(o.detail)
	}
	if err := block.End(o.end, o.exit, o.reason); err != nil {
		// The block could not be closed: the next command will find it torn and count the
		// session as crashed. Say so now too.
		r.printf("warning: cannot close session %d in the log: %v", n, err)
	}
	r.env.checkpoint("ended")
	r.printf("session %d: %s", n, describe(o, result))
	// What follows must finish even when we were stopped (a shutdown sends SIGTERM and waits
	// about 90 s): without a context of its own, arming the retry would fail and the chamber
	// would stop for good after an ordinary reboot.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hibernateTimeout)
	defer cancel()
	if cmdErr != nil {
		rep := validate.New(r.out)
		rep.Session = n
		rep.Add(3, validate.Fail, "%v", cmdErr)
		return r.refuse(ctx, n, rep, o)
	}
	return r.afterSession(ctx, n, result, o, o.end)
}

// hibernateTimeout bounds judging, arming and alerting after a session.
const hibernateTimeout = 60 * time.Second

// execute runs the agent (or plain step) of session n with its prompt.
func (r *runner) execute(ctx context.Context, n int, cmd Command, due time.Time, reason string, early *time.Time, batch *claimBatch, block *sessionlog.Block) agent.Result {
	now := r.now()
	data := agent.PromptData{
		Now:             now.In(r.cfg.Location),
		Session:         n,
		Dir:             r.dir,
		Plan:            r.path(r.planName()),
		Notes:           r.path(NotesFile),
		Log:             r.logPath(),
		Task:            cmd.Task,
		Command:         cmd.Line,
		Agent:           agentName(r.agentLine()),
		Allowed:         r.cfg.AllowedList(r.agentLine()),
		FallbackTargets: r.cfg.fallbackTargets(),
		Attempt:         r.st.Retries,
		Warnings:        uniqueStrings(append(append([]string(nil), r.st.Warnings...), r.warnings...)),
		LateGrace:       r.cfg.LateGrace.D,
	}
	if l := r.st.Last; l != nil {
		data.Previous = &agent.Previous{Session: l.Session, Exit: l.Exit, Summary: l.Summary, Plans: r.st.Plans, End: l.End}
	}
	if late := now.Sub(due); late > r.cfg.DelayedAfter.D && reason != "start" && reason != "inbox" && reason != "requested" {
		data.Delayed = &agent.Delay{Due: due.In(r.cfg.Location), Late: late}
	}
	if early != nil {
		by := map[string]string{"inbox": "messages (below)", "todo": "a TODO (below)", "requested": "a request (send --wake or wake --now)"}[reason]
		data.Early = &agent.Early{Scheduled: early.In(r.cfg.Location), By: by}
	}
	batch.fill(&data)
	for _, t := range r.Todos() {
		if t.Status == "pending" {
			data.Pending = append(data.Pending, agent.Todo{Text: t.Text, Due: t.At.In(r.cfg.Location), Attempt: t.Attempt})
		}
	}
	prompt, err := agent.Prompt(data)
	if err != nil {
		return agent.Result{ExitCode: -1, Err: fmt.Errorf("render prompt: %w", err)}
	}
	promptFile := r.private(PromptName)
	if err := os.WriteFile(promptFile, []byte(prompt), 0o600); err != nil {
		return agent.Result{ExitCode: -1, Err: fmt.Errorf("write prompt file: %w", err)}
	}
	_ = os.Chmod(promptFile, 0o600)

	base := r.agentEnv()
	vars := agent.Vars{Dir: r.dir, Session: n, PromptFile: promptFile}
	var inv agent.Invocation
	if cmd.Agent != nil {
		inv = cmd.Agent.Invocation(prompt, base, vars)
	} else {
		// A plain step: it gets the chamber's variables, no prompt, and must print markers.
		inv = agent.Spec{Command: cmd.Words, Stdin: true}.Invocation("", base, vars)
		inv.Stdin = nil
	}
	r.printf("session %d: running %s", n, strings.Join(cmd.Words, " "))
	return agent.Exec(ctx, agent.Run{
		Invocation: inv,
		Dir:        r.dir,
		Timeout:    r.cfg.SessionTimeout.D,
		Stdout:     block.Stdout(),
		Stderr:     block.Stderr(),
	})
}

// agentName is how a CMD names the chamber's agent: its first word.
func agentName(line string) string {
	if words, err := SplitAgentCommand(line); err == nil {
		return words[0]
	}
	return line
}

func (r *runner) planName() string {
	if r.st.Plan != "" {
		return r.st.Plan
	}
	return DefaultPlan
}

// classify decides how a run ended: answered (valid EXIT), or failed and why.
func classify(res agent.Result, m *marker.Result, timeout time.Duration) outcome {
	switch {
	case res.Canceled:
		// Stopped from outside (shutdown, logout, Ctrl-C): whatever it printed is not an answer.
		return outcome{exit: 2, reason: "interrupted", detail: "the session was interrupted (cryochamber was stopped: shutdown, logout or a signal) and the agent killed"}
	case res.TimedOut:
		return outcome{exit: 2, reason: "timeout", detail: fmt.Sprintf("agent killed after session_timeout (%s) with its whole process group", timeout)}
	case res.Err != nil:
		return outcome{exit: 2, reason: "agent-failed", detail: "agent did not run: " + res.Err.Error()}
	}
	agentDetail := fmt.Sprintf("agent exited with status %d after %s", res.ExitCode, res.Duration.Round(time.Millisecond))
	if res.Signal != "" {
		agentDetail = fmt.Sprintf("agent killed by signal %s after %s", res.Signal, res.Duration.Round(time.Millisecond))
	}
	if len(m.Errors) > 0 {
		code := 2
		if m.Exit != nil {
			code = m.Exit.Code
		}
		return outcome{exit: code, reason: "invalid", detail: agentDetail}
	}
	if m.Exit == nil {
		if res.ExitCode != 0 {
			return outcome{exit: 2, reason: "crashed", detail: agentDetail + ", without an EXIT marker"}
		}
		return outcome{exit: 2, reason: "no-exit", detail: agentDetail + ", without an EXIT marker"}
	}
	return outcome{exit: m.Exit.Code, detail: agentDetail}
}

func describe(o outcome, m *marker.Result) string {
	switch {
	case o.reason == "invalid":
		return fmt.Sprintf("markers invalid (%d problem(s))", len(m.Errors))
	case o.failed():
		return fmt.Sprintf("failed (%s): %s", o.reason, o.detail)
	}
	return fmt.Sprintf("EXIT %d %s", o.exit, m.Exit.Summary)
}

// afterSession judges a finished session and hibernates, retries or refuses. validAt is the time
// the markers are judged at: the end of the session (also when a later command recovers it).
func (r *runner) afterSession(ctx context.Context, n int, m *marker.Result, o outcome, validAt time.Time) error {
	if o.failed() {
		return r.retry(ctx, n, m, o)
	}
	return r.hibernate(ctx, n, m, o, validAt)
}

// verdict is what steps 1 to 3 conclude about a block's markers.
type verdict struct {
	next       *time.Time // when to wake (nil: the plan is complete)
	planWake   *time.Time // the WAKE marker's time (nil: none)
	warnings   []string   // for the next prompt
	nextReason string
	cmdLine    string // the command of the next session ("" = the agent)
	task       string
}

// judge runs steps 1 to 3 on the markers of session n: are they valid, when is the next wake
// (WAKE, pending TODOs, waiting messages), and can the next command run. validAt is the end of
// the session: relative times count from it and late_grace is measured from it.
func (r *runner) judge(rep *validate.Report, m *marker.Result, validAt time.Time) verdict {
	now := r.now()
	fillReport(rep, m)
	v := verdict{nextReason: "plan", cmdLine: r.st.Command, task: r.st.Task}

	// Step 1: markers parsed. A FALLBACK to a target the operator did not allow is not an
	// error (nothing is sent there, and the chamber goes on), but it is loud: a warning here,
	// in the log, and in the next prompt.
	policy := r.fallbackPolicy(m)
	switch {
	case len(m.Errors) > 0:
		for _, e := range m.Errors {
			rep.Add(1, validate.Fail, "%v", e)
		}
	case m.Exit == nil:
		rep.Add(1, validate.Fail, "no EXIT marker: every session must end with [CRYO:EXIT <0|1|2>] <summary>")
	case len(policy) > 0:
		rep.Add(1, validate.Warn, "EXIT %d, %s; ignored: %s", m.Exit.Code, markerSummary(m), strings.Join(policy, "; "))
		v.warnings = policy
	default:
		rep.Add(1, validate.Pass, "EXIT %d, %s", m.Exit.Code, markerSummary(m))
	}

	// Step 2: the wake time, and the TODOs' times.
	asap := func() *time.Time {
		t := now.Add(armLead).Truncate(time.Second).Add(time.Second)
		return &t
	}
	tooLate := validAt.Add(-r.cfg.LateGrace.D)
	var wakeDetail string
	step2Failed := false
	if m.Wake != nil {
		// Whole seconds, rounded up: WAKE, timer.json and the OS then agree exactly.
		w := ceilSecond(m.Wake.Time.Resolve(validAt).UTC())
		rep.SetWake(w)
		switch {
		case w.Before(tooLate):
			step2Failed = true
			rep.Add(2, validate.Fail, "line %d: WAKE %s is %s before the session ended, more than late_grace (%s)",
				m.Wake.Line, w.Format(time.RFC3339), validAt.Sub(w).Round(time.Second), r.cfg.LateGrace.D)
		case w.Before(now):
			v.next = asap()
			wakeDetail = fmt.Sprintf("WAKE %s is %s past (within late_grace %s): waking as soon as possible, at %s",
				w.Format(time.RFC3339), now.Sub(w).Round(time.Second), r.cfg.LateGrace.D, v.next.Format(time.RFC3339))
		case w.Before(now.Add(armLead)):
			v.next = asap()
			wakeDetail = fmt.Sprintf("WAKE %s is closer than the %s arming lead: armed at %s",
				w.Format(time.RFC3339), armLead, v.next.Format(time.RFC3339))
		default:
			v.next = &w
			wakeDetail = fmt.Sprintf("WAKE %s (%s)", w.Format(time.RFC3339), Relative(w, now))
		}
		if v.next != nil {
			pw := *v.next
			v.planWake = &pw
		}
	}
	for _, t := range m.Todos {
		at := ceilSecond(t.Time.Resolve(validAt).UTC())
		if at.Before(tooLate) {
			step2Failed = true
			rep.Add(2, validate.Fail, "line %d: TODO time %s is %s before the session ended, more than late_grace (%s)",
				t.Line, at.Format(time.RFC3339), validAt.Sub(at).Round(time.Second), r.cfg.LateGrace.D)
			continue
		}
		if at.Before(now.Add(armLead)) {
			at = *asap()
		}
		if v.next == nil || at.Before(*v.next) {
			v.next, v.nextReason = &at, "todo"
		}
	}
	if t, why := r.pendingWake(now); t != nil && (v.next == nil || t.Before(*v.next)) {
		v.next, v.nextReason = t, why
	}
	if !step2Failed {
		switch {
		case v.next == nil:
			rep.PlanComplete = true
			rep.Add(2, validate.Skip, "no WAKE and no pending TODO: the plan is complete")
		case v.nextReason == "plan":
			rep.Add(2, validate.Pass, "%s", wakeDetail)
		default:
			rep.Add(2, validate.Pass, "next wake %s for a %s (%s)", v.next.Format(time.RFC3339), v.nextReason, Relative(*v.next, now))
		}
	}

	// Step 3: the command of the next session.
	var cmd Command
	var err error
	if m.Cmd != nil {
		v.cmdLine = m.Cmd.Raw
		cmd, err = r.cfg.ResolveCMD(m.Cmd.Raw, m.Cmd.Args, r.agentLine())
	} else {
		cmd, err = r.command()
	}
	switch {
	case err != nil:
		rep.Add(3, validate.Fail, "%v", err)
	case v.next == nil && m.Cmd == nil:
		rep.Add(3, validate.Skip, "plan complete: no next command")
	default:
		if p, err := LookPath(cmd.Program(), r.dir, r.capturedPath()); err != nil {
			rep.Add(3, validate.Fail, "%v", err)
		} else {
			rep.Add(3, validate.Pass, "%s → %s", cmdLineOrAgent(v.cmdLine), p)
			if m.Cmd != nil {
				v.task = cmd.Task
			}
		}
	}
	return v
}

// hibernate validates the markers of session n, arms the timers and saves the state.
func (r *runner) hibernate(ctx context.Context, n int, m *marker.Result, o outcome, validAt time.Time) error {
	now := r.now()
	r.lastMarkers = m
	rep := validate.New(r.out)
	rep.Session = n
	v := r.judge(rep, m, validAt)
	if rep.Failed() {
		return r.refuse(ctx, n, rep, o)
	}
	if err := r.addTodos(n, m.Todos, validAt); err != nil {
		rep.Add(7, validate.Fail, "cannot record the TODOs: %v", err)
		return r.refuse(ctx, n, rep, o)
	}
	if v.next == nil {
		return r.complete(ctx, n, m, o, rep)
	}
	if err := r.arm(ctx, rep, *v.next); err != nil {
		return r.refuse(ctx, n, rep, o)
	}
	r.env.checkpoint("armed")
	r.hostChecks(rep)
	if rep.Failed() {
		return r.refuse(ctx, n, rep, o)
	}
	if r.cancelRequested() {
		return r.honourCancel(ctx, n, o)
	}

	r.st.Phase = PhaseArmed
	r.st.Wake = v.next
	r.st.PlanWake = v.planWake
	r.st.Reason = v.nextReason
	r.st.Command = v.cmdLine
	r.st.Task = v.task
	r.st.Retries = 0
	r.recordMarkers(m)
	r.st.Last = &Outcome{Session: n, Exit: o.exit, Summary: exitSummary(m), Reason: o.reason, Start: o.start.UTC(), End: o.end.UTC()}
	r.st.Holder = nil
	if err := r.finishClaims(ctx, n, m, o); err != nil {
		r.printf("warning: %v", err)
	}
	r.st.Claimed = nil
	r.st.Warnings = v.warnings // shown in the next prompt
	rep.Finish()
	if err := r.save(); err != nil {
		return err
	}
	if r.cancelRequested() {
		// cancel ran between our check and the save: it may have removed timers we then armed.
		return r.honourCancel(ctx, n, o)
	}
	rep.WriteVerdict(r.out)
	r.printf("hibernating: session %d at %s (%s)", n+1, v.next.In(r.cfg.Location).Format(time.RFC3339), Relative(*v.next, now))
	r.wakeSoonIfPending(ctx)
	if m.Exit != nil && m.Exit.Code == 2 {
		r.alert(ctx, n, "failure", fmt.Sprintf("session %d reported failure (EXIT 2): %s", n, m.Exit.Summary), m)
	}
	return nil
}

// wakeSoonIfPending re-arms the wake a few seconds ahead when a message (watch_inbox) or a wake
// request arrived after judging: its path unit or RunNow fired while this very service was still
// running, and systemd merged that start into ours.
func (r *runner) wakeSoonIfPending(ctx context.Context) {
	now := r.now()
	_, reqErr := os.Stat(r.private(WakeRequest))
	pending := reqErr == nil || (*r.cfg.WatchInbox && inboxCount(r.dir) > 0)
	if !pending || r.st.Wake == nil || !r.st.Wake.After(now.Add(2*armLead)) {
		return
	}
	t := now.Add(armLead).Truncate(time.Second).Add(time.Second)
	rep := validate.New(io.Discard)
	if err := r.arm(ctx, rep, t); err != nil {
		r.printf("warning: a message arrived during the session but the wake could not be re-armed for it: %v", err)
		return
	}
	r.st.Wake, r.st.Reason = &t, "inbox"
	if reqErr == nil {
		r.st.Reason = "requested"
	}
	if err := r.save(); err != nil {
		r.printf("warning: %v", err)
		return
	}
	r.printf("a message arrived during the session: next wake at %s", t.Format(time.RFC3339))
}

// arm arms the wake timer at t and the fallback timer after it, recording steps 4 to 6.
func (r *runner) arm(ctx context.Context, rep *validate.Report, t time.Time) error {
	be, err := r.backend(ctx)
	if err != nil {
		rep.Add(4, validate.Fail, "%v", err)
		return err
	}
	ch := r.timerChamber()
	wakeJob := timer.Job{Kind: timer.Wake, At: t, Argv: r.wakeArgv()}
	fb := t.Add(r.cfg.FallbackAfter.D).UTC()
	fbJob := timer.Job{Kind: timer.Fallback, At: fb, Argv: r.fallbackArgv()}
	// Both timers in one step (one reload of the user manager). If that fails, the wake alone
	// still decides whether we may hibernate; the dead-man timer is only worth a warning.
	fbErr := be.Arm(ctx, ch, wakeJob, fbJob)
	if fbErr != nil {
		if err := be.Arm(ctx, ch, wakeJob); err != nil {
			rep.Add(4, validate.Fail, "%s: %v", be.Name(), err)
			return err
		}
	}
	rep.Add(4, validate.Pass, "%s %s-wake", be.Name(), r.st.ID)
	got, ok, err := be.Next(ctx, r.st.ID, timer.Wake)
	agree, want := timerAgrees(be.Name(), r.env.Local, t, got)
	switch {
	case err != nil:
		rep.Add(5, validate.Fail, "cannot read the timer back: %v", err)
		return err
	case !ok:
		rep.Add(5, validate.Fail, "%s reports no next elapse for %s-wake", be.Name(), r.st.ID)
		return errors.New("no next elapse")
	case !agree:
		rep.Add(5, validate.Fail, "%s reports the next elapse at %s, want %s", be.Name(), got.UTC().Format(time.RFC3339), want.UTC().Format(time.RFC3339))
		return errors.New("timer mismatch")
	default:
		rep.Add(5, validate.Pass, "%s reports %s", be.Name(), got.UTC().Format(time.RFC3339))
	}
	wt := t.UTC()
	r.st.Timers.Wake = &wt
	r.st.Timers.Fallback = nil
	if fbErr != nil {
		rep.Add(6, validate.Warn, "no dead-man timer: %v", fbErr)
	} else if _, ok, err := be.Next(ctx, r.st.ID, timer.Fallback); err != nil || !ok {
		rep.Add(6, validate.Warn, "the dead-man timer does not report a next elapse (%v)", err)
	} else {
		r.st.Timers.Fallback = &fb
		rep.Add(6, validate.Pass, "dead-man alert at %s (fallback_after %s)", fb.Format(time.RFC3339), r.cfg.FallbackAfter.D)
	}
	r.syncWatch(ctx, be, ch)
	return nil
}

// syncWatch installs or removes the inbox watcher to match watch_inbox.
func (r *runner) syncWatch(ctx context.Context, be timer.Backend, ch timer.Chamber) {
	if *r.cfg.WatchInbox {
		if err := be.Watch(ctx, ch, r.path(inboxDir), r.wakeArgv()); err != nil {
			r.printf("warning: cannot watch the inbox (messages wait for the next wake): %v", err)
			r.st.Timers.Watch = false
			return
		}
		r.st.Timers.Watch = true
		return
	}
	if r.st.Timers.Watch {
		_ = be.Unwatch(ctx, r.st.ID)
	}
	r.st.Timers.Watch = false
}

// ceilSecond rounds t up to a whole second.
func ceilSecond(t time.Time) time.Time {
	s := t.Truncate(time.Second)
	if s.Before(t) {
		s = s.Add(time.Second)
	}
	return s
}

// timerAgrees reports whether the OS's next elapse got matches a timer armed for t, and the time
// the OS should report. systemd keeps the second. launchd has no seconds and no year: it fires
// at the minute t rounds up to, every year, so the comparison is on the calendar (month, day,
// hour, minute in the Mac's zone), which also covers a WAKE more than a year away.
func timerAgrees(backend string, loc *time.Location, t, got time.Time) (bool, time.Time) {
	if backend == "launchd" {
		want, fire, err := timer.CalendarFor(t, loc)
		if err != nil {
			return false, t
		}
		have, _, err := timer.CalendarFor(got, loc)
		return err == nil && have == want, fire
	}
	want := ceilSecond(t)
	return got.Truncate(time.Second).Equal(want), want
}

// hostChecks are steps 7 and 8.
func (r *runner) hostChecks(rep *validate.Report) {
	st, detail := validate.LogWritable(r.logPath())
	rep.Add(7, st, "%s", detail)
	st, detail = validate.FreeDisk(r.dir, r.cfg.MinFreeDisk.N)
	rep.Add(8, st, "%s", detail)
}

// complete ends the plan: no WAKE and nothing pending.
func (r *runner) complete(ctx context.Context, n int, m *marker.Result, o outcome, rep *validate.Report) error {
	if r.cancelRequested() {
		return r.honourCancel(ctx, n, o)
	}
	rep.Add(4, validate.Skip, "plan complete: no timer to arm")
	rep.Add(5, validate.Skip, "plan complete")
	rep.Add(6, validate.Skip, "plan complete")
	r.hostChecks(rep)
	if err := r.disarmAll(ctx); err != nil {
		r.printf("warning: %v", err)
	}
	r.st.Phase = PhaseComplete
	r.st.Wake = nil
	r.st.Reason = ""
	r.st.Retries = 0
	r.recordMarkers(m)
	r.st.Last = &Outcome{Session: n, Exit: o.exit, Summary: exitSummary(m), Reason: o.reason, Start: o.start.UTC(), End: o.end.UTC()}
	r.st.Holder = nil
	r.st.Claimed = nil
	r.st.Warnings = nil
	if err := r.finishClaims(ctx, n, m, o); err != nil {
		r.printf("warning: %v", err)
	}
	rep.Finish()
	rep.OK = true
	if err := r.save(); err != nil {
		return err
	}
	rep.WriteVerdict(r.out)
	r.printf("plan complete after session %d: timers removed", n)
	if m.Exit != nil && m.Exit.Code == 2 {
		r.alert(ctx, n, "failure", fmt.Sprintf("session %d ended the plan with a failure (EXIT 2): %s", n, m.Exit.Summary), m)
	}
	return nil
}

// refuse is a validation refusal: nothing stays armed, the alerts go out, exit 1.
func (r *runner) refuse(ctx context.Context, n int, rep *validate.Report, o outcome) error {
	if r.cancelRequested() {
		// A cancel that raced this session (it may have removed the timer between our arming and
		// the read-back) wins: the operator asked for nothing to run, so nothing is an error.
		return r.honourCancel(ctx, n, o)
	}
	rep.Finish()
	rep.OK = false
	if err := r.disarmAll(ctx); err != nil {
		r.printf("warning: %v", err)
	}
	r.st.Phase = PhaseFailed
	r.st.Wake = nil
	r.st.Holder = nil
	reason := o.reason
	if reason == "" {
		reason = "refused"
	}
	r.st.Last = &Outcome{Session: n, Exit: o.exit, Summary: "refused to hibernate", Reason: reason, Start: o.start.UTC(), End: o.end.UTC()}
	if err := r.finishClaims(ctx, n, r.lastMarkers, o); err != nil {
		r.printf("warning: %v", err)
	}
	r.st.Claimed = nil
	saveErr := r.save()
	rep.WriteVerdict(r.out)
	msg := fmt.Sprintf("session %d: refused to hibernate; no timer is armed.\n%s", n, strings.Join(rep.Errors, "\n"))
	r.alert(ctx, n, "refused", msg, nil)
	if saveErr != nil {
		return saveErr
	}
	return &Error{Status: 1, Msg: fmt.Sprintf("refused to hibernate after session %d: %s", n, strings.Join(rep.Errors, "; ")),
		Hint: "fix the cause, then run `cryochamber start` again (see `cryochamber validate` and `cryochamber log`)"}
}

// retry handles a session that failed without a valid answer: re-arm at +5m, +15m, +60m, then
// give up with alerts.
func (r *runner) retry(ctx context.Context, n int, m *marker.Result, o outcome) error {
	if r.cancelRequested() {
		return r.honourCancel(ctx, n, o)
	}
	now := r.now()
	r.st.Retries++
	max := *r.cfg.MaxRetries
	r.st.Last = &Outcome{Session: n, Exit: 2, Summary: o.detail, Reason: o.reason, Start: o.start.UTC(), End: o.end.UTC()}
	r.recordFallbacksOnly(m)
	if err := r.finishClaims(ctx, n, nil, o); err != nil {
		r.printf("warning: %v", err)
	}
	if r.st.Retries > max {
		if err := r.disarmAll(ctx); err != nil {
			r.printf("warning: %v", err)
		}
		r.st.Phase = PhaseFailed
		r.st.Wake = nil
		r.st.Holder = nil
		r.st.Claimed = nil
		if err := r.save(); err != nil {
			return err
		}
		msg := fmt.Sprintf("session %d failed (%s): %s. No retries left (max_retries = %d); no wake is armed.", n, o.reason, o.detail, max)
		r.alert(ctx, n, o.reason, msg, m)
		return &Error{Status: 1, Msg: fmt.Sprintf("session %d failed (%s) and max_retries (%d) is used up: nothing armed", n, o.reason, max),
			Hint: "read `cryochamber log --session " + fmt.Sprint(n) + "`, fix the agent, then `cryochamber start` again"}
	}
	delay := retryDelays[min(r.st.Retries, len(retryDelays))-1]
	t := ceilSecond(o.end.Add(delay).UTC())
	if t.Before(now.Add(armLead)) {
		t = now.Add(armLead).Truncate(time.Second).Add(time.Second)
	}
	reason := "retry"
	if p, why := r.pendingWake(now); p != nil && p.Before(t) {
		// A TODO (or a message) is due before the retry: wake for it; the retry count stays.
		t, reason = *p, why
	}
	rep := validate.New(r.out)
	rep.Session = n
	rep.Add(1, validate.Fail, "session %d failed (%s): retry %d of %d", n, o.reason, r.st.Retries, max)
	rep.SetWake(t)
	rep.Add(2, validate.Pass, "retry at %s (%s)", t.Format(time.RFC3339), Relative(t, now))
	if err := r.arm(ctx, rep, t); err != nil {
		return r.refuse(ctx, n, rep, o)
	}
	r.st.Phase = PhaseArmed
	r.st.Wake = &t
	r.st.Reason = reason
	r.st.Holder = nil
	r.st.Claimed = nil
	if err := r.save(); err != nil {
		return err
	}
	r.printf("session %d failed (%s); retry %d of %d at %s (%s)", n, o.reason, r.st.Retries, max, t.In(r.cfg.Location).Format(time.RFC3339), Relative(t, now))
	r.notice(n, o.end, o.reason, fmt.Sprintf("Session %d failed (%s): %s.\nRetry %d of %d at %s. No one was alerted yet: alerts go out when the retries are used up.\n",
		n, o.reason, o.detail, r.st.Retries, max, t.Format(time.RFC3339)))
	return &Error{Status: 1, Msg: fmt.Sprintf("session %d failed (%s); retry %d of %d armed at %s", n, o.reason, r.st.Retries, max, t.Format(time.RFC3339)),
		Hint: "see `cryochamber log --session " + fmt.Sprint(n) + "`"}
}

// disarmAll removes every timer and watcher of the chamber.
func (r *runner) disarmAll(ctx context.Context) error {
	r.st.Timers = Timers{}
	be, err := r.backend(ctx)
	if err != nil {
		return fmt.Errorf("cannot reach the timer manager to remove timers: %w", err)
	}
	return disarmID(ctx, be, r.st.ID)
}

func (r *runner) recordMarkers(m *marker.Result) {
	r.st.Plans = nil
	if m == nil {
		return
	}
	for _, p := range m.Plans {
		r.st.Plans = append(r.st.Plans, p.Text)
	}
	r.recordFallbacksOnly(m)
}

func (r *runner) recordFallbacksOnly(m *marker.Result) {
	if m == nil {
		return
	}
	// The dead-man targets are those of the latest session that answered (SPEC 7): a session
	// without FALLBACK markers clears the earlier ones.
	var fbs []FallbackEntry
	for _, f := range m.Fallbacks {
		if r.targetAllowed(f.Action, f.Target) {
			fbs = append(fbs, FallbackEntry{Action: f.Action, Target: f.Target, Message: f.Message})
		}
	}
	r.st.Fallbacks = fbs
}

func fillReport(rep *validate.Report, m *marker.Result) {
	if m.Exit != nil {
		rep.Exit = &validate.ExitInfo{Code: m.Exit.Code, Summary: m.Exit.Summary}
	}
	if m.Cmd != nil {
		s := m.Cmd.Raw
		rep.Cmd = &s
	}
	for _, p := range m.Plans {
		rep.Plans = append(rep.Plans, p.Text)
	}
	for _, f := range m.Fallbacks {
		rep.Fallbacks = append(rep.Fallbacks, validate.FallbackInfo{Action: f.Action, Target: f.Target, Message: f.Message})
	}
	for _, w := range m.Warnings {
		rep.Warnings = append(rep.Warnings, w.Error())
	}
}

func markerSummary(m *marker.Result) string {
	var parts []string
	if m.Wake != nil {
		parts = append(parts, "WAKE "+m.Wake.Time.Raw)
	} else {
		parts = append(parts, "no WAKE")
	}
	if m.Cmd != nil {
		parts = append(parts, "CMD "+m.Cmd.Raw)
	}
	if n := len(m.Plans); n > 0 {
		parts = append(parts, fmt.Sprintf("%d PLAN", n))
	}
	if n := len(m.Fallbacks); n > 0 {
		parts = append(parts, fmt.Sprintf("%d FALLBACK", n))
	}
	if n := len(m.Replies); n > 0 {
		parts = append(parts, fmt.Sprintf("%d REPLY", n))
	}
	if n := len(m.Todos); n > 0 {
		parts = append(parts, fmt.Sprintf("%d TODO", n))
	}
	if n := len(m.Warnings); n > 0 {
		parts = append(parts, fmt.Sprintf("%d warning(s)", n))
	}
	return strings.Join(parts, ", ")
}

func exitSummary(m *marker.Result) string {
	if m == nil || m.Exit == nil {
		return ""
	}
	return m.Exit.Summary
}

func cmdLineOrAgent(line string) string {
	if line == "" {
		return "(the agent)"
	}
	return line
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// mergeEnv overlays vars on base: later keys win, order of first appearance kept.
func mergeEnv(base, vars []string) []string {
	idx := map[string]int{}
	var out []string
	for _, list := range [][]string{base, vars} {
		for _, kv := range list {
			k, _, _ := strings.Cut(kv, "=")
			if i, ok := idx[k]; ok {
				out[i] = kv
				continue
			}
			idx[k] = len(out)
			out = append(out, kv)
		}
	}
	return out
}

func uniqueStrings(in []string) []string {
	var out []string
	for _, s := range in {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// withoutVars drops the named variables (alert secrets) from env.
func withoutVars(env, names []string) []string {
	if len(names) == 0 {
		return env
	}
	out := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, k) {
			out = append(out, kv)
		}
	}
	return out
}

// checkLog moves a corrupt log aside before a new block is appended to it.
func (r *runner) checkLog(now time.Time) {
	_, err := sessionlog.Latest(r.logPath(), r.st.LogOffset)
	var ce *sessionlog.CorruptError
	if !errors.As(err, &ce) {
		return
	}
	aside, mvErr := sessionlog.MoveAside(r.logPath(), now)
	if mvErr != nil {
		r.printf("warning: cryo.log is corrupt (%v) and could not be moved aside: %v", err, mvErr)
		return
	}
	w := fmt.Sprintf("cryo.log was corrupt (%v) and was moved aside to %s; the history in cryo.log starts fresh (NOTES.md is intact)", ce, filepath.Base(aside))
	r.printf("warning: %s", w)
	r.warnings = append(r.warnings, w)
	r.st.Warnings = append(r.st.Warnings, w)
	r.st.LogOffset = 0
}

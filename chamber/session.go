package chamber

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/agent"
	"github.com/cryochamber/cryochamber/internal/confined"
	"github.com/cryochamber/cryochamber/internal/program"
	"github.com/cryochamber/cryochamber/internal/sandbox"
	"github.com/cryochamber/cryochamber/marker"
	"github.com/cryochamber/cryochamber/sessionlog"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/validate"
)

// armLead is how far ahead a wake that is already due is armed. A timer must not elapse while
// its own wake service is still running: systemd merges that start into the running job and the
// wake is lost. 5 s covers saving the state and exiting.
const armLead = 5 * time.Second

// hibernateTimeout bounds judging, arming and alerting after a session.
const hibernateTimeout = 60 * time.Second

// Ending is how a session ended when it did not answer with valid markers; the END line of its
// block and the state record it as a word (reason=crashed).
type Ending string

const (
	Answered       Ending = ""             // a valid EXIT (0, 1 or 2)
	EndInvalid     Ending = "invalid"      // it answered, but its markers cannot be used: refused
	EndNoExit      Ending = "no-exit"      // exited 0 without an EXIT marker: retried
	EndCrashed     Ending = "crashed"      // exited non-zero, or was killed, without one: retried
	EndTimeout     Ending = "timeout"      // killed at session_timeout: retried
	EndInterrupted Ending = "interrupted"  // cryochamber was stopped (shutdown, logout): retried
	EndAgentFailed Ending = "agent-failed" // the agent did not start: retried
	EndLog         Ending = "log"          // the chamber could not be written: retried
)

// outcome is how a session's agent run ended, before its markers are judged.
type outcome struct {
	start, end time.Time
	exit       int    // the END line's exit
	reason     Ending // Answered, or why it counts as exit 2
	detail     string
}

// failed reports a session that did not answer (it is retried), as opposed to one that answered
// wrongly (invalid markers: refused) or answered.
func (o outcome) failed() bool { return o.reason != Answered && o.reason != EndInvalid }

// runSession runs session n, due at due, then hibernates. It is the only place an agent runs.
func (r *runner) runSession(ctx context.Context, n int, due time.Time, why Why) error {
	start := r.now()
	var early *time.Time
	if pw := r.st.PlanWake; pw != nil && pw.After(start) && why.early() {
		// Woken before the plan's own WAKE: the prompt says the plan's wake is kept.
		t := *pw
		early = &t
	}
	cmd, cmdErr := r.command()

	r.st.Phase = PhaseRunning
	r.st.Session = n
	r.st.Wake = &due
	r.st.Reason = why
	f := &finishing{n: n, why: why, due: &due}
	r.st.Holder = &Holder{PID: r.env.PID, Session: n, Since: start.UTC().Truncate(time.Second), Command: "wake"}
	r.countSession(start) // guardrails.go
	// The claim is committed by saving the state (phase running, the claimed names); only then
	// are the files moved, so a crash at any point leaves the batch in the inbox or the archive,
	// and the next command hands the same batch to the same session.
	r.rotateMailbox()
	names, err := r.claimNames()
	if err != nil {
		names = nil // an unreadable inbox waits; the session runs
		r.warnf("%v", err)
	}
	if err := r.save(); err != nil {
		// Nothing can be recorded (a full disk, a read-only file system): the session cannot
		// run, and the timer that woke us has fired. Say so now, to the operator's targets.
		r.alert(ctx, n, "disk", fmt.Sprintf("session %d cannot start: %v. Nothing ran and no new timer could be recorded.", n, err),
			fmt.Sprintf("free space (or make it writable) where the state lives (%s) and the chamber (%s), then run: cryochamber wake --dir %s --now", string(r.store), r.dir, r.dir), nil)
		return err
	}
	r.store.clearFlag(requestName)
	r.env.checkpoint("claimed")
	batch, claimErr := r.claim(start, names)
	// Every session has a dead-man, whatever woke it: if this process dies, or the agent hangs,
	// someone is told at start + fallback_after.
	// Armed while the log and the chamber are checked and snapshotted, waited for before the
	// SESSION line (deadman_async.go).
	r.startDeadman(ctx, start)
	defer r.joinDeadman()
	r.heartbeatStart(ctx, n) // bounded: a few seconds at most (heartbeat.go)
	// The connection to the timer manager is kept across the agent's run (up to hours): if the
	// bus went away meanwhile, the first call after fails as a dropped connection and
	// withBackend dials again.

	r.checkLog(start)
	r.checkPrivateDir(start)
	r.snapshotBefore(ctx, n) // snapshot.go: never stops the session
	r.joinDeadman()          // deadman_async.go: armed before the SESSION line, as it always was
	meta := []string{"task: " + oneLine(cmd.Task), "command: " + oneLine(cmd.Line), "due: " + due.UTC().Format(time.RFC3339) + " (" + string(why) + ")"}
	block, err := sessionlog.Begin(r.logPath(), n, start, meta)
	if err == nil {
		err = claimErr
	}
	if err != nil {
		// The chamber cannot be written (full, read-only, its mailbox broken): the session did
		// not run. That is a failure of the moment, retried like a crash, never a reason to
		// stop the plan for good.
		if block != nil {
			_ = block.End(r.now(), 2, "log")
		}
		end := r.now().UTC().Truncate(time.Second)
		f.o = outcome{start: start.UTC().Truncate(time.Second), end: end, exit: 2, reason: EndLog,
			detail: fmt.Sprintf("the chamber cannot be written, so the session did not run: %v", err)}
		return r.retry(ctx, f)
	}
	// Recorded with the agent's process group as it starts (agent.json, agentfile.go: no save
	// of the state, which is two fsyncs). Until then the state holds the previous offset, a
	// hint that Latest checks, and the dead-man it had: a crash here is recovered from the
	// holder alone.
	r.st.LogOffset = block.Offset()
	r.env.checkpoint("header")

	parser := marker.NewParser(r.cfg.Location)
	rec := &markerRecorder{}
	block.OnStdoutLine(func(n int, text string) {
		parser.Line(n, text)
		rec.add(n, text)
	})

	var res agent.Result
	if cmdErr == nil {
		cmdErr = r.checkRunnable(cmd)
	}
	if cmdErr != nil {
		_ = block.Note("cannot run the command: " + cmdErr.Error())
		res = agent.Result{ExitCode: -1, Err: cmdErr}
	} else {
		res = r.execute(ctx, n, cmd, due, why, early, batch, block)
	}
	var sbErr *sandbox.Error
	if errors.As(res.Err, &sbErr) {
		// Never run unconfined silently: the operator hears of it now, and the session is
		// retried like one that failed.
		_ = block.Note(fmt.Sprintf("hint: %s", sbErr.Hint))
		r.alert(context.WithoutCancel(ctx), n, "sandbox", fmt.Sprintf("Session %d did not run: %v. The agent was not started.", n, sbErr), sbErr.Hint, nil)
	}
	result := parser.Result()
	o := classify(res, result, r.cfg.SessionTimeout.D)
	// Whole seconds, as the log records them: a recovery that re-reads the block then derives
	// the same reply and notice names, and writes each once.
	o.start, o.end = start.UTC().Truncate(time.Second), r.now().UTC().Truncate(time.Second)
	if o.detail != "" {
		_ = block.Note(o.detail)
	}
	if err := block.End(o.end, o.exit, string(o.reason)); err != nil {
		// The block could not be closed: the next command will find it torn and count the
		// session as crashed. Say so now too.
		r.warnf("cannot close session %d in the log: %v", n, err)
	} else if ref, ok := block.Ref(); ok {
		r.recordBlock(ref, rec)
	}
	r.env.checkpoint("ended")
	r.printf("session %d: %s", n, describe(o, result))
	r.snapshotAfter(ctx, f) // snapshot.go: a failure is a warning and a notice, never a stop
	// What follows must finish even when we were stopped (a shutdown sends SIGTERM and waits
	// about 90 s): without a context of its own, arming the retry would fail and the chamber
	// would stop for good after an ordinary reboot.
	ctx, cancel := context.WithTimeout(withStop(context.WithoutCancel(ctx), ctx), hibernateTimeout) // contention.go: the stop is still seen
	defer cancel()
	f.m, f.o = result, o
	var pinErr *programChanged
	if errors.As(cmdErr, &pinErr) {
		rep := validate.New(r.out)
		rep.Session = n
		rep.Add(validate.StepCommand, validate.Fail, "%v", cmdErr)
		return r.refuse(ctx, f, rep)
	}
	return r.afterSession(ctx, f, o.end)
}

// programChanged is a program inside the chamber that is not the one the operator accepted.
type programChanged struct{ err error }

func (e *programChanged) Error() string { return e.err.Error() }

// checkRunnable resolves the command's program the way the session will run it, and refuses a
// program inside the chamber that changed since it was accepted.
func (r *runner) checkRunnable(cmd Command) error {
	p, err := program.Look(cmd.Program(), r.dir, r.capturedPath())
	if err != nil {
		return nil // the agent runner says what to fix, and the session is retried
	}
	if err := r.checkPinned(p, cmd); err != nil {
		return &programChanged{err}
	}
	return nil
}

// execute runs the agent (or plain step) of session n with its prompt.
func (r *runner) execute(ctx context.Context, n int, cmd Command, due time.Time, why Why, early *time.Time, batch *claimBatch, block *sessionlog.Block) agent.Result {
	now := r.now()
	data := agent.PromptData{
		Now:             now.In(r.cfg.Location),
		Session:         n,
		Dir:             r.dir,
		Plan:            filepath.Join(r.dir, r.planName()),
		Notes:           filepath.Join(r.dir, NotesFile),
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
	if g := r.st.Guard; g != nil {
		data.Limits = g.Notes // guardrails.go
	}
	if l := r.st.Last; l != nil {
		data.Previous = &agent.Previous{Session: l.Session, Exit: l.Exit, Summary: l.Summary, Plans: r.st.Plans, End: l.End}
	}
	if late := now.Sub(due); late > r.cfg.DelayedAfter.D && why != WhyStart && why != WhyInbox && why != WhyRequested {
		data.Delayed = &agent.Delay{Due: due.In(r.cfg.Location), Late: late}
	}
	if early != nil {
		by := map[Why]string{WhyInbox: "messages (below)", WhyTodo: "a TODO (below)", WhyRequested: "a request (send --wake or wake --now)"}[why]
		data.Early = &agent.Early{Scheduled: early.In(r.cfg.Location), By: by}
	}
	batch.fill(&data)
	for _, t := range r.loadTodos().Items {
		if t.Status == "pending" {
			data.Pending = append(data.Pending, agent.Todo{Text: t.Text, Due: t.At.In(r.cfg.Location), Attempt: t.Attempt})
		}
	}
	prompt, err := agent.Prompt(data)
	if err != nil {
		return agent.Result{ExitCode: -1, Err: fmt.Errorf("render prompt: %w", err)}
	}
	promptFile := filepath.Join(r.dir, PrivateDir, PromptName)
	if err := r.writePrompt(prompt); err != nil {
		return agent.Result{ExitCode: -1, Err: fmt.Errorf("write the prompt file: %w", err)}
	}

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
	inv.Argv = r.budgetArgs(cmd, inv.Argv) // ledger.go: claude's --max-budget-usd
	// Run exactly the file that was resolved (and, inside the chamber, checked against its pin).
	if p, err := program.Look(inv.Argv[0], r.dir, r.capturedPath()); err == nil {
		inv.Argv = append([]string{p}, inv.Argv[1:]...)
	}
	// Every session runs in the cage (sandbox.go): what the agent planted in its chamber runs,
	// if at all, inside the same walls. A cage that cannot be set up runs nothing.
	cage, err := r.sessionCage(ctx, cmd, inv.Env, true)
	if err != nil {
		return agent.Result{ExitCode: -1, Err: err}
	}
	r.printf("session %d: running %s", n, strings.Join(cmd.Words, " "))
	stdout, done := r.usageOutput(cmd, block) // ledger.go: a preset's JSON output, read for its text and usage
	defer done()
	return agent.Exec(ctx, agent.Run{
		Cage:       cage,
		Invocation: inv,
		Dir:        r.dir,
		Timeout:    r.cfg.SessionTimeout.D,
		Stdout:     stdout,
		Stderr:     block.Stderr(),
		// Recorded so that a recovery after this process died ends what it left running
		// (launchd does not clean up a job's other process groups), with the session's
		// dead-man and log offset: in agent.json, without fsync (agentfile.go).
		Started: r.recordAgent,
	})
}

// writePrompt writes the prompt to .cryo/prompt.md in the chamber (for agents that take a
// file), through the confined opener: a symlink planted there is replaced, never written
// through.
func (r *runner) writePrompt(prompt string) error {
	if r.fs == nil {
		return r.fsErr
	}
	if err := r.fs.MkdirAll(PrivateDir, 0o700); err != nil {
		return err
	}
	// Read by the agent at once and written again by every session: no fsync.
	return r.fs.WriteView(filepath.Join(PrivateDir, PromptName), []byte(prompt), 0o600)
}

// checkPrivateDir moves aside whatever took the name of the chamber's .cryo directory (a plain
// file, a symlink), as checkLog does for a damaged log: otherwise every session would fail
// writing its prompt file there until a person looked.
func (r *runner) checkPrivateDir(now time.Time) {
	if r.fs == nil {
		return
	}
	fi, err := r.fs.Lstat(PrivateDir)
	if err != nil || fi.IsDir() {
		return
	}
	aside := fmt.Sprintf("%s.moved-aside-%s", PrivateDir, now.UTC().Format("20060102T150405Z"))
	if err := r.fs.Rename(PrivateDir, aside); err != nil {
		r.warnf("%s is not a directory and cannot be moved aside: %v", PrivateDir, err)
		return
	}
	w := fmt.Sprintf("%s was not a directory (%s); it was moved aside to %s", PrivateDir, confined.Kind(fi.Mode().Type()), aside)
	r.warnf("%s", w)
	r.warnings = append(r.warnings, w)
}

// classify decides how a run ended: answered (valid EXIT), or failed and why.
func classify(res agent.Result, m *marker.Result, timeout time.Duration) outcome {
	switch {
	case res.Canceled:
		// Stopped from outside (shutdown, logout, Ctrl-C): whatever it printed is not an answer.
		return outcome{exit: 2, reason: EndInterrupted, detail: "the session was interrupted (cryochamber was stopped: shutdown, logout or a signal) and the agent killed"}
	case res.TimedOut:
		return outcome{exit: 2, reason: EndTimeout, detail: fmt.Sprintf("agent killed after session_timeout (%s) with its whole process group", timeout)}
	case res.Err != nil:
		return outcome{exit: 2, reason: EndAgentFailed, detail: "agent did not run: " + res.Err.Error()}
	}
	agentDetail := fmt.Sprintf("agent exited with status %d after %s", res.ExitCode, res.Duration.Round(time.Millisecond))
	if res.Signal != "" {
		agentDetail = fmt.Sprintf("agent killed by signal %s after %s", res.Signal, res.Duration.Round(time.Millisecond))
	}
	if len(m.Errors) > 0 {
		// The agent answered, but its answer cannot be used: the session counts as a failure
		// (exit=2 reason=invalid in the log), whatever EXIT it printed.
		return outcome{exit: 2, reason: EndInvalid, detail: agentDetail + fmt.Sprintf(", with %d invalid marker(s)", len(m.Errors))}
	}
	if m.Exit == nil {
		if res.ExitCode != 0 {
			return outcome{exit: 2, reason: EndCrashed, detail: agentDetail + ", without an EXIT marker"}
		}
		return outcome{exit: 2, reason: EndNoExit, detail: agentDetail + ", without an EXIT marker"}
	}
	return outcome{exit: m.Exit.Code, detail: agentDetail}
}

func describe(o outcome, m *marker.Result) string {
	switch {
	case o.reason == EndInvalid:
		return fmt.Sprintf("markers invalid (%d problem(s))", len(m.Errors))
	case o.failed():
		return fmt.Sprintf("failed (%s): %s", o.reason, o.detail)
	}
	return fmt.Sprintf("EXIT %d %s", o.exit, m.Exit.Summary)
}

// afterSession judges a finished session and hibernates, retries or refuses. validAt is the time
// the markers are judged at: the end of the session (also when a later command recovers it).
func (r *runner) afterSession(ctx context.Context, f *finishing, validAt time.Time) error {
	r.reportCLIConfig(ctx, f.n) // code-bearing CLI configuration the session left (cliconfig.go)
	r.bookSpend(f, f.m)         // ledger.go: before the next wake is chosen
	if f.o.reason == EndInterrupted {
		return r.retryAfterShutdown(ctx, f) // shutdown.go
	}
	if f.o.failed() {
		return r.retry(ctx, f)
	}
	return r.hibernate(ctx, f, validAt)
}

// checkLog moves aside a log that cannot be appended to safely before a new block is appended:
// a corrupt one, or a name that is not a regular file (a symlink planted to make us append
// elsewhere, a FIFO).
func (r *runner) checkLog(now time.Time) {
	if cb := r.closedBlock(); cb != nil {
		if info, err := sessionlog.Trusted(r.logPath(), cb.Ref); err == nil && info != nil {
			return // the log still ends with the block this program closed and checked as it wrote it
		}
	}
	_, err := sessionlog.Latest(r.logPath(), r.st.LogOffset)
	var ce *sessionlog.CorruptError
	if !errors.As(err, &ce) && !errors.Is(err, confined.ErrNotRegular) {
		return
	}
	aside, mvErr := sessionlog.MoveAside(r.logPath(), now)
	if mvErr != nil {
		r.warnf("cryo.log cannot be used (%v) and could not be moved aside: %v", err, mvErr)
		return
	}
	w := fmt.Sprintf("cryo.log could not be used (%v) and was moved aside to %s; the history in cryo.log starts fresh (NOTES.md is intact)", err, filepath.Base(aside))
	r.warnf("%s", w)
	r.warnings = append(r.warnings, w)
	r.st.Warnings = append(r.st.Warnings, w)
	r.st.LogOffset = 0
}

// timerChamber describes the chamber to the timer backend.
func (r *runner) timerChamber() timer.Chamber {
	return timer.Chamber{
		ID:      r.id,
		Dir:     r.dir,
		EnvFile: r.store.path(EnvFileName),
		Env:     r.launchdEnv(),
		Stdout:  r.store.path(launchdOut),
		Stderr:  r.store.path(launchdErr),
		Boot:    r.bootArgv(),       // degraded.go: the installed binary, else the pinned copy
		Cluster: r.cfg.SbatchArgs(), // [slurm] (config_slurm.go)
	}
}

func (r *runner) wakeArgv() []string { return []string{r.wakeBinary(), "wake", "--dir", r.dir} }

// fallbackArgv is what the dead-man and alert timers run: the pinned copy of the binary.
func (r *runner) fallbackArgv() []string {
	return []string{r.fallbackBinary(), "fallback", "--dir", r.dir}
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

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// uniqueStrings drops repeated strings, keeping the first of each in order, in linear time
// (the warnings of a wake may be many).
func uniqueStrings(in []string) []string {
	var out []string
	seen := make(map[string]bool, len(in))
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

package chamber

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/agent"
	"github.com/cryochamber/cryochamber/internal/atomicfile"
	"github.com/cryochamber/cryochamber/marker"
	"github.com/cryochamber/cryochamber/sessionlog"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/validate"
)

// dueTolerance absorbs clock granularity between the OS timer and our clock: a timer never
// fires before its time, but the two clocks may round differently.
const dueTolerance = 2 * time.Second

// WakeOptions are the options of `cryochamber wake`.
type WakeOptions struct {
	Dir string
	Now bool // run a session now even if none is due
}

// Wake is what the OS timer runs: it runs the session that is due, or does nothing.
func Wake(ctx context.Context, env *Env, opts WakeOptions) error {
	dir, err := AbsDir(opts.Dir)
	if err != nil {
		return err
	}
	r, done, err := acquire(dir, env, "wake")
	if err != nil || done {
		return err
	}
	defer r.close()

	if recovered, err := r.recover(ctx); recovered || err != nil {
		return err
	}
	due, reason := r.due(opts.Now)
	if !due {
		r.printf("%s", reason)
		if r.st.Phase == PhaseArmed {
			_ = sessionlog.AppendNote(r.logPath(), r.now(), "wake: "+reason)
			r.repairWakeTimer(ctx)
		}
		return nil
	}
	if reason == "inbox" {
		r.settleInbox(ctx)
	}
	wakeAt := r.now()
	if r.st.Wake != nil && reason != "inbox" && reason != "requested" {
		wakeAt = *r.st.Wake
	}
	return r.runSession(ctx, r.st.Session+1, wakeAt, reasonFor(reason, r.st.Reason))
}

func reasonFor(why, stateReason string) string {
	if why == "due" {
		if stateReason == "" {
			return "plan"
		}
		return stateReason
	}
	return why
}

// acquire takes the lock of an existing chamber and loads it. done is true when another live
// process holds the lock: that is not a failure, the message says who holds it.
func acquire(dir string, env *Env, command string) (r *runner, done bool, err error) {
	cfg, st, err := loadForCommand(dir, env)
	if err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) {
			alertBrokenConfig(dir, env, ce)
		}
		return nil, false, err
	}
	lock, err := TryLock(dir)
	if errors.Is(err, ErrLocked) && command == "wake" {
		// A wake must not be lost to a short holder (the dead-man check, cancel, a repair) that
		// fired at the same moment, as both timers do after a boot. Only a running session makes
		// a wake redundant.
		lock, err = waitLock(dir, env)
	}
	if errors.Is(err, ErrLocked) {
		fmt.Fprintln(env.Stdout, holderMessage(dir, env.Now()))
		return nil, true, nil
	}
	if err != nil {
		return nil, false, &Error{Status: 1, Err: err, Hint: "check the permissions of " + filepath.Join(dir, PrivateDir)}
	}
	// Reload under the lock: the state may have changed while we waited for nothing.
	if st2, err := LoadState(dir); err == nil {
		st = st2
	}
	r = &runner{env: env, dir: dir, cfg: cfg, st: st, lock: lock, out: env.Stdout}
	if changed := r.checkPin(); len(changed) > 0 {
		err := r.refuseTampered(changed)
		r.close()
		return nil, false, err
	}
	atomicfile.RemoveStale(dir, StateFile)
	atomicfile.RemoveStale(dir, TodoFile)
	r.redeliverPending(context.Background())
	if h := st.Holder; h != nil && h.PID != env.PID {
		r.printf("warning: took over the lock from pid %d (session %d, %s since %s), which died holding it",
			h.PID, h.Session, h.Command, h.Since.Format(time.RFC3339))
	}
	return r, false, nil
}

// alertBrokenConfig reports a cryo.toml that no longer loads, once: the timer that ran us has
// fired and nothing else will wake the chamber, so this must not end in the journal only. The
// alert uses the configuration the operator last accepted.
func alertBrokenConfig(dir string, env *Env, cfgErr *ConfigError) {
	lock, err := TryLock(dir)
	if err != nil {
		return
	}
	st, err := LoadState(dir)
	if err != nil || !st.Phase.Active() {
		lock.Unlock()
		return
	}
	r := &runner{env: env, dir: dir, st: st, lock: lock, out: env.Stdout}
	defer r.close()
	r.cfg = r.acceptedConfig()
	if r.cfg == nil {
		r.cfg, _ = ParseConfig(ConfigFile, nil, env.Local)
	}
	_ = r.stopAndAlert("cryo.toml no longer loads (" + cfgErr.Error() + ")")
}

// waitLock waits (at most lockWait) for a lock held by something other than a running session.
func waitLock(dir string, env *Env) (*Lock, error) {
	deadline := time.Now().Add(lockWait)
	for {
		if st, err := LoadState(dir); err == nil && st.Phase == PhaseRunning {
			return nil, ErrLocked // a session is running: this wake has nothing to do
		}
		lock, err := TryLock(dir)
		if !errors.Is(err, ErrLocked) || time.Now().After(deadline) {
			return lock, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// lockWait bounds how long a wake waits for a short holder of the lock.
const lockWait = 2 * time.Minute

// holderMessage says who holds the lock, from what the holder recorded in timer.json.
func holderMessage(dir string, now time.Time) string {
	st, err := LoadState(dir)
	if err != nil || st.Holder == nil {
		return "another cryochamber process holds the chamber's lock; nothing to do"
	}
	h := st.Holder
	return fmt.Sprintf("session %d is running (pid %d, %s since %s, %s); nothing to do",
		h.Session, h.PID, h.Command, h.Since.Format(time.RFC3339), Relative(h.Since, now))
}

// due decides whether a session should run now, and why not when it should not.
func (r *runner) due(force bool) (bool, string) {
	now := r.now()
	if r.cancelRequested() {
		return false, "chamber is cancelled; nothing to do"
	}
	switch r.st.Phase {
	case PhaseComplete:
		return false, "plan is complete; nothing to do"
	case PhaseFailed:
		return false, "chamber failed and is stopped (see `cryochamber status`); nothing to do"
	case PhaseCancelled:
		return false, "chamber is cancelled; nothing to do"
	}
	if force {
		return true, "requested"
	}
	if _, err := os.Stat(r.private(WakeRequest)); err == nil {
		return true, "requested"
	}
	if r.st.Wake != nil && !now.Before(r.st.Wake.Add(-dueTolerance)) {
		return true, "due"
	}
	if *r.cfg.WatchInbox && inboxCount(r.dir) > 0 {
		return true, "inbox"
	}
	if t := r.earliestTodo(); t != nil && !now.Before(t.Add(-dueTolerance)) {
		return true, "todo"
	}
	return false, fmt.Sprintf("not due: next wake at %s (%s); nothing to do", r.st.Wake.UTC().Format(time.RFC3339), Relative(*r.st.Wake, now))
}

// repairWakeTimer re-arms the wake timer when the OS no longer agrees with timer.json: a timer
// removed behind our back, or a launchd job that fired early (launchd repeats a calendar yearly,
// so after an early fire it would not fire again for a year).
func (r *runner) repairWakeTimer(ctx context.Context) {
	if r.st.Wake == nil || r.cancelRequested() {
		return
	}
	be, err := r.backend(ctx)
	if err != nil {
		r.printf("warning: cannot check the wake timer: %v", err)
		return
	}
	got, ok, err := be.Next(ctx, r.st.ID, timer.Wake)
	if err != nil {
		r.printf("warning: cannot check the wake timer: %v", err)
		return
	}
	agree := false
	if _, err := os.Stat(r.st.Binary); r.st.Binary != "" && err != nil {
		ok = false // the timers run a binary that is gone: re-arm with this one
	}
	if ok {
		agree, _ = timerAgrees(be.Name(), r.env.Local, *r.st.Wake, got)
		if agree && got.After(r.st.Wake.Add(2*time.Minute)) {
			agree = false // the right calendar, but next year's
		}
	}
	if agree {
		return
	}
	rep := validate.New(r.out)
	if err := r.arm(ctx, rep, *r.st.Wake); err != nil {
		r.printf("warning: the wake timer disagreed with timer.json and could not be re-armed: %v", err)
		return
	}
	_ = r.save()
	note := fmt.Sprintf("wake: the %s wake timer disagreed with timer.json; re-armed it for %s", be.Name(), r.st.Wake.UTC().Format(time.RFC3339))
	_ = sessionlog.AppendNote(r.logPath(), r.now(), note)
	r.printf("%s", note)
}

// recover finishes what a process that died holding the lock left behind. recovered is true
// when it did something that ends this command (it hibernated or ran a session).
func (r *runner) recover(ctx context.Context) (bool, error) {
	if r.st.Phase != PhaseRunning {
		if h := r.st.Holder; h != nil {
			// Died after saving a finished state but before clearing the holder: harmless.
			r.st.Holder = nil
		}
		return false, nil
	}
	n := r.st.Session
	info, err := sessionlog.Latest(r.logPath(), r.st.LogOffset)
	var ce *sessionlog.CorruptError
	if errors.As(err, &ce) {
		r.checkLog(r.now())
		info, err = nil, nil
	}
	if err != nil && !errors.Is(err, sessionlog.ErrNoBlocks) {
		return true, &Error{Status: 1, Msg: "cannot read cryo.log to recover session " + fmt.Sprint(n), Err: err,
			Hint: "check that cryo.log is readable; `cryochamber status` shows the state"}
	}
	due := r.now()
	if r.st.Wake != nil {
		due = *r.st.Wake
	}
	if info == nil || info.Session < n {
		// The session was claimed but its block never started: run it now, with its claims.
		r.printf("recovering: session %d was claimed but never started; running it now", n)
		return true, r.runSession(ctx, n, due, r.st.Reason)
	}
	if info.Session > n {
		return true, &Error{Status: 1, Msg: fmt.Sprintf("cryo.log holds session %d but timer.json says session %d: they disagree", info.Session, n),
			Hint: "inspect cryo.log and timer.json; `cryochamber cancel` then `start` begins again with the next number"}
	}
	m, err := r.blockMarkers(info)
	if err != nil {
		return true, err
	}
	if info.End == nil {
		closed, err := sessionlog.CloseTorn(r.logPath(), r.now())
		if err != nil {
			return true, &Error{Status: 1, Msg: "cannot close the crashed session in cryo.log", Err: err}
		}
		end := r.now()
		if closed != nil && closed.End != nil {
			end = closed.End.End
		}
		r.printf("recovering: session %d crashed (its process died); closed its block as failed", n)
		o := outcome{start: info.Start, end: end, exit: 2, reason: "crashed", detail: "the session's process died before it finished"}
		return true, r.retry(ctx, n, m, o)
	}
	r.printf("recovering: session %d finished but did not hibernate; finishing now", n)
	o := outcome{start: info.Start, end: info.End.End, exit: info.End.Exit, reason: info.End.Reason}
	return true, r.afterSession(ctx, n, m, o, info.End.End)
}

// blockMarkers parses the markers of a block from the log (the recovery and validate paths;
// a live session parses while it streams).
func (r *runner) blockMarkers(info *sessionlog.Info) (*marker.Result, error) {
	p := marker.NewParser(r.cfg.Location)
	err := sessionlog.Each(r.logPath(), info, func(l sessionlog.Line) error {
		if l.Kind == sessionlog.Stdout {
			p.Line(l.N, l.Text)
		}
		return nil
	})
	if err != nil {
		return nil, &Error{Status: 1, Msg: fmt.Sprintf("cannot read session %d from cryo.log", info.Session), Err: err}
	}
	return p.Result(), nil
}

// settleInbox waits until messages stop arriving (1 s without a new one, at most 10 s), so that
// messages sent together are seen by one session.
func (r *runner) settleInbox(ctx context.Context) {
	last := inboxCount(r.dir)
	quiet := 0
	for i := 0; i < 50 && quiet < 5; i++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
		if n := inboxCount(r.dir); n != last {
			last, quiet = n, 0
		} else {
			quiet++
		}
	}
}

// StartOptions are the options of `cryochamber start`.
type StartOptions struct {
	Plan    string // path of the plan file; its directory becomes the chamber
	Agent   string // overrides cryo.toml's agent
	Backend string // overrides cryo.toml's backend
}

// Start makes the plan's directory a chamber, runs session 1 now and hibernates.
func Start(ctx context.Context, env *Env, opts StartOptions) error {
	if opts.Plan == "" {
		return usageErr("cryochamber start path/to/plan.md", "start needs the plan file")
	}
	planAbs, err := filepath.Abs(opts.Plan)
	if err != nil {
		return err
	}
	fi, err := os.Stat(planAbs)
	if err != nil {
		return usageErr(fmt.Sprintf("create a chamber with `cryochamber init %s` and write the plan in %s", filepath.Dir(planAbs), filepath.Join(filepath.Dir(planAbs), DefaultPlan)),
			"plan file %s does not exist", planAbs)
	}
	if fi.IsDir() {
		return usageErr("give the plan file, not its directory: cryochamber start "+filepath.Join(planAbs, DefaultPlan), "%s is a directory", planAbs)
	}
	dir, err := AbsDir(filepath.Dir(planAbs))
	if err != nil {
		return err
	}
	if err := checkBinary(env.Binary); err != nil {
		return err
	}
	cfg, err := LoadConfig(dir, env.Local)
	if err != nil {
		return &Error{Status: 2, Err: err, Hint: "fix cryo.toml (`cryochamber init` in an empty directory shows every key with its default)"}
	}
	if opts.Backend != "" {
		cfg.Backend = opts.Backend
	}
	if err := ensurePrivateDir(dir); err != nil {
		return &Error{Status: 1, Err: err}
	}
	lock, err := TryLock(dir)
	if errors.Is(err, ErrLocked) {
		return failErr("wait for it to finish, or `cryochamber cancel --dir "+dir+"`", "%s", holderMessage(dir, env.Now()))
	}
	if err != nil {
		return &Error{Status: 1, Err: err}
	}
	st, err := LoadState(dir)
	switch {
	case errors.Is(err, ErrNoState):
		st = &State{Phase: PhaseComplete}
		// No state, but maybe a log (timer.json removed to start over, a copied chamber):
		// session numbers continue after the log's latest block.
		if info, err := sessionlog.Latest(filepath.Join(dir, LogFile), -1); err == nil {
			st.Session = info.Session
			st.LogOffset = info.Offset
		}
	case err != nil:
		lock.Unlock()
		return &Error{Status: 1, Err: err, Hint: "timer.json is written atomically; if it was edited by hand, restore it or remove it to start over (the log is kept)"}
	}
	r := &runner{env: env, dir: dir, cfg: cfg, st: st, lock: lock, out: env.Stdout}
	defer r.close()

	if st.Phase == PhaseRunning && st.Chamber == dir {
		// A session died holding the lock: finish it the way wake would, and do not start another.
		r.printf("this chamber has an unfinished session %d; recovering it instead of starting", st.Session)
		_, err := r.recover(ctx)
		return err
	}
	if st.Phase == PhaseArmed && st.Chamber == dir && !r.cancelRequested() {
		next := "unknown"
		if st.Wake != nil {
			next = st.Wake.In(cfg.Location).Format(time.RFC3339) + " (" + Relative(*st.Wake, env.Now()) + ")"
		}
		return failErr("to start over: cryochamber cancel --dir "+dir+" && cryochamber start "+planAbs,
			"chamber %s is already active: session %d done, next wake %s", dir, st.Session, next)
	}

	agentLine := cfg.Agent
	if opts.Agent != "" {
		agentLine = opts.Agent
	}
	cmd, err := cfg.AgentLine(agentLine)
	if err != nil {
		return usageErr("set `agent` in cryo.toml or pass --agent", "%v", err)
	}
	if err := r.prepareFiles(); err != nil {
		return &Error{Status: 1, Err: err}
	}
	missing, err := r.captureEnv()
	if err != nil {
		return err
	}
	for _, k := range missing {
		r.printf("warning: agent_env names %s, which is not set in this environment: the agent will not get it", k)
	}
	// Check the agent the way session 1 will run it: on the captured PATH, headless, answering
	// --version (for the known CLIs), so that a missing install or login is said now.
	if err := agent.Check(ctx, *cmd.Agent, r.agentEnv(), dir); err != nil {
		var ce *agent.CheckError
		if errors.As(err, &ce) {
			return usageErr(ce.Hint, "agent %q cannot run: %v", cmd.Line, ce)
		}
		return usageErr(agentHint(cmd), "agent %q cannot run: %v", cmd.Line, err)
	}
	be, err := r.backend(ctx)
	if err != nil {
		return &Error{Status: 1, Msg: "cannot reach the OS timer manager", Err: err, Hint: backendHint(cfg.Backend)}
	}
	for _, w := range be.Warnings(ctx) {
		r.printf("warning: %s", w)
	}

	_ = os.Remove(r.private(CancelledTag))
	_ = os.Remove(r.private(WakeRequest))
	st.Chamber = dir
	st.ID = timer.ID(dir)
	st.Binary = env.Binary // what the timers run from now on (a manual wake by another build does not change it)
	st.Plan = filepath.Base(planAbs)
	st.Agent = opts.Agent
	st.Command = ""
	st.Task = ""
	st.Retries = 0
	st.Timers = Timers{}
	st.Fallbacks = nil
	st.Claimed = nil
	if err := r.accept(); err != nil {
		return &Error{Status: 1, Msg: "cannot record the accepted configuration", Err: err}
	}
	if err := register(env.Registry, dir); err != nil {
		r.printf("warning: cannot record the chamber for `cryochamber ps`: %v", err)
	}
	r.printf("starting chamber %s (%s) with %s", dir, st.ID, cmd.Line)
	return r.runSession(ctx, st.Session+1, env.Now(), "start")
}

func agentHint(cmd Command) string {
	if cmd.Agent != nil && cmd.Agent.Name != "" {
		return fmt.Sprintf("install the %s CLI so that `%s` is on your PATH, or choose another agent with `agent` in cryo.toml", cmd.Agent.Name, cmd.Program())
	}
	return "check the agent command line in cryo.toml (`agent`) or --agent; relative paths are relative to the chamber"
}

func backendHint(name string) string {
	if name == "launchd" {
		return "launchd agents need a logged-in macOS user session (launchctl print gui/$(id -u))"
	}
	return "user timers need a systemd user manager: check `systemctl --user status`; over ssh, log in with a session (or `loginctl enable-linger $USER`) so that $XDG_RUNTIME_DIR is set"
}

// prepareFiles creates what a started chamber needs: NOTES.md, the mailbox, .cryo/.
func (r *runner) prepareFiles() error {
	if err := ensurePrivateDir(r.dir); err != nil {
		return err
	}
	for _, d := range []string{inboxDir, archiveDir, outboxDir} {
		if err := os.MkdirAll(r.path(d), 0o755); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(r.path(NotesFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err == nil {
		f.Close()
	} else if !errors.Is(err, os.ErrExist) {
		return err
	}
	return nil
}

// captureEnv writes the environment file: PATH, HOME and agent_env, mode 0600.
func (r *runner) captureEnv() (missing []string, err error) {
	vars := []string{"PATH=" + r.env.Getenv("PATH"), "HOME=" + r.env.Getenv("HOME")}
	for _, k := range r.cfg.AgentEnv {
		if slices.Contains(r.cfg.secretNames(), k) {
			return nil, usageErr("remove it from agent_env: alert secrets are captured separately and never given to the agent",
				"agent_env names %s, which cryo.toml also uses as an alert secret", k)
		}
		v, ok := lookupEnv(r.env.Environ, k)
		if !ok {
			missing = append(missing, k)
			continue
		}
		vars = append(vars, k+"="+v)
	}
	data, err := timer.FormatEnvFile(vars)
	if err != nil {
		return nil, usageErr("remove the newline or other control character (a tab included) from that variable, or leave it out of agent_env", "cannot capture the environment: %v", err)
	}
	if _, err := privateStateDir(r.env, r.chamberID()); err != nil {
		return nil, &Error{Status: 1, Msg: "cannot create the chamber's private state directory", Err: err}
	}
	if err := writePrivate(r.stateFile(EnvFileName), data); err != nil {
		return nil, &Error{Status: 1, Err: err}
	}
	r.envLoaded, r.envVars = true, vars
	var secrets []string
	for _, k := range r.cfg.secretNames() {
		v, ok := lookupEnv(r.env.Environ, k)
		if !ok || v == "" {
			return nil, usageErr(fmt.Sprintf("export %s before `cryochamber start` (it is captured, mode 0600, outside the chamber, and never given to the agent)", k),
				"cryo.toml names %s for alert delivery, but it is not set", k)
		}
		secrets = append(secrets, k+"="+v)
	}
	data, err = timer.FormatEnvFile(secrets)
	if err != nil {
		return nil, usageErr("the secret must be one line", "cannot capture the alert secrets: %v", err)
	}
	if err := writePrivate(r.stateFile(SecretsFile), data); err != nil {
		return nil, &Error{Status: 1, Err: err}
	}
	return missing, nil
}

func lookupEnv(environ []string, k string) (string, bool) {
	for i := len(environ) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(environ[i], k+"="); ok {
			return v, true
		}
	}
	return "", false
}

// CancelOptions are the options of `cryochamber cancel`.
type CancelOptions struct {
	Dir string
}

// Cancel removes every timer of the chamber and keeps the log. A running session is not
// killed: it finishes, sees the cancel, and does not re-arm.
func Cancel(ctx context.Context, env *Env, opts CancelOptions) error {
	dir, err := AbsDir(opts.Dir)
	if err != nil {
		return err
	}
	if !IsChamber(dir) {
		return cancelOrphan(ctx, env, dir)
	}
	cfg, st, err := loadForCommand(dir, env)
	if err != nil {
		// cryo.toml or timer.json does not load: still remove every timer, by the ID the path
		// gives, so a broken chamber can always be stopped.
		if rmErr := removeByID(ctx, env, dir); rmErr != nil {
			return &Error{Status: 1, Msg: "could not remove the timers", Err: errors.Join(err, rmErr)}
		}
		fmt.Fprintf(env.Stdout, "removed every timer of %s; the chamber's files could not be read (%v): fix them before starting it again\n", dir, err)
		return nil
	}
	// The tombstone first: a session that arms after this point sees it and disarms.
	if err := ensurePrivateDir(dir); err != nil {
		return &Error{Status: 1, Err: err}
	}
	if err := writePrivate(filepath.Join(dir, PrivateDir, CancelledTag), []byte(env.Now().UTC().Format(time.RFC3339)+"\n")); err != nil {
		return &Error{Status: 1, Err: err}
	}
	r := &runner{env: env, dir: dir, cfg: cfg, st: st, out: env.Stdout}
	if st.ID == "" {
		st.ID = timer.ID(dir)
	}
	// A wake arming at this very moment can replace our stop jobs with its own (systemd answers
	// "job canceled"): try again a few times. The tombstone makes that wake disarm in any case.
	var disarmErr error
	for attempt := 0; attempt < 4; attempt++ {
		if disarmErr = r.disarmAll(ctx); disarmErr == nil {
			break
		}
		time.Sleep(time.Duration(100<<attempt) * time.Millisecond)
	}
	lock, err := TryLock(dir)
	if errors.Is(err, ErrLocked) {
		if r.be != nil {
			r.be.Close()
		}
		msg := "timers removed"
		if disarmErr != nil {
			msg = "the running session will remove the timers it arms (" + disarmErr.Error() + ")"
		}
		fmt.Fprintf(env.Stdout, "%s; %s\nit will finish and not re-arm; the log is kept\n", msg, holderMessage(dir, env.Now()))
		return nil
	}
	if disarmErr != nil {
		if r.be != nil {
			r.be.Close()
		}
		if lock != nil {
			lock.Unlock()
		}
		return &Error{Status: 1, Msg: "could not remove every timer", Err: disarmErr, Hint: backendHint(cfg.Backend)}
	}
	if err != nil {
		if r.be != nil {
			r.be.Close()
		}
		return &Error{Status: 1, Err: err}
	}
	r.lock = lock
	defer r.close()
	if st2, err := LoadState(dir); err == nil {
		r.st = st2
		r.st.Timers = Timers{}
	}
	if r.st.Phase == PhaseRunning {
		// A session died: close its block so the log says what happened, and answer what it
		// claimed (messages get a reply, TODOs their retry items).
		if info, err := sessionlog.CloseTorn(r.logPath(), env.Now()); err == nil && info != nil {
			r.printf("closed the block of crashed session %d", info.Session)
		}
		end := env.Now().UTC().Truncate(time.Second)
		o := outcome{start: end, end: end, exit: 2, reason: "crashed", detail: "the session's process died; the chamber was then cancelled"}
		if err := r.finishClaims(ctx, r.st.Session, nil, o); err != nil {
			r.printf("warning: %v", err)
		}
		r.st.Claimed = nil
	}
	r.st.Phase = PhaseCancelled
	r.st.Wake = nil
	r.st.Holder = nil
	if err := r.save(); err != nil {
		return err
	}
	r.printf("cancelled %s: every timer removed; the log is kept (cryochamber log --dir %s)", dir, dir)
	return nil
}

// cancelOrphan removes the timers of a chamber that is gone (moved or deleted with its timers
// still installed): its ID is derived from the path, as when it was armed.
func cancelOrphan(ctx context.Context, env *Env, dir string) error {
	be, err := env.OpenBackend(ctx, "")
	if err != nil {
		return notChamber(dir)
	}
	defer be.Close()
	id := timer.ID(dir)
	installed, err := be.Installed(ctx)
	if err != nil {
		return &Error{Status: 1, Msg: "cannot list the installed timers", Err: err}
	}
	found := false
	for _, in := range installed {
		if in.ID == id {
			found = true
		}
	}
	if !found {
		return notChamber(dir)
	}
	if err := disarmID(ctx, be, id); err != nil {
		return &Error{Status: 1, Msg: "could not remove every timer of " + id, Err: err}
	}
	_ = unregister(env.Registry, dir)
	fmt.Fprintf(env.Stdout, "removed the timers of %s (%s): the chamber itself is gone\n", dir, id)
	return nil
}

// removeByID removes every timer of the chamber at dir, whatever its files say.
func removeByID(ctx context.Context, env *Env, dir string) error {
	be, err := env.OpenBackend(ctx, "")
	if err != nil {
		return err
	}
	defer be.Close()
	return disarmID(ctx, be, timer.ID(dir))
}

func disarmID(ctx context.Context, be timer.Backend, id string) error {
	var errs []error
	for _, k := range timer.Kinds {
		errs = append(errs, be.Disarm(ctx, id, k))
	}
	errs = append(errs, be.Unwatch(ctx, id))
	return errors.Join(errs...)
}

// cancelRequested reports whether `cancel` ran since the last start.
func (r *runner) cancelRequested() bool {
	_, err := os.Stat(r.private(CancelledTag))
	return err == nil
}

// honourCancel is a session that finished after a cancel: remove what it armed, answer what it
// claimed, and end cancelled.
func (r *runner) honourCancel(ctx context.Context, n int, o outcome) error {
	if err := r.disarmAll(ctx); err != nil {
		r.printf("warning: %v", err)
	}
	if err := r.finishClaims(ctx, n, nil, o); err != nil {
		r.printf("warning: %v", err)
	}
	r.st.Phase = PhaseCancelled
	r.st.Wake = nil
	r.st.Holder = nil
	r.st.Claimed = nil
	r.st.Last = &Outcome{Session: n, Exit: o.exit, Summary: "cancelled during the session", Reason: o.reason, Start: o.start.UTC(), End: o.end.UTC()}
	if err := r.save(); err != nil {
		return err
	}
	r.printf("the chamber was cancelled during session %d: nothing armed", n)
	return nil
}

// writePrivate writes a 0600 file atomically.
func writePrivate(path string, data []byte) error {
	return atomicWrite(path, data, 0o600)
}

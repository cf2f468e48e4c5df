package chamber

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/marker"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/validate"
)

// retryDelays are the waits before fast retry 1, 2, 3 of a failed session; later fast retries
// use the last. After max_retries the chamber retries every slow_retry.
var retryDelays = []time.Duration{5 * time.Minute, 15 * time.Minute, 60 * time.Minute}

// hibernate validates the markers of session f, arms the timers and saves the state.
func (r *runner) hibernate(ctx context.Context, f *finishing, validAt time.Time) error {
	n, m, o := f.n, f.m, f.o
	now := r.now()
	f.judged = m
	rep := validate.New(r.out)
	rep.Session = n
	if len(m.Errors) == 0 {
		// TODO-DONE markers first: a TODO the agent finished no longer decides the next wake.
		if err := r.doneTodos(n, m.TodosDone); err != nil {
			r.warnf("cannot record the TODO-DONE markers: %v", err)
		}
	}
	v := r.judge(rep, m, validAt, r.st.Reason)
	if rep.Failed() {
		return r.refuse(ctx, f, rep)
	}
	if err := r.addTodos(f, validAt); err != nil {
		rep.Add(validate.StepLog, validate.Fail, "cannot record the TODOs: %v", err)
		return r.refuse(ctx, f, rep)
	}
	r.guardKey = v.guard.keys()
	if v.next == nil {
		if v.guard != nil && v.guard.End != "" {
			r.guardEnded = v.guard // guardrails.go: the plan ends by a limit, not by the agent
		}
		return r.complete(ctx, f, rep)
	}
	actx, release, err := r.armPatiently(ctx, f, rep, v.next) // contention.go: v.next moves when it fell due meanwhile
	defer release()
	ctx = actx // a fresh context after a slow arming: the first one's time is spent
	if err != nil {
		return r.refuse(ctx, f, rep)
	}
	r.env.checkpoint("armed")
	r.hostChecks(rep)
	if rep.Failed() {
		return r.refuse(ctx, f, rep)
	}
	if r.cancelRequested() {
		return r.honourCancel(ctx, f)
	}
	failingSince := r.st.RetryingSince // set: this session ends a run of failures
	r.st.Phase = PhaseArmed
	r.st.Wake = v.next
	r.st.PlanWake = v.planWake
	r.st.Reason = v.nextReason
	r.st.Command = v.cmdLine
	r.st.Task = v.task
	r.st.Retries = 0
	r.st.RetryingSince = nil
	r.recordMarkers(m)
	r.st.Last = r.outcomeRecord(f, exitSummary(m))
	r.st.Holder = nil
	if err := r.finishClaims(f, m); err != nil {
		r.warnf("%v", err)
	}
	r.st.Claimed = nil
	r.st.Warnings = v.warnings // shown in the next prompt
	rep.Finish()
	if err := r.save(); err != nil {
		return err
	}
	r.recordHistory(f, m, "")
	r.fileSummary(f, v.next)
	if r.cancelRequested() {
		// cancel ran between our check and the save: it may have removed timers we then armed.
		return r.honourCancel(ctx, f)
	}
	rep.WriteVerdict(r.out)
	r.printf("hibernating: session %d at %s (%s)", n+1, v.next.In(r.cfg.Location).Format(time.RFC3339), Relative(*v.next, now))
	r.guardTell(ctx, n, v.guard) // guardrails.go: saved by saveLast
	r.heartbeatEnd(ctx, n, m.Exit == nil || m.Exit.Code != 2, fmt.Sprintf("EXIT %d: %s", o.exit, exitSummary(m)), v.next, false)
	if failingSince != nil {
		r.notify(ctx, n, "recovered", fmt.Sprintf("session %d succeeded after the failures that began %s: the chamber is back on its plan (next wake %s).",
			n, failingSince.UTC().Format(time.RFC3339), v.next.Format(time.RFC3339)))
	}
	if m.Exit != nil && m.Exit.Code == 2 {
		r.alert(ctx, n, "failure", fmt.Sprintf("session %d reported failure (EXIT 2): %s", n, m.Exit.Summary),
			fmt.Sprintf("read `cryochamber log --dir %s --session %d`; the chamber goes on as the agent asked", r.dir, n), m)
	}
	r.rearmIfPassed(ctx) // slowalert.go: a wake that fell due during the delivery
	return r.saveLast(ctx, f)
}

// arm arms the wake timer for t and the dead-man timer after it, recording steps 4 to 6. The
// wake is armed at the instant the OS can fire for t (timer.FireAt: t itself on systemd, the
// next whole minute on launchd) and read back as an instant, year included.
func (r *runner) arm(ctx context.Context, rep *validate.Report, t time.Time) error {
	ch := r.timerChamber()
	var name string
	var fire time.Time
	fb := t.Add(r.cfg.FallbackAfter.D).UTC()
	fbJob := timer.Job{Kind: timer.Fallback, At: fb, Argv: r.fallbackArgv()}
	// Both timers in one step (one reload of the user manager). If that fails, the wake alone
	// still decides whether we may hibernate; the dead-man timer is only worth a warning.
	armWith := func(jobs ...timer.Job) func(be timer.Backend) error {
		return func(be timer.Backend) error {
			name = be.Name()
			var err error
			if fire, err = timer.FireAt(be, t, r.now()); err != nil {
				return err
			}
			wake := timer.Job{Kind: timer.Wake, At: fire, Argv: r.wakeArgv()}
			return be.Arm(ctx, ch, append([]timer.Job{wake}, jobs...)...)
		}
	}
	fbErr := r.withBackend(ctx, armWith(fbJob))
	if fbErr != nil {
		if err := r.withBackend(ctx, armWith()); err != nil {
			rep.Add(validate.StepTimer, validate.Fail, "%s: %v", orBackend(name), err)
			return err
		}
	}
	rep.Add(validate.StepTimer, validate.Pass, "%s %s-wake", name, r.id)
	var v timer.Verdict
	err := r.withBackend(ctx, func(be timer.Backend) (err error) { v, err = timer.Check(ctx, be, r.id, timer.Wake, fire); return err })
	switch {
	case err != nil:
		rep.Add(validate.StepReadback, validate.Fail, "cannot read the timer back: %v", err)
		return err
	case !v.Found || !v.OK:
		rep.Add(validate.StepReadback, validate.Fail, "%s", v)
		return errors.New("the timer does not fire when it must: " + v.String())
	default:
		rep.Add(validate.StepReadback, validate.Pass, "%s", v)
	}
	wf := fire.UTC()
	r.st.Timers.Wake = &wf
	r.st.Timers.Zone = v.Zone
	r.st.Timers.Fallback = nil
	if fbErr != nil {
		rep.Add(validate.StepFallback, validate.Warn, "no dead-man timer: %v", fbErr)
	} else if err := r.withBackend(ctx, func(be timer.Backend) (err error) {
		v, err = timer.Check(ctx, be, r.id, timer.Fallback, fb)
		return err
	}); err != nil || !v.Found {
		rep.Add(validate.StepFallback, validate.Warn, "the dead-man timer cannot be read back (%v)", err)
	} else {
		r.st.Timers.Fallback = &fb
		rep.Add(validate.StepFallback, validate.Pass, "dead-man check: %s (fallback_after %s)", v, fmtDur(r.cfg.FallbackAfter.D))
	}
	r.syncWatch(ctx, ch)
	return nil
}

func orBackend(name string) string {
	if name == "" {
		return "the timer manager"
	}
	return name
}

// deadmanArmTimeout bounds the arming of a session's dead-man: the session runs without one
// rather than wait for a timer manager that does not answer.
const deadmanArmTimeout = 20 * time.Second

// armDeadman arms the dead-man timer for a session that starts at start: every session has
// one, whatever woke it (a message, send --wake, wake --now), so that a session killed hard is
// recovered, and one that hangs is reported, at start + fallback_after. The caller records it
// with the agent's process group (agentfile.go).
func (r *runner) armDeadman(ctx context.Context, start time.Time) {
	// Bounded (issue 23, item 11): a bus that stops answering must not hold the session back
	// for ever; the connection it hung on is dropped, so that the next call dials again.
	ctx, cancel := context.WithTimeout(ctx, deadmanArmTimeout)
	defer func() {
		if ctx.Err() != nil {
			r.closeBackend()
		}
		cancel()
	}()
	at := ceilSecond(start.Add(r.cfg.FallbackAfter.D)).UTC()
	if f := r.st.Timers.Fallback; f != nil && !f.After(at) && !f.Before(start) && r.timerHolds(ctx, timer.Fallback, *f) {
		return // the plan's dead-man already comes first (and the OS still has it: a reboot removes it)
	}
	job := timer.Job{Kind: timer.Fallback, At: at, Argv: r.fallbackArgv()}
	if err := r.withBackend(ctx, func(be timer.Backend) error { return be.Arm(ctx, r.timerChamber(), job) }); err != nil {
		r.warnf("cannot arm the dead-man timer for this session: %v", err)
		return
	}
	r.st.Timers.Fallback = &at
}

// timerHolds reports whether the OS has timer k armed for at (a question, or two, to the timer
// manager; false when it cannot say).
func (r *runner) timerHolds(ctx context.Context, k timer.Kind, at time.Time) bool {
	var v timer.Verdict
	err := r.withBackend(ctx, func(be timer.Backend) (err error) { v, err = timer.Check(ctx, be, r.id, k, at); return err })
	return err == nil && v.Found && v.OK
}

// syncWatch installs or removes the inbox watcher to match watch_inbox (a watcher that went
// missing is installed again at every hibernation).
func (r *runner) syncWatch(ctx context.Context, ch timer.Chamber) {
	if *r.cfg.WatchInbox {
		inbox := r.dir + "/" + inboxDir
		if err := r.withBackend(ctx, func(be timer.Backend) error { return be.Watch(ctx, ch, inbox, r.wakeArgv()) }); err != nil {
			r.warnf("cannot watch the inbox (messages wait for the next wake): %v", err)
			r.st.Timers.Watch = false
			return
		}
		r.st.Timers.Watch = true
		return
	}
	if r.st.Timers.Watch {
		_ = r.withBackend(ctx, func(be timer.Backend) error { return be.Unwatch(ctx, r.id) })
	}
	r.st.Timers.Watch = false
}

// hostChecks are steps 7 and 8.
func (r *runner) hostChecks(rep *validate.Report) {
	st, detail := validate.LogWritable(r.logPath())
	rep.Add(validate.StepLog, st, "%s", detail)
	st, detail = validate.FreeDisk(r.dir, r.cfg.MinFreeDisk.N)
	rep.Add(validate.StepDisk, st, "%s", detail)
}

// complete ends the plan: no WAKE and nothing pending. It is never silent: the outbox and the
// operator's targets get a notice.
func (r *runner) complete(ctx context.Context, f *finishing, rep *validate.Report) error {
	n, m, o := f.n, f.m, f.o
	if r.cancelRequested() {
		return r.honourCancel(ctx, f)
	}
	rep.Add(validate.StepTimer, validate.Skip, "plan complete: no timer to arm")
	rep.Add(validate.StepReadback, validate.Skip, "plan complete")
	rep.Add(validate.StepFallback, validate.Skip, "plan complete")
	r.hostChecks(rep)
	if err := r.disarmAll(ctx); err != nil {
		r.warnf("%v", err)
	}
	// The claimed messages are answered before the claims are cleared.
	if err := r.finishClaims(f, m); err != nil {
		r.warnf("%v", err)
	}
	r.st.Phase = PhaseComplete
	r.st.Wake = nil
	r.st.PlanWake = nil
	r.st.Reason = ""
	r.st.Retries = 0
	r.st.RetryingSince = nil
	r.recordMarkers(m)
	r.st.Last = r.outcomeRecord(f, exitSummary(m))
	r.st.Holder = nil
	r.st.Claimed = nil
	r.st.Warnings = nil
	rep.Finish()
	rep.OK = true
	if err := r.save(); err != nil {
		return err
	}
	r.recordHistory(f, m, "")
	r.fileSummary(f, nil)
	rep.WriteVerdict(r.out)
	r.printf("plan complete after session %d: timers removed", n)
	summary := exitSummary(m)
	r.heartbeatEnd(ctx, n, o.exit != 2, fmt.Sprintf("EXIT %d: %s (the plan is complete)", o.exit, summary), nil, true)
	if c := r.guardEnded; c != nil {
		r.guardTell(ctx, n, c) // the notice says which limit ended it (guardrails.go)
	} else {
		r.guardTell(ctx, n, nil)
		r.notify(ctx, n, "complete", fmt.Sprintf("The plan is complete: session %d printed no WAKE (EXIT %d: %s). No timer is armed.\nTo continue it, edit plan.md and run: cryochamber start %s",
			n, o.exit, summary, r.dir+"/"+r.planName()))
	}
	if m.Exit != nil && m.Exit.Code == 2 {
		r.alert(ctx, n, "failure", fmt.Sprintf("session %d ended the plan with a failure (EXIT 2): %s", n, summary), r.resumeHint(), m)
	}
	return r.saveLast(ctx, f)
}

// refuse is a validation refusal: nothing stays armed, the alerts go out, exit 1.
func (r *runner) refuse(ctx context.Context, f *finishing, rep *validate.Report) error {
	n, o := f.n, f.o
	if r.cancelRequested() {
		// A cancel that raced this session (it may have removed the timer between our arming and
		// the read-back) wins: the operator asked for nothing to run, so nothing is an error.
		return r.honourCancel(ctx, f)
	}
	rep.Finish()
	rep.OK = false
	if err := r.disarmAll(ctx); err != nil {
		r.warnf("%v", err)
	}
	if err := r.finishClaims(f, f.judged); err != nil {
		r.warnf("%v", err)
	}
	r.st.Phase = PhaseFailed
	r.st.Wake = nil
	r.st.Holder = nil
	r.st.Claimed = nil
	reason := string(o.reason)
	if reason == "" {
		reason = "refused"
	}
	r.st.Last = r.outcomeRecord(f, "refused to hibernate")
	r.st.Last.Reason = reason
	saveErr := r.save()
	r.recordHistory(f, f.judged, "refused")
	rep.WriteVerdict(r.out)
	msg := fmt.Sprintf("session %d: refused to hibernate; no timer is armed: the plan has stopped.\n%s", n, strings.Join(rep.Errors, "\n"))
	if tail := r.blockTail(n, 8); tail != "" {
		msg += "\n\nThe session's last lines:\n" + tail
	}
	r.heartbeatEnd(ctx, n, false, "refused to hibernate: the plan has stopped (see validate)", nil, false)
	r.alert(ctx, n, "refused", msg, r.resumeHint()+fmt.Sprintf(" (`cryochamber validate --dir %s` shows the checks, `cryochamber log --dir %s --session %d` the session)", r.dir, r.dir, n), nil)
	if saveErr != nil {
		return saveErr
	}
	if err := r.save(); err != nil {
		return err
	}
	return &Error{Msg: fmt.Sprintf("refused to hibernate after session %d: %s", n, strings.Join(rep.Errors, "; ")),
		Hint: fmt.Sprintf("fix the cause, then run `cryochamber start --dir %s` again (see `cryochamber validate --dir %s` and `cryochamber log --dir %s`)", r.dir, r.dir, r.dir)}
}

// retry handles a session that failed without a valid answer: re-armed at +5m, +15m, +60m;
// after max_retries the operator is alerted once and the chamber keeps retrying every
// slow_retry until a session succeeds (a "recovered" notice) or the operator cancels. An outage
// never ends a plan by itself.
func (r *runner) retry(ctx context.Context, f *finishing) error {
	n, m, o := f.n, f.m, f.o
	if r.cancelRequested() {
		return r.honourCancel(ctx, f)
	}
	now := r.now()
	r.st.Retries++
	max := *r.cfg.MaxRetries
	r.st.Last = r.outcomeRecord(f, o.detail)
	// A session that failed did not answer: the FALLBACK targets of the latest session that
	// did stay (they are what the agent asked for if a later wake fails, as this one did). Its
	// own FALLBACK markers, if any, still reach this alert through m.
	if err := r.finishClaims(f, nil); err != nil {
		r.warnf("%v", err)
	}
	t, slow := retryAt(r.st.Retries, max, r.cfg.SlowRetry.D, o.end, now)
	reason := WhyRetry
	if p, why := r.pendingWake(now); p != nil && p.Before(t) {
		// A TODO (or a message) is due before the retry: wake for it; the retry count stays.
		t, reason = *p, why
	}
	rep := validate.New(r.out)
	rep.Session = n
	rep.Add(validate.StepMarkers, validate.Fail, "session %d failed (%s): retry %d", n, o.reason, r.st.Retries)
	rep.SetWake(t)
	rep.Add(validate.StepWake, validate.Pass, "retry at %s (%s)", t.Format(time.RFC3339), Relative(t, now))
	// As patient with a busy manager as a session that answered (contention.go): at a
	// manager's start many sessions fail together (no network yet) and arm their retries at once.
	r.st.Reason = reason
	actx, release, err := r.armPatiently(ctx, f, rep, &t)
	defer release()
	ctx = actx
	if err != nil {
		return r.refuse(ctx, f, rep)
	}
	firstSlow := slow && r.st.RetryingSince == nil
	if firstSlow {
		since := o.end.UTC()
		r.st.RetryingSince = &since
	}
	r.st.Phase = PhaseArmed
	r.st.Wake = &t
	r.st.Reason = reason
	r.st.Holder = nil
	r.st.Claimed = nil
	if err := r.save(); err != nil {
		return err
	}
	r.recordHistory(f, m, "")
	r.heartbeatEnd(ctx, n, false, fmt.Sprintf("failed (%s); retry at %s", o.reason, t.Format(time.RFC3339)), &t, false)
	why := fmt.Sprintf("Session %d failed (%s): %s.", n, o.reason, o.detail)
	if tail := r.blockTail(n, 8); tail != "" {
		why += "\nIts last lines:\n" + tail
	}
	switch {
	case firstSlow:
		r.printf("session %d failed (%s); the %d fast retries are used up: retrying every %s (next at %s)", n, o.reason, max, fmtDur(r.cfg.SlowRetry.D), t.Format(time.RFC3339))
		r.alert(ctx, n, string(o.reason), fmt.Sprintf("%s\nThe %d fast retries are used up. The chamber keeps retrying every %s (next at %s) until a session succeeds; you will be told when it recovers.",
			why, max, fmtDur(r.cfg.SlowRetry.D), t.Format(time.RFC3339)),
			fmt.Sprintf("fix the cause (see `cryochamber log --dir %s --session %d`), then `cryochamber wake --dir %s --now` to try at once; or `cryochamber cancel --dir %s` to stop", r.dir, n, r.dir, r.dir), m)
	case slow:
		r.printf("session %d failed (%s); still retrying every %s since %s (next at %s)", n, o.reason, fmtDur(r.cfg.SlowRetry.D), r.st.RetryingSince.Format(time.RFC3339), t.Format(time.RFC3339))
		r.writeNotice(n, o.end, string(o.reason), why+fmt.Sprintf("\nStill retrying every %s; next at %s.\n", fmtDur(r.cfg.SlowRetry.D), t.Format(time.RFC3339)))
	default:
		r.printf("session %d failed (%s); retry %d of %d at %s (%s)", n, o.reason, r.st.Retries, max, t.In(r.cfg.Location).Format(time.RFC3339), Relative(t, now))
		r.writeNotice(n, o.end, string(o.reason), why+fmt.Sprintf("\nRetry %d of %d at %s. No one was alerted yet: alerts go out when the fast retries are used up.\n",
			r.st.Retries, max, t.Format(time.RFC3339)))
	}
	r.rearmIfPassed(ctx) // slowalert.go: a retry that fell due during the delivery
	if err := r.saveLast(ctx, f); err != nil || r.st.Phase == PhaseCancelled {
		return err
	}
	msg := fmt.Sprintf("session %d failed (%s); retry %d of %d armed at %s", n, o.reason, r.st.Retries, max, t.Format(time.RFC3339))
	if slow {
		msg = fmt.Sprintf("session %d failed (%s); the fast retries are used up: retrying every %s, next at %s", n, o.reason, fmtDur(r.cfg.SlowRetry.D), t.Format(time.RFC3339))
	}
	return &Error{Msg: msg, Hint: fmt.Sprintf("see `cryochamber log --dir %s --session %d`", r.dir, n)}
}

// saveLast is the last save of a session's end. A cancel that landed after the checks above
// (between arming and here) wins now: the session ends cancelled, not armed, so that once
// cancel has returned no session ends by arming a timer. (A cancel in the instants after this
// check is healed by the next command that holds the lock, see open.)
//
// When nothing changed since the save before it (no alert, no notice), nothing is written
// again: the cancel check is what matters, and a save costs two fsyncs.
func (r *runner) saveLast(ctx context.Context, f *finishing) error {
	if err := r.saveChanged(); err != nil {
		return err
	}
	if r.cancelRequested() && r.st.Phase != PhaseCancelled {
		return r.honourCancel(ctx, f)
	}
	return nil
}

// retryAt is when the k-th consecutive failure (1-based) is retried: +5m, +15m, +60m (then the
// last of those) while k <= maxRetries, else every slowRetry (slow). It counts from the end of
// the failed session, and is never sooner than the arming lead from now.
func retryAt(k, maxRetries int, slowRetry time.Duration, end, now time.Time) (t time.Time, slow bool) {
	slow = k > maxRetries
	delay := slowRetry
	if !slow {
		delay = retryDelays[min(max(k, 1), len(retryDelays))-1]
	}
	t = ceilSecond(end.Add(delay).UTC())
	if t.Before(now.Add(armLead)) {
		t = now.Add(armLead).Truncate(time.Second).Add(time.Second)
	}
	return t, slow
}

// outcomeRecord is the Outcome the state keeps of session f.
func (r *runner) outcomeRecord(f *finishing, summary string) *Outcome {
	o := f.o
	return &Outcome{Session: f.n, Exit: o.exit, Summary: summary, Reason: string(o.reason), Why: f.why, Start: o.start.UTC(), End: o.end.UTC()}
}

// disarmAll removes the wake and dead-man timers and the inbox watcher (the alert timer stays
// while an alert is undelivered).
func (r *runner) disarmAll(ctx context.Context) error {
	alert := r.st.Timers.Alert
	r.st.Timers = Timers{Alert: alert}
	err := r.withBackend(ctx, func(be timer.Backend) error {
		var errs []error
		for _, k := range []timer.Kind{timer.Wake, timer.Fallback} {
			errs = append(errs, be.Disarm(ctx, r.id, k))
		}
		errs = append(errs, be.Unwatch(ctx, r.id))
		return errors.Join(errs...)
	})
	if err != nil {
		return fmt.Errorf("cannot remove the timers: %w", err)
	}
	return nil
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

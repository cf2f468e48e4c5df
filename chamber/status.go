package chamber

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cryochamber/cryochamber/message"
	"github.com/cryochamber/cryochamber/sessionlog"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/validate"
)

// StatusOptions are the options of `cryochamber status`.
type StatusOptions struct {
	Dir  string
	JSON bool
	Tail int // lines of the latest block to show
}

// StatusInfo is what `status --json` prints.
type StatusInfo struct {
	Dir          string       `json:"dir"`
	ID           string       `json:"id"`
	Plan         string       `json:"plan"`
	Phase        Phase        `json:"phase"`
	Session      int          `json:"session"`
	NextWake     *time.Time   `json:"next_wake"`
	NextRelative string       `json:"next_wake_relative,omitempty"`
	NextReason   string       `json:"next_wake_reason,omitempty"`
	Command      string       `json:"command"`
	Task         string       `json:"task"`
	Retries      int          `json:"retries"`
	Last         *Outcome     `json:"last"`
	Plans        []string     `json:"plans"`
	Backend      string       `json:"backend"`
	Timers       []TimerInfo  `json:"timers"`
	TimerError   string       `json:"timer_error,omitempty"`
	Holder       *HolderInfo  `json:"lock_holder"`
	Fallbacks    []string     `json:"fallbacks"`
	LastAlert    *AlertRecord `json:"last_alert"`
	Undelivered  int          `json:"undelivered_alerts"`
	Todos        []Todo       `json:"todos"`
	Inbox        int          `json:"inbox"`
	Outbox       int          `json:"outbox"`
	Tail         []string     `json:"tail"`
	Warnings     []string     `json:"warnings"`
}

// TimerInfo is one OS timer as timer.json and the OS see it.
type TimerInfo struct {
	Kind    string     `json:"kind"`
	Armed   *time.Time `json:"armed"`   // what timer.json says was armed
	OS      *time.Time `json:"os_next"` // what the OS reports now
	Agree   bool       `json:"agree"`
	Comment string     `json:"comment,omitempty"`
}

// HolderInfo is the lock holder recorded in timer.json and whether it is alive.
type HolderInfo struct {
	Holder
	Alive bool `json:"alive"`
}

// Status gathers a chamber's status. It takes no lock (a status must never make a wake think a
// session is running) and changes nothing.
func Status(ctx context.Context, env *Env, opts StatusOptions) (*StatusInfo, error) {
	dir, err := AbsDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	cfg, st, err := loadForCommand(dir, env)
	if err != nil {
		return nil, err
	}
	now := env.Now()
	r := &runner{env: env, dir: dir, cfg: cfg, st: st, out: io.Discard}
	s := &StatusInfo{
		Dir: dir, ID: st.ID, Plan: filepath.Join(dir, r.planName()), Phase: st.Phase, Session: st.Session,
		NextReason: st.Reason, Command: cmdLineOrAgent(st.Command), Task: st.Task, Retries: st.Retries,
		Last: st.Last, Plans: st.Plans, Backend: st.Backend, LastAlert: st.LastAlert,
		Fallbacks: []string{}, Todos: []Todo{}, Tail: []string{}, Warnings: []string{}, Timers: []TimerInfo{},
	}
	if st.Command == "" {
		s.Command = r.agentLine() + " (the agent)"
	}
	if st.Phase == PhaseArmed && st.Wake != nil {
		s.NextWake = st.Wake
		s.NextRelative = Relative(*st.Wake, now)
	}
	if r.cancelRequested() && st.Phase != PhaseCancelled {
		s.Warnings = append(s.Warnings, "cancel was requested while a session ran; it will not re-arm")
	}
	if changed := r.checkPin(); len(changed) > 0 {
		s.Warnings = append(s.Warnings, fmt.Sprintf("%s changed since the chamber was started: the next wake will refuse to run; if you made the change, run `cryochamber reload --dir %s`", strings.Join(changed, ", "), dir))
	}
	if st.Binary != "" && st.Phase.Active() {
		if _, err := os.Stat(st.Binary); err != nil {
			s.Warnings = append(s.Warnings, fmt.Sprintf("the timers run %s, which is gone: they cannot fire (run any `cryochamber wake --dir %s` with the new binary to re-arm, or cancel and start again)", st.Binary, dir))
		}
	}
	if st.Chamber != "" && st.Chamber != dir {
		s.Warnings = append(s.Warnings, fmt.Sprintf("timer.json was armed for %s: the chamber moved; `cryochamber start` it here", st.Chamber))
	}
	for _, f := range r.alertTargets(nil) {
		s.Fallbacks = append(s.Fallbacks, f.Action+" "+f.Target)
	}
	if h := st.Holder; h != nil {
		s.Holder = &HolderInfo{Holder: *h, Alive: pidAlive(h.PID)}
		if !s.Holder.Alive {
			s.Warnings = append(s.Warnings, fmt.Sprintf("the lock holder (pid %d, session %d) is dead: the next wake or fallback will recover", h.PID, h.Session))
		}
	}
	for _, t := range r.Todos() {
		if t.Status != "done" {
			s.Todos = append(s.Todos, t)
		}
	}
	s.Inbox = inboxCount(dir)
	if names, err := message.Names(filepath.Join(dir, outboxDir)); err == nil {
		s.Outbox = len(names)
		s.Undelivered = undeliveredAlerts(filepath.Join(dir, outboxDir), names)
	}
	if info, err := sessionlog.Latest(r.logPath(), st.LogOffset); err == nil {
		n := opts.Tail
		if n <= 0 {
			n = 10
		}
		if lines, err := sessionlog.Tail(r.logPath(), info, n); err == nil {
			for _, l := range lines {
				s.Tail = append(s.Tail, l.Raw())
			}
		}
	} else if !errors.Is(err, sessionlog.ErrNoBlocks) {
		s.Warnings = append(s.Warnings, "cryo.log: "+err.Error())
	}
	s.timers(ctx, r)
	return s, nil
}

// timers asks the OS what it has armed and compares it with timer.json.
func (s *StatusInfo) timers(ctx context.Context, r *runner) {
	if r.st.ID == "" {
		return
	}
	be, err := r.backend(ctx)
	if err != nil {
		s.TimerError = err.Error()
		return
	}
	defer be.Close()
	s.Backend = be.Name()
	armed := map[timer.Kind]*time.Time{timer.Wake: r.st.Timers.Wake, timer.Fallback: r.st.Timers.Fallback}
	for _, k := range timer.Kinds {
		ti := TimerInfo{Kind: string(k), Armed: armed[k]}
		got, ok, err := be.Next(ctx, r.st.ID, k)
		switch {
		case err != nil:
			ti.Comment = err.Error()
		case ok:
			g := got.UTC()
			ti.OS = &g
		}
		if ti.Armed != nil && ti.OS != nil {
			ti.Agree, _ = timerAgrees(be.Name(), r.env.Local, *ti.Armed, *ti.OS)
		} else {
			ti.Agree = ti.Armed == nil && ti.OS == nil
		}
		if !ti.Agree && ti.Comment == "" {
			switch {
			case ti.Armed == nil:
				ti.Comment = "armed in the OS but not in timer.json"
			case ti.OS == nil && r.st.Phase == PhaseRunning && k == timer.Wake:
				ti.Agree, ti.Comment = true, "fired: its session is running"
			case ti.OS == nil:
				ti.Comment = "in timer.json but the OS has no such timer"
			default:
				ti.Comment = "the OS and timer.json disagree"
			}
		}
		if !ti.Agree {
			s.Warnings = append(s.Warnings, fmt.Sprintf("%s timer: %s", k, ti.Comment))
		}
		s.Timers = append(s.Timers, ti)
	}
	for _, w := range be.Warnings(ctx) {
		s.Warnings = append(s.Warnings, w)
	}
}

func undeliveredAlerts(dir string, names []string) int {
	n := 0
	for _, name := range names {
		m, err := message.Read(dir, name)
		if err != nil || m.Kind != message.KindAlert {
			continue
		}
		if strings.Contains(m.Delivery, "FAILED") || strings.HasPrefix(m.Delivery, deliveryPending) {
			n++
		}
	}
	return n
}

// pidAlive reports whether a process exists (signal 0 checks without sending anything).
func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// WriteJSON prints the status as one JSON object.
func (s *StatusInfo) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

// WriteText prints the status for a person.
func (s *StatusInfo) WriteText(w io.Writer, loc *time.Location, now time.Time) {
	p := func(k, format string, args ...any) { fmt.Fprintf(w, "%-16s %s\n", k+":", fmt.Sprintf(format, args...)) }
	p("chamber", "%s", s.Dir)
	p("plan", "%s", s.Plan)
	p("state", "%s (session %d)", s.Phase, s.Session)
	if s.NextWake != nil {
		p("next wake", "%s  %s UTC  (%s, %s)", s.NextWake.In(loc).Format("2006-01-02 15:04:05 MST"), s.NextWake.UTC().Format("2006-01-02 15:04:05"), s.NextRelative, s.NextReason)
	} else {
		p("next wake", "none")
	}
	p("command", "%s", s.Command)
	if s.Task != "" {
		p("task", "%s", s.Task)
	}
	if s.Retries > 0 {
		p("retries", "%d so far", s.Retries)
	}
	if l := s.Last; l != nil {
		res := fmt.Sprintf("EXIT %d", l.Exit)
		if l.Reason != "" {
			res += " (" + l.Reason + ")"
		}
		p("last", "session %d, %s: %s  (ended %s)", l.Session, res, l.Summary, Relative(l.End, now))
	}
	for _, pl := range s.Plans {
		p("plan note", "%s", pl)
	}
	for _, t := range s.Timers {
		var parts []string
		if t.OS != nil {
			parts = append(parts, "os "+t.OS.In(loc).Format(time.RFC3339))
		} else {
			parts = append(parts, "os none")
		}
		if t.Armed != nil {
			parts = append(parts, "timer.json "+t.Armed.In(loc).Format(time.RFC3339))
		}
		mark := "ok"
		if !t.Agree {
			mark = "MISMATCH"
		}
		if t.Comment != "" {
			mark += ": " + t.Comment
		}
		p(t.Kind+" timer", "%s [%s]", strings.Join(parts, ", "), mark)
	}
	if s.TimerError != "" {
		p("timers", "cannot ask the OS: %s", s.TimerError)
	}
	if s.Holder != nil {
		alive := "alive"
		if !s.Holder.Alive {
			alive = "DEAD"
		}
		p("lock", "pid %d (%s), session %d, since %s", s.Holder.PID, alive, s.Holder.Session, s.Holder.Since.In(loc).Format(time.RFC3339))
	} else {
		p("lock", "free")
	}
	if len(s.Fallbacks) > 0 {
		p("alerts to", "%s", strings.Join(s.Fallbacks, ", "))
	} else {
		p("alerts to", "messages/outbox only (no [[fallback]] in cryo.toml)")
	}
	if a := s.LastAlert; a != nil {
		ok := "delivered"
		if !a.OK {
			ok = "NOT delivered"
		}
		p("last alert", "%s, session %d, %s, %s: %s", a.At.In(loc).Format(time.RFC3339), a.Session, a.Reason, ok, strings.Join(a.Results, "; "))
	}
	if s.Undelivered > 0 {
		p("pending", "%d alert(s) not delivered, kept in messages/outbox", s.Undelivered)
	}
	for _, t := range s.Todos {
		p("todo", "%s  %s [%s]", t.At.In(loc).Format(time.RFC3339), t.Text, t.Status)
	}
	p("messages", "%d waiting in the inbox, %d in the outbox", s.Inbox, s.Outbox)
	for _, wn := range s.Warnings {
		p("warning", "%s", wn)
	}
	if len(s.Tail) > 0 {
		fmt.Fprintln(w, "latest block:")
		for _, l := range s.Tail {
			fmt.Fprintln(w, "  "+l)
		}
	}
}

// ValidateOptions are the options of `cryochamber validate`.
type ValidateOptions struct {
	Dir string
}

// Validate runs the pre-hibernate checks on the latest block and the armed timers, read-only.
func Validate(ctx context.Context, env *Env, opts ValidateOptions, print io.Writer) (*validate.Report, error) {
	dir, err := AbsDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	cfg, st, err := loadForCommand(dir, env)
	if err != nil {
		return nil, err
	}
	r := &runner{env: env, dir: dir, cfg: cfg, st: st, out: io.Discard}
	defer r.close()
	rep := validate.New(print)
	info, err := sessionlog.Latest(r.logPath(), st.LogOffset)
	if err != nil {
		rep.Add(1, validate.Fail, "cannot read the latest block of cryo.log: %v", err)
		rep.Finish()
		return rep, nil
	}
	rep.Session = info.Session
	m, err := r.blockMarkers(info)
	if err != nil {
		return nil, err
	}
	validAt := env.Now()
	if info.End == nil {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("session %d has no END line yet: it is running, or its process died", info.Session))
	} else {
		validAt = info.End.End
	}
	// Judge as if the session had just ended, but the wake time against now.
	v := r.judge(rep, m, validAt)
	switch {
	case st.Phase == PhaseComplete || v.next == nil:
		rep.PlanComplete = v.next == nil
		for _, s := range []int{4, 5, 6} {
			rep.Add(s, validate.Skip, "plan complete: no timer should be armed")
		}
	case st.Phase == PhaseFailed || st.Phase == PhaseCancelled:
		why := string(st.Phase)
		if st.Last != nil && st.Last.Reason != "" {
			why += " (" + st.Last.Reason + " in session " + fmt.Sprint(st.Last.Session) + ")"
		}
		for _, s := range []int{4, 5, 6} {
			rep.Add(s, validate.Skip, "the chamber is %s: no timer should be armed", why)
		}
	default:
		r.checkArmed(ctx, rep)
	}
	r.hostChecks(rep)
	rep.Finish()
	return rep, nil
}

// checkArmed is steps 4 to 6 read-only: what the OS has armed against timer.json.
func (r *runner) checkArmed(ctx context.Context, rep *validate.Report) {
	be, err := r.backend(ctx)
	if err != nil {
		rep.Add(4, validate.Fail, "%v", err)
		return
	}
	got, ok, err := be.Next(ctx, r.st.ID, timer.Wake)
	switch {
	case err != nil:
		rep.Add(4, validate.Fail, "%v", err)
	case !ok:
		rep.Add(4, validate.Fail, "%s has no wake timer for %s", be.Name(), r.st.ID)
	default:
		rep.Add(4, validate.Pass, "%s %s-wake", be.Name(), r.st.ID)
		if r.st.Wake == nil {
			rep.Add(5, validate.Fail, "timer.json has no wake time, the OS has %s", got.UTC().Format(time.RFC3339))
		} else if agree, want := timerAgrees(be.Name(), r.env.Local, *r.st.Wake, got); !agree {
			rep.Add(5, validate.Fail, "%s reports %s, timer.json says %s", be.Name(), got.UTC().Format(time.RFC3339), want.UTC().Format(time.RFC3339))
		} else {
			rep.Add(5, validate.Pass, "%s reports %s", be.Name(), got.UTC().Format(time.RFC3339))
		}
	}
	if _, ok, err := be.Next(ctx, r.st.ID, timer.Fallback); err != nil {
		rep.Add(6, validate.Warn, "cannot read the dead-man timer: %v", err)
	} else if !ok {
		rep.Add(6, validate.Warn, "no dead-man timer armed")
	} else {
		rep.Add(6, validate.Pass, "dead-man timer armed")
	}
}

// FallbackOptions are the options of `cryochamber fallback`.
type FallbackOptions struct {
	Dir string
}

// Fallback is what the dead-man timer runs at WAKE + fallback_after: if the session for that
// wake has not finished, it delivers the alerts (and repairs what a dead process left).
func Fallback(ctx context.Context, env *Env, opts FallbackOptions) error {
	dir, err := AbsDir(opts.Dir)
	if err != nil {
		return err
	}
	cfg, st, err := loadForCommand(dir, env)
	if err != nil {
		return err
	}
	overdue := func(st *State) bool {
		return st.Wake != nil && !env.Now().Before(st.Wake.Add(cfg.FallbackAfter.D-dueTolerance))
	}
	if st.Phase == PhaseArmed && overdue(st) {
		// After a boot or resume both timers fire at once: give the wake a moment to start.
		st = waitForWake(dir, st, env)
	}
	now := env.Now()
	lock, err := TryLock(dir)
	if errors.Is(err, ErrLocked) {
		if st2, err := LoadState(dir); err == nil {
			st = st2
		}
		h := st.Holder
		// A session is running. It is overdue only if it has been running longer than
		// fallback_after: one that started just now (the machine was off at its WAKE) has run.
		if st.Phase == PhaseRunning && overdue(st) && h != nil && !now.Before(h.Since.Add(cfg.FallbackAfter.D-dueTolerance)) {
			r := &runner{env: env, dir: dir, cfg: cfg, st: st, out: env.Stdout}
			text := fmt.Sprintf("session %d was due at %s and is still running after fallback_after (%s) (pid %d since %s)",
				st.Session, st.Wake.Format(time.RFC3339), cfg.FallbackAfter.D, h.PID, h.Since.Format(time.RFC3339))
			rec, err := sendAlert(ctx, cfg, dir, r.alertEnv(), Alert{Chamber: dir, Session: st.Session, Reason: "overdue", Text: text, Time: now.UTC(), Targets: r.alertTargets(nil)})
			if err != nil {
				fmt.Fprintf(env.Stdout, "warning: %v\n", err)
			}
			fmt.Fprintf(env.Stdout, "alert (overdue): %s\n", rec.summary())
			return nil
		}
		fmt.Fprintln(env.Stdout, holderMessage(dir, now)+" (no alert: it is not overdue)")
		return nil
	}
	if err != nil {
		return &Error{Status: 1, Err: err}
	}
	if st2, err := LoadState(dir); err == nil {
		st = st2
	}
	r := &runner{env: env, dir: dir, cfg: cfg, st: st, lock: lock, out: env.Stdout}
	defer r.close()
	if changed := r.checkPin(); len(changed) > 0 {
		return r.refuseTampered(changed)
	}
	switch {
	case st.Phase == PhaseRunning:
		// Its process died. Alert, then repair the way the next wake would.
		r.alert(ctx, st.Session, "crashed", fmt.Sprintf("session %d (due %s) did not finish: its process died", st.Session, fmtTime(st.Wake)), nil)
		_, err := r.recover(ctx)
		return err
	case st.Phase == PhaseArmed && overdue(st):
		due := *st.Wake
		t := now.Add(armLead).Truncate(time.Second).Add(time.Second)
		text := fmt.Sprintf("the wake due at %s did not run (session %d never started): no timer fired, or the machine was off. It is re-armed for %s.",
			due.Format(time.RFC3339), st.Session+1, t.Format(time.RFC3339))
		rep := validate.New(io.Discard)
		if err := r.arm(ctx, rep, t); err != nil {
			text = fmt.Sprintf("the wake due at %s did not run (session %d never started), and it could not be re-armed: %v. Run `cryochamber wake --dir %s --now`.",
				due.Format(time.RFC3339), st.Session+1, err, dir)
		} else {
			r.st.Wake = &t
			if err := r.save(); err != nil {
				r.printf("warning: %v", err)
			}
		}
		r.alert(ctx, st.Session+1, "missed", text, nil)
		return nil
	}
	r.printf("the session for this deadline finished; no alert")
	return nil
}

// waitForWake gives a wake that fired together with the dead-man timer up to 30 s to take the
// chamber (the session starts, or its number moves on) and returns the state it then sees.
func waitForWake(dir string, st *State, env *Env) *State {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		now, err := LoadState(dir)
		if err != nil {
			return st
		}
		if now.Phase != PhaseArmed || now.Session != st.Session || !now.Wake.Equal(*st.Wake) {
			return now
		}
	}
	return st
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "unknown"
	}
	return t.UTC().Format(time.RFC3339)
}

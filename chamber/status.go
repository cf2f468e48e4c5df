package chamber

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/cryochamber/cryochamber/channel"
	"github.com/cryochamber/cryochamber/internal/program"
	"github.com/cryochamber/cryochamber/internal/termtext"
	"github.com/cryochamber/cryochamber/sessionlog"
	"github.com/cryochamber/cryochamber/timer"
)

// StatusOptions are the options of `cryochamber status`.
type StatusOptions struct {
	Dir  string
	Tail int // lines of the latest block to show
	// Quick leaves out what costs most and what only one chamber's own view needs: the
	// questions to the OS timer manager (Timers, Watcher, its warnings) and the latest block's
	// lines. The dashboard's overview of many chambers uses it.
	Quick bool
}

// StatusInfo is what `status --json` prints. Its field names are shared with `ps --json` and
// `history --json` (and the dashboard's API): the same thing has the same name everywhere.
type StatusInfo struct {
	Dir           string       `json:"dir"`
	ID            string       `json:"id"`
	Plan          string       `json:"plan"`
	State         string       `json:"state"` // armed, running, paused, retrying, failed, complete, cancelled, missing
	Phase         Phase        `json:"phase"`
	Session       int          `json:"session"`
	NextWake      *time.Time   `json:"next_wake"`
	NextRelative  string       `json:"next_wake_relative,omitempty"`
	NextReason    Why          `json:"next_wake_reason,omitempty"`
	Upcoming      []Upcoming   `json:"upcoming"`
	Paused        *time.Time   `json:"paused"`
	PausedUntil   *time.Time   `json:"paused_until"`
	KeptWake      *time.Time   `json:"kept_wake,omitempty"` // while paused: the wake kept for after the pause
	RetryingSince *time.Time   `json:"retrying_since"`
	SlowRetry     string       `json:"slow_retry,omitempty"`
	Command       string       `json:"command"`
	Task          string       `json:"task"`
	Retries       int          `json:"retries"`
	Last          *Outcome     `json:"last"`
	Plans         []string     `json:"plans"`
	Backend       string       `json:"backend"`
	Timers        []TimerInfo  `json:"timers"`
	TimerError    string       `json:"timer_error,omitempty"`
	Watcher       string       `json:"inbox_watcher"` // on, off, paused, missing, stopped, unknown
	Holder        *HolderInfo  `json:"lock_holder"`
	Fallbacks     []string     `json:"fallbacks"`
	LastAlert     *AlertRecord `json:"last_alert"`
	Undelivered   int          `json:"undelivered_alerts"`
	// Alert targets whose deliveries keep failing, and whether that is all of them (targets.go).
	FailingTargets []FailingTarget      `json:"alert_targets_failing"`
	ReachNobody    bool                 `json:"alerts_reach_nobody"`
	Todos          []Todo               `json:"todos"`
	Inbox          int                  `json:"inbox"`
	Outbox         int                  `json:"outbox"`
	Sync           []channel.SyncStatus `json:"sync"` // each channel's last sync ([channels])
	Tail           []string             `json:"tail"`
	Warnings       []string             `json:"warnings"`
	Sandbox        string               `json:"sandbox"` // the cage sessions run in: "bubblewrap", "sandbox-exec" or "off" (sandbox.go)
	// Guardrails: each operator's limit that moved or ended the latest wake chosen, with what
	// it did (guardrails.go); empty when none holds the schedule back.
	Guardrails []string `json:"guardrails"`
	// What the sessions of today and this month (in the chamber's zone) cost, as far as it is
	// known (ledger.go); the *_unknown counts are sessions whose cost could not be read.
	SpendToday        float64 `json:"spend_today_usd"`
	SpendMonth        float64 `json:"spend_month_usd"`
	SpendTodayUnknown int     `json:"spend_today_unknown"`
	SpendMonthUnknown int     `json:"spend_month_unknown"`

	// The off-machine monitor's last answer ([heartbeat], heartbeat.go).
	Heartbeat *HeartbeatRecord `json:"heartbeat"`

	// Jobs are the Slurm backend's jobs of the chamber (status_jobs.go).
	Jobs []timer.SlurmJob `json:"jobs,omitempty"`
}

// Upcoming is one wake that is coming: the plan's, a TODO's, a retry, the dead-man, an alert
// retry.
type Upcoming struct {
	Kind string    `json:"kind"` // wake, todo, retry, fallback, alert
	At   time.Time `json:"at"`
	What string    `json:"what"`
}

// TimerInfo is one OS timer as the state and the OS see it.
type TimerInfo struct {
	Kind    string     `json:"kind"`
	Armed   *time.Time `json:"armed"`          // what the state says was armed
	OS      *time.Time `json:"os_next"`        // what the OS reports now
	Held    string     `json:"held,omitempty"` // a periodic timer (launchd's dead-man): what the OS holds
	Agree   bool       `json:"agree"`
	Comment string     `json:"comment,omitempty"`
}

// HolderInfo is the lock holder recorded in the state and whether it is alive.
type HolderInfo struct {
	Holder
	Alive bool `json:"alive"`
}

// Status gathers a chamber's status. It takes no lock (a status must never make a wake think a
// session is running), changes no file, and every question to the timer manager has a deadline.
// Its one action: when the inbox watcher of an active chamber is lost, it starts the wake
// service, whose wake starts the watcher again (kickWatcher, watcher.go).
func Status(ctx context.Context, env *Env, opts StatusOptions) (*StatusInfo, error) {
	r, _, err := open(ctx, env, opts.Dir, openOptions{unlocked: true})
	if err != nil {
		return nil, err
	}
	defer r.close()
	now := env.Now()
	st := r.st
	s := &StatusInfo{
		Dir: r.dir, ID: r.id, Plan: filepath.Join(r.dir, r.planName()), Phase: st.Phase, Session: st.Session,
		NextReason: st.Reason, Command: cmdLineOrAgent(st.Command), Task: st.Task, Retries: st.Retries,
		Last: st.Last, Plans: nonNil(st.Plans), Backend: st.Backend, LastAlert: st.LastAlert,
		Paused: st.Paused, PausedUntil: st.PausedUntil, RetryingSince: st.RetryingSince,
		Fallbacks: []string{}, Todos: []Todo{}, Tail: []string{}, Warnings: []string{}, Timers: []TimerInfo{}, Upcoming: []Upcoming{},
	}
	s.State = stateWord(st)
	if r.cancelRequested() && st.Phase != PhaseRunning {
		s.State = "cancelled"
	}
	if st.RetryingSince != nil {
		s.SlowRetry = fmtDur(r.cfg.SlowRetry.D)
	}
	if st.Command == "" {
		s.Command = r.agentLine() + " (the agent)"
	}
	if st.Phase == PhaseArmed && st.Wake != nil {
		s.NextWake = st.Wake
		s.NextRelative = Relative(*st.Wake, now)
	}
	if st.Phase == PhasePaused {
		s.KeptWake = st.Wake
	}
	if r.fs == nil {
		s.State = "missing"
		s.Warnings = append(s.Warnings, r.chamberMissing()+"; the dead-man timer will alert (if you moved it: cryochamber cancel --dir "+r.dir+", then start it at its new place)")
	}
	if r.cancelRequested() && st.Phase != PhaseCancelled {
		s.Warnings = append(s.Warnings, "cancel was requested while a session ran; it will not re-arm")
	}
	if d := r.checkDrift(); d != nil {
		s.Warnings = append(s.Warnings, d.String(r.dir))
	}
	if s.Sandbox = r.cfg.SandboxMechanism(); !r.cfg.SandboxOn() {
		s.Warnings = append(s.Warnings, r.sandboxOffWarning())
	}
	s.Warnings = append(s.Warnings, r.strays(inboxDir)...)
	s.Warnings = append(s.Warnings, r.degradedWarnings()...) // degraded.go
	if st.Phase.Active() {
		if p, err := r.command(); err == nil {
			if path, err := lookProgram(r, p); err == nil {
				if err := r.checkPinned(path, p); err != nil {
					s.Warnings = append(s.Warnings, err.Error()+": the next session will refuse to run it; if you made the change: cryochamber reload --dir "+r.dir)
				}
			}
		}
		if st.Binary != "" && !exists(st.Binary) {
			s.Warnings = append(s.Warnings, fmt.Sprintf("the wake timer runs %s, which is gone: the dead-man timer will re-arm it with a copy and alert; install cryochamber again and run `cryochamber reload --dir %s`", st.Binary, r.dir))
		}
	}
	for _, f := range r.alertTargets(nil) {
		s.Fallbacks = append(s.Fallbacks, f.Action+" "+f.Target)
	}
	if h := st.Holder; h != nil {
		s.Holder = &HolderInfo{Holder: *h, Alive: pidAlive(h.PID)}
		if !s.Holder.Alive {
			s.Warnings = append(s.Warnings, fmt.Sprintf("the lock holder (pid %d, session %d) is dead: the next wake or the dead-man will recover", h.PID, h.Session))
		}
	}
	for _, t := range r.loadTodos().Items {
		if t.Status != "done" {
			s.Todos = append(s.Todos, t)
		}
	}
	s.Upcoming = r.upcoming()
	s.Guardrails = r.guardLines()
	if g := r.st.Guard; g != nil {
		sp := g.Spend.at(now, r.cfg.Location)
		s.SpendToday, s.SpendMonth, s.SpendTodayUnknown, s.SpendMonthUnknown = sp.DayUSD, sp.MonthUSD, sp.DayUnknown, sp.MonthUnknown
	}
	if r.fs != nil {
		s.Inbox = r.inboxCount()
		// Counted from the listing alone: the live outbox holds up to two months of replies;
		// and not listed again while it is unchanged since a status counted it (outboxcount.go).
		if n, err := r.outboxCount(); err == nil {
			s.Outbox = n
		}
	}
	s.Undelivered = r.undelivered()
	hb, hbWarn := r.heartbeatStatus()
	s.Heartbeat, s.Warnings = hb, append(s.Warnings, hbWarn...)
	s.FailingTargets = r.failingTargets()
	s.ReachNobody = r.reachNobody(s.FailingTargets)
	if list, err := channel.LastSync(string(r.store)); err == nil && list != nil {
		s.Sync = list
	} else {
		s.Sync = []channel.SyncStatus{}
	}
	if opts.Quick {
		s.Watcher = "unknown"
		return s, nil
	}
	if r.fs != nil {
		if info, _, err := r.latestBlock(); err == nil {
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
	}
	s.timers(ctx, r)
	return s, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// stateWord is the one word ps, status and the dashboard show for a chamber.
func stateWord(st *State) string {
	switch {
	case st.Phase == PhaseRunning:
		return "running"
	case st.Phase == PhaseArmed && (st.RetryingSince != nil || st.Reason == WhyRetry):
		return "retrying" // the fast retries (armed for a retry) and the slow ones
	case st.Phase == PhaseArmed:
		return "armed"
	}
	return string(st.Phase)
}

// upcoming lists every wake that is coming, earliest first.
func (r *runner) upcoming() []Upcoming {
	out := []Upcoming{}
	st := r.st
	if (st.Phase == PhaseArmed || st.Phase == PhasePaused) && st.Wake != nil {
		kind, what := "wake", "the plan's wake"
		switch st.Reason {
		case WhyRetry:
			kind, what = "retry", fmt.Sprintf("retry %d of the failed session %d", st.Retries, st.Session)
		case WhyTodo:
			kind, what = "todo", "a TODO"
		case WhyInbox, WhyRequested:
			what = "a waiting message or request"
		}
		if st.Phase == PhasePaused {
			what += ", kept: it runs after the pause"
		}
		if kind != "todo" {
			out = append(out, Upcoming{Kind: kind, At: *st.Wake, What: what})
		}
	}
	if st.PlanWake != nil && (st.Wake == nil || !st.PlanWake.Equal(*st.Wake) || st.Reason != WhyPlan) && st.Phase != PhaseComplete && st.Phase != PhaseFailed && st.Phase != PhaseCancelled {
		out = append(out, Upcoming{Kind: "wake", At: *st.PlanWake, What: "the plan's wake"})
	}
	for _, t := range r.loadTodos().Items {
		// A stopped chamber (complete, failed, cancelled) runs no TODO: none is upcoming.
		if t.Status == "pending" && (st.Phase.Active() || st.Phase == PhasePaused) {
			out = append(out, Upcoming{Kind: "todo", At: t.At, What: t.Text})
		}
	}
	if f := st.Timers.Fallback; f != nil && st.Phase.Active() {
		out = append(out, Upcoming{Kind: "fallback", At: *f, What: "the dead-man check"})
	}
	if a := st.Timers.Alert; a != nil {
		out = append(out, Upcoming{Kind: "alert", At: *a, What: "another attempt at undelivered alerts"})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return dedupUpcoming(out)
}

func dedupUpcoming(in []Upcoming) []Upcoming {
	out := in[:0]
	for i, u := range in {
		if i > 0 && u.Kind == in[i-1].Kind && u.At.Equal(in[i-1].At) {
			continue
		}
		out = append(out, u)
	}
	return out
}

// lookProgram resolves the program of a command as the session would.
func lookProgram(r *runner, c Command) (string, error) {
	return program.Look(c.Program(), r.dir, r.capturedPath())
}

// timers asks the OS what it has armed and compares it with the state, each question within
// busTimeout: a bus that never answers makes status say so, not hang.
func (s *StatusInfo) timers(ctx context.Context, r *runner) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout+3*busTimeout)
	defer cancel()
	be, err := r.backend(ctx)
	if err != nil {
		s.TimerError = err.Error()
		s.Watcher = "unknown"
		return
	}
	s.Backend = be.Name()
	pctx, pcancel := context.WithTimeout(ctx, busTimeout)
	be = prefetchTimers(pctx, be, r.id) // status_prefetch.go: the three timers read at once
	pcancel()
	armed := map[timer.Kind]*time.Time{timer.Wake: r.st.Timers.Wake, timer.Fallback: r.st.Timers.Fallback, timer.Alert: r.st.Timers.Alert}
	for _, k := range timer.Kinds {
		ti := TimerInfo{Kind: string(k), Armed: armed[k]}
		var want time.Time
		if ti.Armed != nil {
			want = *ti.Armed
		}
		qctx, qcancel := context.WithTimeout(ctx, busTimeout)
		v, err := timer.Check(qctx, be, r.id, k, want)
		qcancel()
		switch {
		case err != nil:
			ti.Comment = err.Error()
			if qctx.Err() != nil {
				ti.Comment = fmt.Sprintf("the %s timer manager did not answer within %s", be.Name(), busTimeout)
				s.TimerError = ti.Comment
			}
		case v.Found && !v.Next.IsZero():
			g := v.Next.UTC()
			ti.OS = &g
		case v.Found:
			ti.Held = v.Reading.String()
		}
		if ti.Armed != nil && v.Found {
			ti.Agree = v.OK
			if !v.OK {
				ti.Comment = v.String()
			}
		} else {
			ti.Agree = ti.Armed == nil && !v.Found
		}
		if !ti.Agree && ti.Comment == "" {
			switch {
			case ti.Armed == nil:
				ti.Comment = "armed in the OS but not in the state"
			case !v.Found && r.st.Phase == PhaseRunning && k == timer.Wake:
				ti.Agree, ti.Comment = true, "fired: its session is running"
			case !v.Found:
				ti.Comment = "in the state but the OS has no such timer"
			default:
				ti.Comment = "the OS and the state disagree"
			}
		}
		if !ti.Agree {
			s.Warnings = append(s.Warnings, fmt.Sprintf("%s timer: %s", k, ti.Comment))
		}
		if k != timer.Alert || ti.Armed != nil || ti.OS != nil {
			s.Timers = append(s.Timers, ti)
		}
		if s.TimerError != "" {
			break
		}
	}
	s.Watcher = "off"
	if *r.cfg.WatchInbox && s.TimerError == "" {
		qctx, qcancel := context.WithTimeout(ctx, busTimeout)
		installed, err := be.Installed(qctx)
		qcancel()
		s.Watcher = "missing"
		if err != nil {
			s.Watcher = "unknown"
		}
		for _, in := range installed {
			switch {
			case in.ID != r.id || !in.Watch:
			case in.WatchStopped:
				s.Watcher = "stopped"
			default:
				s.Watcher = "on"
			}
		}
		switch {
		case r.st.Phase == PhasePaused && s.Watcher == "missing":
			s.Watcher = "paused" // pause removes it; resume installs it again: not a fault
		case !r.st.Phase.Active() && s.Watcher == "missing":
			s.Watcher = "off" // a stopped chamber watches nothing
		case !r.st.Phase.Active():
		case s.Watcher == "missing":
			s.Warnings = append(s.Warnings, "the inbox watcher is not installed: messages wait for the next wake (the next wake installs it again)"+r.kickWatcher(ctx, be))
		case s.Watcher == "stopped":
			s.Warnings = append(s.Warnings, fmt.Sprintf("the inbox watcher is not running (stopped, or failed at its trigger limit: systemctl --user status %s): messages wait for the next wake (the next wake starts it again)", timer.SystemdPathName(r.id))+r.kickWatcher(ctx, be))
		}
	}
	if s.TimerError == "" {
		s.Warnings = append(s.Warnings, be.Warnings(ctx)...)
		s.jobs(ctx, be, r.id) // status_jobs.go
	}
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

// WriteText prints the status for a person. Everything that came from the chamber or the agent
// goes through the terminal sanitizer.
func (s *StatusInfo) WriteText(w io.Writer, loc *time.Location, now time.Time) {
	p := func(k, format string, args ...any) {
		fmt.Fprintf(w, "%-16s %s\n", k+":", termtext.Line(fmt.Sprintf(format, args...)))
	}
	p("chamber", "%s", s.Dir)
	p("plan", "%s", s.Plan)
	p("state", "%s (session %d)", s.State, s.Session)
	switch {
	case s.Phase == PhaseRunning && s.Holder != nil:
		p("next wake", "none while session %d runs (started %s)", s.Session, When(s.Holder.Since, loc, now))
	case s.Paused != nil:
		until := "until `cryochamber resume`"
		if s.PausedUntil != nil {
			until = "until " + When(*s.PausedUntil, loc, now)
		}
		p("paused", "since %s, %s", When(*s.Paused, loc, now), until)
		if s.KeptWake != nil {
			p("kept wake", "%s, runs after the pause (at its end if it fell due meanwhile)", When(*s.KeptWake, loc, now))
		}
	case s.NextWake != nil:
		p("next wake", "%s, %s", When(*s.NextWake, loc, now), s.NextReason)
	default:
		p("next wake", "none")
	}
	if s.RetryingSince != nil {
		p("retrying", "every %s since %s", s.SlowRetry, When(*s.RetryingSince, loc, now))
	}
	for _, u := range s.Upcoming {
		p("upcoming", "%-8s %s  %s", u.Kind, When(u.At, loc, now), u.What)
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
		p("last", "session %d, %s: %s; ended %s", l.Session, res, l.Summary, When(l.End, loc, now))
	}
	for _, pl := range s.Plans {
		p("plan note", "%s", pl)
	}
	for _, t := range s.Timers {
		parts := []string{"os none"}
		switch {
		case t.OS != nil:
			parts[0] = "os " + t.OS.In(loc).Format("2006-01-02 15:04:05 MST")
		case t.Held != "":
			parts[0] = t.Held
		}
		if t.Armed != nil {
			parts = append(parts, "state "+t.Armed.In(loc).Format("2006-01-02 15:04:05 MST"))
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
	for _, j := range s.Jobs { // status_jobs.go
		p("slurm job", "%s", statusJob(j, loc))
	}
	p("inbox watcher", "%s", s.Watcher)
	p("sandbox", "%s", s.Sandbox)
	if s.Holder != nil {
		alive := "alive"
		if !s.Holder.Alive {
			alive = "DEAD"
		}
		p("lock", "pid %d (%s), session %d, %s since %s", s.Holder.PID, alive, s.Holder.Session, s.Holder.Command, When(s.Holder.Since, loc, now))
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
		p("last alert", "%s, session %d, %s, %s: %s", When(a.At, loc, now), a.Session, a.Reason, ok, strings.Join(a.Results, "; "))
	}
	if s.Undelivered > 0 {
		p("pending", "%d alert(s) not delivered yet; retried by their own timer", s.Undelivered)
	}
	if len(s.FailingTargets) > 0 {
		p("ALERTS", "%s", red(w, termtext.Line(failingText(s.FailingTargets, s.ReachNobody))))
	}
	p("messages", "%d waiting in the inbox, %d in the outbox", s.Inbox, s.Outbox)
	for _, c := range s.Sync {
		res := "ok"
		if c.LastError != "" {
			res = "FAILED: " + c.LastError
		}
		p("sync "+c.Channel, "last %s: %s", When(c.LastSync, loc, now), res)
	}
	for _, g := range s.Guardrails {
		p("guardrail", "%s", g)
	}
	if s.SpendMonth > 0 || s.SpendMonthUnknown > 0 {
		p("spend", "%s today%s, %s this month%s", fmtUSD(s.SpendToday), unknownText(s.SpendTodayUnknown), fmtUSD(s.SpendMonth), unknownText(s.SpendMonthUnknown))
	}
	if hb := s.Heartbeat; hb != nil {
		p("heartbeat", "%s", heartbeatLine(hb, loc, now)) // heartbeat.go
	}
	for _, wn := range s.Warnings {
		p("warning", "%s", wn)
	}
	if len(s.Tail) > 0 {
		fmt.Fprintln(w, "latest block:")
		for _, l := range s.Tail {
			fmt.Fprintln(w, "  "+termtext.Line(l))
		}
	}
}

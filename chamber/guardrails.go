package chamber

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/validate"
)

// Guardrails: the operator's bounds on the schedule the agent chooses for itself. An agent (or
// an injection that reached it) that answers [CRYO:WAKE +1s] every session would otherwise
// run ten sessions a minute, with nobody told. The bounds are cryo.toml keys, accepted and
// pinned like every limit (accept.go), and enforced twice:
//
//   - when the next wake is chosen (validation step 2, which shows the wake asked for and the
//     wake granted): chooseWake;
//   - by the wake itself, which may be a message, a TODO or a retry that nothing chose:
//     a wake that fires inside quiet hours or over the daily cap defers (re-arms for when it
//     may run, without running the session and without claiming a message); one past
//     stop_after or max_sessions ends the plan. wakeGuard.
//
// A guardrail that moves or ends a wake is told to the operator once per episode (a notice to
// the operator's targets and a line in status, until a wake is chosen that it did not move),
// to the agent in its next prompt, and in the history row of the session (the key's name).
//
// The rules are pure functions of (now, the zone, the configuration, the session counts): days
// and quiet hours are computed in the chamber's zone, so they follow its DST changes.

// Defaults of the guardrails.
const (
	DefaultMinInterval       = time.Minute
	DefaultMaxSessionsPerDay = 96
)

// The guardrails' keys, as cryo.toml, history and notices name them.
const (
	keyMinInterval = "min_interval"
	keyPerDay      = "max_sessions_per_day"
	keyQuiet       = "quiet_hours"
	keyStopAfter   = "stop_after"
	keyMaxSessions = "max_sessions"
	keyBudgetDay   = "budget_per_day"
	keyBudgetMonth = "budget_per_month"
)

// clockWindow is quiet_hours: from Start to End (minutes after local midnight), crossing
// midnight when End <= Start.
type clockWindow struct {
	Start, End int
}

// parseClockWindow reads "22:00-07:00".
func parseClockWindow(s string) (clockWindow, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), "-")
	if !ok {
		return clockWindow{}, fmt.Errorf("%q is not a range of hours (want \"HH:MM-HH:MM\", such as \"22:00-07:00\")", s)
	}
	start, err1 := parseClock(a)
	end, err2 := parseClock(b)
	if err1 != nil || err2 != nil {
		return clockWindow{}, fmt.Errorf("%q is not a range of hours (want \"HH:MM-HH:MM\", such as \"22:00-07:00\")", s)
	}
	if start == end {
		return clockWindow{}, fmt.Errorf("%q starts and ends at the same time", s)
	}
	return clockWindow{start, end}, nil
}

func parseClock(s string) (int, error) {
	h, m, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok || len(h) == 0 || len(h) > 2 || len(m) != 2 {
		return 0, fmt.Errorf("bad clock time %q", s)
	}
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if err1 != nil || err2 != nil || hh < 0 || hh > 23 || mm < 0 || mm > 59 {
		return 0, fmt.Errorf("bad clock time %q", s)
	}
	return hh*60 + mm, nil
}

// at is the instant of minute-of-day m on the local date y-mo-d in loc (time.Date normalises a
// time in a DST gap forward by the gap).
func at(y int, mo time.Month, d, m int, loc *time.Location) time.Time {
	return time.Date(y, mo, d, m/60, m%60, 0, 0, loc)
}

// quietUntil reports whether t is inside quiet hours and, if so, when they end. Each window
// begins on a local date at Start; the one that may hold t began today or yesterday.
func (w clockWindow) quietUntil(t time.Time, loc *time.Location) (time.Time, bool) {
	lt := t.In(loc)
	y, mo, d := lt.Date()
	for _, back := range []int{0, -1} {
		start := at(y, mo, d+back, w.Start, loc)
		endDay := d + back
		if w.End <= w.Start {
			endDay++
		}
		end := at(y, mo, endDay, w.End, loc)
		if !t.Before(start) && t.Before(end) {
			return end, true
		}
	}
	return time.Time{}, false
}

// nextDay is the start of the local day after t's in loc.
func nextDay(t time.Time, loc *time.Location) time.Time {
	lt := t.In(loc)
	y, mo, d := lt.Date()
	return time.Date(y, mo, d+1, 0, 0, 0, 0, loc)
}

// dayKey names the local day of t in loc.
func dayKey(t time.Time, loc *time.Location) string { return t.In(loc).Format("2006-01-02") }

// parseStopAfter reads stop_after: a date (its start, 00:00 in the chamber's zone) or an
// RFC 3339 instant.
func parseStopAfter(s string, loc *time.Location) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.ParseInLocation("2006-01-02", s, loc); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q is not a date or an instant (want \"2027-06-01\" or \"2027-06-01T09:00:00+02:00\")", s)
}

// guardConfig is the guardrails of a configuration, read and checked.
type guardConfig struct {
	minInterval time.Duration
	perDay      int // 0: no cap
	quiet       *clockWindow
	quietWake   bool // quiet_hours_messages = "wake"
	stopAfter   *time.Time
	maxSessions int // 0: none
	jitter      time.Duration
	loc         *time.Location
	budgetDay   float64 // USD; 0: none (ledger.go)
	budgetMonth float64
}

// checkGuardrails checks and fills in the guardrail keys (called by Config.check).
func (c *Config) checkGuardrails(name string, data []byte) error {
	bad := func(key, format string, args ...any) error {
		return &ConfigError{File: name, Line: keyLine(data, "", key), Key: key, Msg: fmt.Sprintf(format, args...)}
	}
	g := guardConfig{loc: c.Location}
	g.minInterval = DefaultMinInterval
	if c.MinInterval.set {
		g.minInterval = c.MinInterval.D
	}
	g.perDay = DefaultMaxSessionsPerDay
	if c.MaxSessionsPerDay != nil {
		if *c.MaxSessionsPerDay < 1 {
			return bad(keyPerDay, "must be at least 1, not %d", *c.MaxSessionsPerDay)
		}
		g.perDay = *c.MaxSessionsPerDay
	}
	if c.QuietHours != "" {
		w, err := parseClockWindow(c.QuietHours)
		if err != nil {
			return bad(keyQuiet, "%v", err)
		}
		g.quiet = &w
	}
	switch c.QuietHoursMessages {
	case "", "wait":
	case "wake":
		g.quietWake = true
	default:
		return bad("quiet_hours_messages", "unknown value %q (want \"wait\" or \"wake\")", c.QuietHoursMessages)
	}
	if c.StopAfter != "" {
		t, err := parseStopAfter(c.StopAfter, c.Location)
		if err != nil {
			return bad(keyStopAfter, "%v", err)
		}
		g.stopAfter = &t
	}
	if c.MaxSessions != nil {
		if *c.MaxSessions < 1 {
			return bad(keyMaxSessions, "must be at least 1, not %d", *c.MaxSessions)
		}
		g.maxSessions = *c.MaxSessions
	}
	if c.Jitter.set {
		g.jitter = c.Jitter.D
	}
	for _, b := range []struct {
		key string
		v   *float64
		dst *float64
	}{{keyBudgetDay, c.BudgetPerDay, &g.budgetDay}, {keyBudgetMonth, c.BudgetPerMonth, &g.budgetMonth}} {
		if b.v == nil {
			continue
		}
		if !(*b.v > 0 && *b.v <= 1e6) {
			return bad(b.key, "must be an amount in USD above 0 (such as 5 or 2.50), not %v", *b.v)
		}
		*b.dst = *b.v
	}
	c.guard = g
	return nil
}

// guardCounts are the sessions counted so far.
type guardCounts struct {
	Today    int // sessions started on the local day of now
	Sessions int // sessions since the chamber was started
	Spend    SpendState
}

// choice is the wake a guardrail granted for one asked for.
type choice struct {
	Asked, At time.Time
	Moved     []string // the keys that moved it, in the order they did
	End       string   // the key that ends the plan instead ("" = it goes on)
	Why       string   // what the guardrails did, for the step, the prompt and the notice
}

// chooseWake applies the guardrails to a wake asked for at asked, chosen at now after a session
// that ended at end. planned: the wake is the agent's WAKE (jitter applies); message: it is for
// a waiting message (min_interval does not hold it back; quiet hours do unless
// quiet_hours_messages = "wake"). rnd is the random source of the jitter.
func chooseWake(g guardConfig, now, end, asked time.Time, planned, message bool, n guardCounts, rnd *rand.Rand) choice {
	c := choice{Asked: asked, At: asked}
	moved := func(key string) {
		for _, k := range c.Moved {
			if k == key {
				return
			}
		}
		c.Moved = append(c.Moved, key)
	}
	if g.maxSessions > 0 && n.Sessions >= g.maxSessions {
		c.End = keyMaxSessions
		c.Why = fmt.Sprintf("max_sessions (%d) reached: the plan ends", g.maxSessions)
		return c
	}
	if planned && g.jitter > 0 && rnd != nil {
		c.At = c.At.Add(time.Duration(rnd.Int64N(int64(g.jitter))))
		c.At = ceilSecond(c.At)
	}
	if !message {
		if bound := ceilSecond(end.Add(g.minInterval)); c.At.Before(bound) {
			c.At = bound
			moved(keyMinInterval)
		}
	}
	// The daily cap and quiet hours may each move the wake into the other's way: a few rounds
	// settle it (each move is forward, to a day start or a window's end).
	for i := 0; i < 6; i++ {
		changed := false
		if g.perDay > 0 && dayKey(c.At, g.loc) == dayKey(now, g.loc) && n.Today >= g.perDay {
			c.At = nextDay(c.At, g.loc)
			moved(keyPerDay)
			changed = true
		}
		if g.quiet != nil && !(message && g.quietWake) {
			if until, in := g.quiet.quietUntil(c.At, g.loc); in {
				c.At = until
				moved(keyQuiet)
				changed = true
			}
		}
		if t, k := g.budgetHold(c.At, now, n.Spend); k != "" {
			c.At = t
			moved(k)
			changed = true
		}
		if !changed {
			break
		}
	}
	if g.stopAfter != nil && !c.At.Before(*g.stopAfter) {
		c.End = keyStopAfter
		c.Why = fmt.Sprintf("stop_after (%s) reached: the wake at %s would come after it; the plan ends",
			g.stopAfter.In(g.loc).Format(time.RFC3339), c.At.In(g.loc).Format(time.RFC3339))
		return c
	}
	if len(c.Moved) > 0 {
		c.Why = fmt.Sprintf("asked for %s, granted %s (%s)", c.Asked.In(g.loc).Format(time.RFC3339),
			c.At.In(g.loc).Format(time.RFC3339), strings.Join(c.Moved, ", "))
		c.Why += g.spentText(c.Moved, now, n.Spend)
	}
	return c
}

// spentText adds the budgets' figures when a budget moved the wake.
func (g guardConfig) spentText(moved []string, now time.Time, s SpendState) string {
	out := ""
	for _, k := range moved {
		if k == keyBudgetDay || k == keyBudgetMonth {
			out += "; " + g.budgetFigures(k, s.at(now, g.loc))
		}
	}
	return out
}

// wakeGuard is the wake's own check, at now, of a session about to run for why: ok, or defer
// until a time (and the key), or end the plan (the key).
func wakeGuard(g guardConfig, now time.Time, why Why, n guardCounts) (until time.Time, key string, end bool) {
	if g.maxSessions > 0 && n.Sessions >= g.maxSessions {
		return time.Time{}, keyMaxSessions, true
	}
	if g.stopAfter != nil && !now.Before(*g.stopAfter) {
		return time.Time{}, keyStopAfter, true
	}
	message := why == WhyInbox || why == WhyRequested
	t := now
	for i := 0; i < 6; i++ {
		changed := false
		if g.perDay > 0 && dayKey(t, g.loc) == dayKey(now, g.loc) && n.Today >= g.perDay {
			t = nextDay(t, g.loc)
			if key == "" {
				key = keyPerDay
			}
			changed = true
		}
		if g.quiet != nil && !(message && g.quietWake) {
			if u, in := g.quiet.quietUntil(t, g.loc); in {
				t = u
				if key == "" {
					key = keyQuiet
				}
				changed = true
			}
		}
		if u, k := g.budgetHold(t, now, n.Spend); k != "" {
			t = u
			if key == "" {
				key = k
			}
			changed = true
		}
		if !changed {
			break
		}
	}
	if key == "" {
		return time.Time{}, "", false
	}
	return t, key, false
}

// GuardState is what the state keeps for the guardrails: the session counts, the episodes
// the operator was told of, and the notes for the next prompt.
type GuardState struct {
	Day      string `json:"day,omitempty"`   // the local day Today counts
	Today    int    `json:"today,omitempty"` // sessions started that day
	Sessions int    `json:"sessions"`        // sessions since start
	// Active is each guardrail whose episode is running (it moved or ended the latest wake
	// chosen): its key → what it did. The operator was told once, when it began.
	Active map[string]string `json:"active,omitempty"`
	Notes  []string          `json:"notes,omitempty"` // for the next prompt
	Spend  SpendState        `json:"spend"`           // ledger.go
	// UnknownTold is the month whose sessions of unknown cost the operator was told of
	// (budgets set): once a month.
	UnknownTold string `json:"unknown_told,omitempty"`
}

func (r *runner) guardState() *GuardState {
	if r.st.Guard == nil {
		r.st.Guard = &GuardState{}
	}
	return r.st.Guard
}

// guardCounts are the counts as of now.
func (r *runner) guardCounts(now time.Time) guardCounts {
	g := r.guardState()
	n := guardCounts{Sessions: g.Sessions, Spend: g.Spend}
	if g.Day == dayKey(now, r.cfg.Location) {
		n.Today = g.Today
	}
	return n
}

// countSession counts a session that starts at start (every session: planned, message-woken,
// retried, and the one start runs).
func (r *runner) countSession(start time.Time) {
	g := r.guardState()
	if d := dayKey(start, r.cfg.Location); g.Day != d {
		g.Day, g.Today = d, 0
	}
	g.Today++
	g.Sessions++
}

// guardRestart is start's: max_sessions counts from it; the day's count stays (the daily cap
// is about the day, however many starts it had).
func (r *runner) guardRestart() {
	g := r.guardState()
	g.Sessions = 0
	g.Active = nil
	g.Notes = nil
}

// guardRand is the jitter's random source.
func (r *runner) guardRand() *rand.Rand {
	if r.env.Rand != nil {
		return r.env.Rand
	}
	seed := uint64(r.now().UnixNano())
	return rand.New(rand.NewPCG(seed, uint64(r.env.PID)))
}

// guardChoice applies the guardrails to v.next in judge (step 2): the step says what was asked
// and what was granted. end is the end of the session.
func (r *runner) guardChoice(rep *validate.Report, v *verdict, asked *time.Time, end time.Time) {
	if v.next == nil {
		return
	}
	now := r.now()
	planned := v.nextReason == WhyPlan && asked != nil
	message := v.nextReason == WhyInbox || v.nextReason == WhyRequested
	want := *v.next
	if planned && asked.After(want) {
		want = *asked
	}
	c := chooseWake(r.cfg.guard, now, end, want, planned, message, r.guardCounts(now), r.guardRand())
	if planned {
		c.Asked = *asked
		if len(c.Moved) > 0 {
			c.Why = fmt.Sprintf("asked for %s, granted %s (%s)", c.Asked.In(r.cfg.Location).Format(time.RFC3339),
				c.At.In(r.cfg.Location).Format(time.RFC3339), strings.Join(c.Moved, ", "))
			c.Why += r.cfg.guard.spentText(c.Moved, now, r.guardState().Spend)
		}
	}
	v.guard = &c
	switch {
	case c.End != "":
		v.next = nil
		rep.PlanComplete = true
		rep.Add(validate.StepWake, validate.Warn, "%s", c.Why)
	case len(c.Moved) > 0:
		t := c.At.UTC()
		v.next = &t
		if v.planWake != nil && (v.nextReason == WhyPlan || !v.planWake.After(t)) {
			// The plan's own wake moves too when the moved wake (a TODO's) passes it: the
			// session at t is the plan's, and a plan wake left behind in the past would read
			// as "plan complete" to a session that prints no WAKE.
			pw := t
			v.planWake = &pw
			v.nextReason = WhyPlan
		}
		rep.SetWake(t)
		rep.Add(validate.StepWake, validate.Warn, "%s", c.Why)
	case !c.At.Equal(*v.next):
		// jitter alone
		t := c.At.UTC()
		v.next = &t
		if v.planWake != nil && v.nextReason == WhyPlan {
			pw := t
			v.planWake = &pw
		}
		rep.SetWake(t)
		rep.Add(validate.StepWake, validate.Pass, "asked for %s, granted %s (jitter %s)", c.Asked.In(r.cfg.Location).Format(time.RFC3339),
			t.In(r.cfg.Location).Format(time.RFC3339), fmtDur(r.cfg.guard.jitter))
	}
}

// guardTell records what the guardrails did to the wake chosen after session n: a notice to
// the operator when a guardrail's episode begins, the status lines, the next prompt's notes.
// A guardrail that did not move this wake ends its episode.
func (r *runner) guardTell(ctx context.Context, n int, c *choice) {
	g := r.guardState()
	g.Notes = nil
	r.tellUnknownCost(ctx)
	keys := map[string]bool{}
	if c != nil {
		for _, k := range c.Moved {
			keys[k] = true
		}
		if c.End != "" {
			keys[c.End] = true
		}
	}
	for k := range g.Active {
		if !keys[k] {
			delete(g.Active, k)
		}
	}
	if len(keys) == 0 {
		return
	}
	msg, note := c.Why, "The operator's limits (cryo.toml): "+c.Why+"."
	if c.End == "" {
		msg = fmt.Sprintf("the wake after session %d was moved by the operator's limits: %s", n, c.Why)
		note = fmt.Sprintf("The operator's limits (cryo.toml) moved the wake after session %d: %s.", n, c.Why)
	}
	g.Notes = []string{note}
	for _, k := range append(append([]string(nil), c.Moved...), c.End) {
		if k == "" {
			continue
		}
		r.guardEpisode(ctx, n, k, msg)
	}
}

// guardEpisode tells the operator about guardrail key once per episode.
func (r *runner) guardEpisode(ctx context.Context, n int, key, msg string) {
	g := r.guardState()
	if g.Active == nil {
		g.Active = map[string]string{}
	}
	_, told := g.Active[key]
	g.Active[key] = msg
	r.logNote("guardrail " + key + ": " + msg)
	if told {
		return
	}
	r.notify(ctx, n, "guardrail", fmt.Sprintf("guardrail %s: %s. You are told once until it stops applying; `cryochamber status --dir %s` shows it while it does.", key, msg, r.dir))
}

// guardKeys names the guardrails that moved or ended a choice ("" = none), for the history.
func (c *choice) keys() string {
	if c == nil {
		return ""
	}
	ks := append([]string(nil), c.Moved...)
	if c.End != "" {
		ks = append(ks, c.End)
	}
	return strings.Join(ks, ",")
}

// guardWake is the wake's own check before a session runs for why. It returns true when the
// wake was deferred or the plan ended (nothing runs).
func (r *runner) guardWake(ctx context.Context, why Why) (bool, error) {
	now := r.now()
	until, key, end := wakeGuard(r.cfg.guard, now, why, r.guardCounts(now))
	if key == "" {
		return false, nil
	}
	n := r.st.Session
	if end {
		msg := fmt.Sprintf("%s reached before session %d could run: the plan ends; no timer is left", key, n+1)
		if key == keyMaxSessions {
			msg = fmt.Sprintf("max_sessions (%d) reached: the plan ends after session %d; no timer is left", r.cfg.guard.maxSessions, n)
		}
		return true, r.guardEnd(ctx, n, key, msg)
	}
	t := ceilSecond(until).UTC()
	if soon := ceilSecond(now.Add(armLead)); t.Before(soon) {
		t = soon.UTC() // a timer that fired a moment early: never armed in the past
	}
	rep := validate.New(nil)
	if err := r.arm(ctx, rep, t); err != nil {
		r.warnf("the wake is held back by %s but could not be re-armed for %s: %v", key, t.Format(time.RFC3339), err)
		return true, &Error{Msg: "cannot re-arm the deferred wake", Err: err, Hint: "cryochamber status shows what is armed"}
	}
	if why == WhyInbox || why == WhyRequested {
		r.st.Reason = why
	}
	r.st.Wake = &t
	msg := fmt.Sprintf("a wake (%s) at %s falls in %s: deferred to %s", why, now.In(r.cfg.Location).Format(time.RFC3339), key, t.In(r.cfg.Location).Format(time.RFC3339))
	if key == keyBudgetDay || key == keyBudgetMonth {
		msg = fmt.Sprintf("a wake (%s) at %s: the budget is spent (%s): deferred to %s", why, now.In(r.cfg.Location).Format(time.RFC3339),
			r.cfg.guard.budgetFigures(key, r.guardState().Spend.at(now, r.cfg.Location)), t.In(r.cfg.Location).Format(time.RFC3339))
	}
	if key == keyPerDay {
		msg = fmt.Sprintf("a wake (%s) at %s is over max_sessions_per_day (%d): deferred to %s", why, now.In(r.cfg.Location).Format(time.RFC3339), r.cfg.guard.perDay, t.In(r.cfg.Location).Format(time.RFC3339))
	}
	g := r.guardState()
	note := "The operator's limits (cryo.toml) held a wake back: " + msg + "."
	if len(g.Notes) == 0 || g.Notes[len(g.Notes)-1] != note {
		g.Notes = append(g.Notes, note)
		if len(g.Notes) > maxStateWarns {
			g.Notes = g.Notes[len(g.Notes)-maxStateWarns:]
		}
	}
	r.guardEpisode(ctx, n, key, msg)
	if err := r.save(); err != nil {
		return true, err
	}
	r.printf("%s", msg)
	return true, nil
}

// guardHolds reports whether a waiting message must wait now (inboxLast must not re-arm for it).
func (r *runner) guardHolds() bool {
	now := r.now()
	_, key, _ := wakeGuard(r.cfg.guard, now, WhyInbox, r.guardCounts(now))
	return key != ""
}

// guardEnd ends the plan for a guardrail at the wake: no timer left, a notice.
func (r *runner) guardEnd(ctx context.Context, n int, key, msg string) error {
	if err := r.disarmAll(ctx); err != nil {
		r.warnf("%v", err)
	}
	r.st.Phase = PhaseComplete
	r.st.Wake, r.st.PlanWake, r.st.Reason = nil, nil, ""
	r.guardEpisode(ctx, n, key, msg)
	if err := r.save(); err != nil {
		return err
	}
	r.logNote("the plan ended: " + msg)
	r.printf("the plan ended: %s", msg)
	return nil
}

// GuardLines are status's lines about the guardrails in force now.
func (r *runner) guardLines() []string {
	g := r.st.Guard
	if g == nil {
		return []string{}
	}
	var out []string
	for _, k := range []string{keyMinInterval, keyPerDay, keyQuiet, keyStopAfter, keyMaxSessions, keyBudgetDay, keyBudgetMonth} {
		if m, ok := g.Active[k]; ok {
			out = append(out, k+": "+m)
		}
	}
	if out == nil {
		return []string{}
	}
	return out
}

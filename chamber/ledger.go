package chamber

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/cryochamber/cryochamber/agent"
	"github.com/cryochamber/cryochamber/marker"
	"github.com/cryochamber/cryochamber/sessionlog"
)

// The cost ledger: what each session used (tokens in and out, cost in USD), in its history row,
// and the running spend of the day and the month (in the chamber's zone) that the budgets
// (budget_per_day, budget_per_month) are held against.
//
// Where a session's usage comes from, in order: the agent CLI's own usage output, when the
// preset's output carries it (agent/usage.go); else the session's [CRYO:USAGE ...] marker,
// which is the agent's claim and is shown as such (usage_source "agent"). A session whose
// usage is known from neither is unknown: its row says null, the spend says how many sessions
// of the period are unknown, and when a budget is set the operator is told (once per period),
// because a budget cannot be held against what cannot be read. It is never counted as free.

// sessionUsage is one session's usage, each figure nil when unknown.
type sessionUsage struct {
	TokensIn  *int64
	TokensOut *int64
	CostUSD   *float64
	Source    string // "agent" (the USAGE marker: a claim), "claude", "codex", "opencode"
}

// usageOf is the usage of a session from its markers (nil when it printed none).
func usageOf(m *marker.Result) *sessionUsage {
	if m == nil || m.Usage == nil {
		return nil
	}
	return &sessionUsage{TokensIn: m.Usage.TokensIn, TokensOut: m.Usage.TokensOut, CostUSD: m.Usage.CostUSD, Source: "agent"}
}

// SpendState is the running spend of the current day and month in the chamber's zone.
type SpendState struct {
	Day          string  `json:"day,omitempty"` // 2026-11-27
	DayUSD       float64 `json:"day_usd"`
	DayUnknown   int     `json:"day_unknown,omitempty"` // sessions of the day whose cost is unknown
	Month        string  `json:"month,omitempty"`       // 2026-11
	MonthUSD     float64 `json:"month_usd"`
	MonthUnknown int     `json:"month_unknown,omitempty"`
}

func monthKey(t time.Time, loc *time.Location) string { return t.In(loc).Format("2006-01") }

// nextMonth is the start of the month after t's in loc.
func nextMonth(t time.Time, loc *time.Location) time.Time {
	lt := t.In(loc)
	return time.Date(lt.Year(), lt.Month()+1, 1, 0, 0, 0, 0, loc)
}

// add books one session that ended at end.
func (s *SpendState) add(end time.Time, loc *time.Location, u *sessionUsage) {
	if d := dayKey(end, loc); s.Day != d {
		s.Day, s.DayUSD, s.DayUnknown = d, 0, 0
	}
	if m := monthKey(end, loc); s.Month != m {
		s.Month, s.MonthUSD, s.MonthUnknown = m, 0, 0
	}
	if u == nil || u.CostUSD == nil {
		s.DayUnknown++
		s.MonthUnknown++
		return
	}
	s.DayUSD = roundCents(s.DayUSD + *u.CostUSD)
	s.MonthUSD = roundCents(s.MonthUSD + *u.CostUSD)
}

// at is the spend as of now (a new day or month starts at zero).
func (s SpendState) at(now time.Time, loc *time.Location) SpendState {
	if s.Day != dayKey(now, loc) {
		s.Day, s.DayUSD, s.DayUnknown = dayKey(now, loc), 0, 0
	}
	if s.Month != monthKey(now, loc) {
		s.Month, s.MonthUSD, s.MonthUnknown = monthKey(now, loc), 0, 0
	}
	return s
}

// roundCents keeps sums to a hundredth of a cent, so that years of additions do not drift.
func roundCents(v float64) float64 { return math.Round(v*10000) / 10000 }

// fmtUSD prints an amount: $0.42, $0.0031.
func fmtUSD(v float64) string {
	if v != 0 && v < 0.01 {
		return "$" + strconv.FormatFloat(v, 'f', 4, 64)
	}
	return "$" + strconv.FormatFloat(v, 'f', 2, 64)
}

// sessionCost is the usage of the session being finished: the CLI's own output, else its
// USAGE marker.
func (r *runner) sessionCost(m *marker.Result) *sessionUsage {
	if r.usage != nil {
		return r.usage
	}
	return usageOf(m)
}

// bookSpend adds session f's cost (its usage, else m's USAGE marker) to the running spend,
// once, before its next wake is chosen (so that the session that spends the budget is the last
// of the period).
func (r *runner) bookSpend(f *finishing, m *marker.Result) {
	if f.booked || r.unlocked {
		return
	}
	f.booked = true
	u := r.sessionCost(m)
	r.guardState().Spend.add(f.o.end, r.cfg.Location, u)
	if (u == nil || u.CostUSD == nil) && r.cfg.guard.budgeted() {
		r.unknownCost = f.n
	}
}

// bookUsage records session f's usage in its history row (and in the spend, if not yet).
func (r *runner) bookUsage(f *finishing, row *HistoryRow, m *marker.Result) {
	r.bookSpend(f, m)
	if u := r.sessionCost(m); u != nil {
		row.TokensIn, row.TokensOut, row.CostUSD, row.UsageSource = u.TokensIn, u.TokensOut, u.CostUSD, u.Source
	}
}

// budgeted reports whether a budget is set.
func (g guardConfig) budgeted() bool { return g.budgetDay > 0 || g.budgetMonth > 0 }

// budgetHold is when the budgets let the next session run, at or after t: t itself when they
// are not spent, else the start of the next day or month (and the key that moved it).
func (g guardConfig) budgetHold(t, now time.Time, s SpendState) (time.Time, string) {
	s = s.at(now, g.loc)
	if g.budgetMonth > 0 && s.MonthUSD >= g.budgetMonth && monthKey(t, g.loc) == s.Month {
		return nextMonth(t, g.loc), keyBudgetMonth
	}
	if g.budgetDay > 0 && s.DayUSD >= g.budgetDay && dayKey(t, g.loc) == s.Day {
		return nextDay(t, g.loc), keyBudgetDay
	}
	return t, ""
}

// budgetFigures says what was spent against what was allowed, for the notice and the prompt.
func (g guardConfig) budgetFigures(key string, s SpendState) string {
	if key == keyBudgetMonth {
		return fmt.Sprintf("%s spent this month (%s) of budget_per_month %s%s", fmtUSD(s.MonthUSD), s.Month, fmtUSD(g.budgetMonth), unknownText(s.MonthUnknown))
	}
	return fmt.Sprintf("%s spent today (%s) of budget_per_day %s%s", fmtUSD(s.DayUSD), s.Day, fmtUSD(g.budgetDay), unknownText(s.DayUnknown))
}

func unknownText(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", plus %d session(s) whose cost is unknown", n)
}

// remainingBudget is what the budgets leave for one session now (ok false: no budget set).
func (r *runner) remainingBudget(now time.Time) (float64, bool) {
	g := r.cfg.guard
	if !g.budgeted() {
		return 0, false
	}
	s := r.guardState().Spend.at(now, r.cfg.Location)
	left := math.Inf(1)
	if g.budgetDay > 0 {
		left = math.Min(left, g.budgetDay-s.DayUSD)
	}
	if g.budgetMonth > 0 {
		left = math.Min(left, g.budgetMonth-s.MonthUSD)
	}
	return math.Max(roundCents(left), 0), true
}

// usageColumns are history's TOKENS and COST: "-" and "unknown" when not known; a cost the
// agent claimed is marked so.
func (row HistoryRow) usageColumns() (string, string) {
	tokens := "-"
	if row.TokensIn != nil || row.TokensOut != nil {
		f := func(p *int64) string {
			if p == nil {
				return "?"
			}
			return strconv.FormatInt(*p, 10)
		}
		tokens = f(row.TokensIn) + "/" + f(row.TokensOut)
	}
	cost := "unknown"
	if row.CostUSD != nil {
		cost = fmtUSD(*row.CostUSD)
		if row.UsageSource == "agent" {
			cost += " (claimed)"
		}
	}
	return tokens, cost
}

// tellUnknownCost tells the operator, once a month, that a session's cost could not be read
// while a budget is set: the budget is then held against what is known, and the rest is shown
// as unknown, never as free.
func (r *runner) tellUnknownCost(ctx context.Context) {
	n := r.unknownCost
	if n == 0 {
		return
	}
	r.unknownCost = 0
	g := r.guardState()
	if g.UnknownTold == g.Spend.Month {
		return
	}
	g.UnknownTold = g.Spend.Month
	msg := fmt.Sprintf("the cost of session %d is unknown (its agent CLI's output carried no usage, and it printed no [CRYO:USAGE ...]): the budget is held against the known spend only, %s; %d session(s) of %s are of unknown cost. Make the agent report its usage (see README, \"Limits and costs\"), or lower the budget to leave room for them.",
		n, r.cfg.guard.budgetFigures(keyBudgetMonth, g.Spend), g.Spend.MonthUnknown, g.Spend.Month)
	if r.cfg.guard.budgetMonth == 0 {
		msg = fmt.Sprintf("the cost of session %d is unknown (its agent CLI's output carried no usage, and it printed no [CRYO:USAGE ...]): the budget is held against the known spend only, %s. Make the agent report its usage (see README, \"Limits and costs\"), or lower the budget to leave room for it.",
			n, r.cfg.guard.budgetFigures(keyBudgetDay, g.Spend))
	}
	r.logNote("usage unknown: " + msg)
	r.notify(ctx, n, "usage-unknown", msg)
}

// budgetArgs gives the claude preset what the budgets leave for this session, as its own
// --max-budget-usd (it stops itself there). Other agents are held by the budgets between
// sessions only.
func (r *runner) budgetArgs(cmd Command, argv []string) []string {
	if cmd.Agent == nil || cmd.Agent.Name != "claude" {
		return argv
	}
	left, ok := r.remainingBudget(r.now())
	if !ok {
		return argv
	}
	return append(argv, "--max-budget-usd", strconv.FormatFloat(left, 'f', 2, 64))
}

// usageOutput is where the agent's standard output goes: the log's stdout, through a reader of
// the preset's JSON form when it prints one (agent.UsageWriter: the agent's text to stdout,
// where markers are read as ever; the other events to the log's stderr; the usage kept in
// r.usage when done runs).
func (r *runner) usageOutput(cmd Command, block *sessionlog.Block) (io.Writer, func()) {
	if cmd.Agent == nil || cmd.Agent.Usage == "" {
		return block.Stdout(), func() {}
	}
	w := agent.NewUsageWriter(cmd.Agent.Usage, block.Stdout(), block.Stderr())
	return w, func() {
		if err := w.Close(); err != nil {
			r.warnf("cannot record the agent's output: %v", err)
		}
		if u, ok := w.Usage(); ok {
			r.usage = &sessionUsage{TokensIn: u.TokensIn, TokensOut: u.TokensOut, CostUSD: u.CostUSD, Source: cmd.Agent.Usage}
		}
	}
}

package chamber

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func f64(v float64) *float64 { return &v }
func i64(v int64) *int64     { return &v }

// TestSpend: the running spend of the day and the month in the chamber's zone, unknown
// sessions counted apart (never as free), a new day or month starting at zero.
func TestSpend(t *testing.T) {
	loc := mustLoc(t, "Europe/Berlin")
	var s SpendState
	s.add(mustTime(t, "2026-10-31T20:00:00Z"), loc, &sessionUsage{CostUSD: f64(0.4)})  // 21:00 CET, Oct 31
	s.add(mustTime(t, "2026-10-31T22:30:00Z"), loc, &sessionUsage{CostUSD: f64(0.25)}) // 23:30 CET, Oct 31
	s.add(mustTime(t, "2026-10-31T22:40:00Z"), loc, nil)
	if s.DayUSD != 0.65 || s.MonthUSD != 0.65 || s.DayUnknown != 1 || s.MonthUnknown != 1 || s.Month != "2026-10" {
		t.Fatalf("%+v", s)
	}
	s.add(mustTime(t, "2026-10-31T23:30:00Z"), loc, &sessionUsage{CostUSD: f64(1)}) // 00:30 CET, Nov 1: a new day and month
	if s.DayUSD != 1 || s.MonthUSD != 1 || s.DayUnknown != 0 || s.MonthUnknown != 0 || s.Day != "2026-11-01" {
		t.Fatalf("after midnight: %+v", s)
	}
	if a := s.at(mustTime(t, "2026-11-02T10:00:00Z"), loc); a.DayUSD != 0 || a.MonthUSD != 1 {
		t.Fatalf("the next day: %+v", a)
	}
	if a := s.at(mustTime(t, "2026-12-01T10:00:00Z"), loc); a.DayUSD != 0 || a.MonthUSD != 0 {
		t.Fatalf("the next month: %+v", a)
	}
}

// TestBudgetHold: a spent budget moves the next wake to the start of the next day or month in
// the zone, with the figures in what the guardrail says.
func TestBudgetHold(t *testing.T) {
	mustLoc(t, "Europe/Berlin")
	g := guardOf(t, "timezone = \"Europe/Berlin\"\nbudget_per_day = 1.00\nbudget_per_month = 20\n")
	now := mustTime(t, "2026-10-25T10:00:00Z") // the fall-back day: 25 hours long
	spend := SpendState{Day: "2026-10-25", DayUSD: 1.2, Month: "2026-10", MonthUSD: 5}
	c := chooseWake(g, now, now, now.Add(time.Hour), true, false, guardCounts{Spend: spend}, nil)
	if want := mustTime(t, "2026-10-25T23:00:00Z"); !c.At.Equal(want) || c.keys() != "budget_per_day" {
		t.Fatalf("granted %s by %q, want %s by budget_per_day", c.At, c.keys(), want)
	}
	if !strings.Contains(c.Why, "$1.20 spent today (2026-10-25) of budget_per_day $1.00") {
		t.Errorf("why %q has no figures", c.Why)
	}
	spend = SpendState{Day: "2026-10-25", DayUSD: 0.5, Month: "2026-10", MonthUSD: 20.5, MonthUnknown: 2}
	c = chooseWake(g, now, now, now.Add(time.Hour), true, false, guardCounts{Spend: spend}, nil)
	if want := mustTime(t, "2026-10-31T23:00:00Z"); !c.At.Equal(want) || c.keys() != "budget_per_month" {
		t.Fatalf("granted %s by %q, want %s (Nov 1, 00:00 CET) by budget_per_month", c.At, c.keys(), want)
	}
	if !strings.Contains(c.Why, "plus 2 session(s) whose cost is unknown") {
		t.Errorf("why %q does not count the unknown sessions", c.Why)
	}
	if _, key, _ := wakeGuard(g, now, WhyInbox, guardCounts{Spend: spend}); key != "budget_per_month" {
		t.Errorf("a wake with the month's budget spent: key %q", key)
	}
	spend = SpendState{Day: "2026-10-24", DayUSD: 3, Month: "2026-10", MonthUSD: 3}
	if c := chooseWake(g, now, now, now.Add(time.Hour), true, false, guardCounts{Spend: spend}, nil); len(c.Moved) != 0 {
		t.Errorf("yesterday's spend held today's wake: %+v", c)
	}
	for _, bad := range []string{"budget_per_day = 0\n", "budget_per_month = -3\n", "budget_per_day = \"5\"\n"} {
		if _, err := ParseConfig("cryo.toml", []byte(bad), time.UTC); err == nil || !strings.Contains(err.Error(), "budget_per_") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestHistoryUsage: history rows carry tokens and cost, null when unknown, and the table says
// unknown, and marks an agent's claim.
func TestHistoryUsage(t *testing.T) {
	rows := []HistoryRow{
		{Session: 1, TokensIn: i64(1200), TokensOut: i64(350), CostUSD: f64(0.42), UsageSource: "agent"},
		{Session: 2},
		{Session: 3, TokensIn: i64(10), TokensOut: i64(5), CostUSD: f64(0.0031), UsageSource: "claude"},
	}
	var js bytes.Buffer
	if err := WriteHistory(&js, rows, true, time.UTC); err != nil {
		t.Fatal(err)
	}
	var back []map[string]any
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back[1]["cost_usd"] != nil || back[1]["tokens_in"] != nil {
		t.Errorf("unknown usage is not null: %v", back[1])
	}
	if _, ok := back[1]["cost_usd"]; !ok {
		t.Errorf("cost_usd is missing instead of null: %v", back[1])
	}
	if back[0]["cost_usd"] != 0.42 || back[0]["tokens_out"] != 350.0 || back[0]["usage_source"] != "agent" {
		t.Errorf("row 1: %v", back[0])
	}
	var tab bytes.Buffer
	if err := WriteHistory(&tab, rows, false, time.UTC); err != nil {
		t.Fatal(err)
	}
	out := tab.String()
	for _, want := range []string{"TOKENS", "COST", "1200/350", "$0.42 (claimed)", "unknown", "$0.0031"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table has no %q:\n%s", want, out)
		}
	}
}

// TestClaudeMaxBudget: the claude preset is given what the budgets leave as its own
// --max-budget-usd; other agents, and a chamber without a budget, are run as they are.
func TestClaudeMaxBudget(t *testing.T) {
	r := testRunner(t, "agent = \"claude\"\nbudget_per_day = 1.00\nbudget_per_month = 10\n", t0)
	r.st.Guard = &GuardState{Spend: SpendState{Day: "2026-11-23", DayUSD: 0.4, Month: "2026-11", MonthUSD: 9.9}}
	claude, err := r.cfg.AgentLine("claude")
	if err != nil {
		t.Fatal(err)
	}
	got := r.budgetArgs(claude, []string{"claude", "-p"})
	if want := []string{"claude", "-p", "--max-budget-usd", "0.10"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("argv %q, want %q (the month leaves $0.10, less than the day's $0.60)", got, want)
	}
	codex, _ := r.cfg.AgentLine("codex")
	if got := r.budgetArgs(codex, []string{"codex"}); len(got) != 1 {
		t.Errorf("codex got %q", got)
	}
	r = testRunner(t, "agent = \"claude\"\n", t0)
	if got := r.budgetArgs(claude, []string{"claude"}); len(got) != 1 {
		t.Errorf("no budget, yet %q", got)
	}
}

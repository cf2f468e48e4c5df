package binary

// Issue 25, the guardrails on the agent's schedule, end to end: the built binary, a private
// systemd user manager (timer/systemdtest) whose timers are read back, and a webhook on
// 127.0.0.1 standing for the operator's alert target. The rules themselves (days and quiet
// hours in the chamber's zone across DST changes, with a fixed clock) are table-tested in
// chamber/guardrails_test.go; here the real timers fire, or are read back, at the instants
// those rules give for the real clock.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/chamber"
	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/message"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// greedyAgent asks for a wake one second on, every session: what a misbehaving (or injected)
// agent does. It keeps each prompt.
const greedyAgent = `#!/bin/sh
cp .cryo/prompt.md "prompt-$CRYO_SESSION.txt"
echo "ran $CRYO_SESSION" >> runs.txt
echo "[CRYO:EXIT 0] session $CRYO_SESSION"
echo "[CRYO:WAKE +1s]"
`

func (c *trial) history() []chamber.HistoryRow {
	c.t.Helper()
	out := c.stdout("history", "--dir", c.dir, "--json")
	var rows []chamber.HistoryRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		c.t.Fatalf("history --json: %v\n%s", err, out)
	}
	return rows
}

func (c *trial) guardStatus() chamber.StatusInfo {
	c.t.Helper()
	return statusJSON(c.t, c.env, c.dir)
}

// TestGuardMinInterval: an agent that answers WAKE +1s every session gets one session per
// min_interval, the operator one notice (not one per moved wake), the agent a line in its next
// prompt, history the key, validate the wake asked for and the one granted.
func TestGuardMinInterval(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	hook := startAlertHook(t, false)
	c := newTrial(t, m, "agent = \"./agent.sh\"\nwatch_inbox = false\nmin_interval = \"8s\"\n"+alertToml(hook, nil), greedyAgent, nil)
	c.start(0)
	fixture.WaitFor(t, 90*time.Second, "session 4 has finished", func() bool {
		s := c.status()
		return s.Session >= 4 && s.Phase == "armed"
	})
	rows := c.history()
	if len(rows) < 4 {
		t.Fatalf("history has %d rows, want 4", len(rows))
	}
	for i := 1; i < len(rows); i++ {
		if gap := rows[i].Started.Sub(rows[i-1].Ended); gap < 8*time.Second {
			t.Errorf("session %d started %s after session %d ended: sooner than min_interval (8s)", rows[i].Session, gap, rows[i-1].Session)
		}
	}
	for _, r := range rows[:3] {
		if r.Guardrail != "min_interval" {
			t.Errorf("history row of session %d: guardrail %q, want min_interval", r.Session, r.Guardrail)
		}
	}
	// The wake after the latest session: its end + 8 s, as the OS reads it back.
	s := c.status()
	last := rows[len(rows)-1]
	if want := last.Ended.Add(8 * time.Second); s.Session == last.Session && (s.NextWake == nil || !s.NextWake.Equal(want)) {
		t.Errorf("next wake %v, want %s (session %d's end + min_interval)", s.NextWake, want, last.Session)
	}
	if os, next := s.osTimer("wake"), s.NextWake; os == nil || next == nil || !os.Equal(*next) {
		t.Errorf("the OS wake timer is %v, the state's %v", os, next)
	}
	if got := hook.withReason("guardrail"); len(got) != 1 {
		t.Errorf("%d guardrail notices, want 1 for the whole episode:\n%s", len(got), hook)
	} else if msg := fmt.Sprint(got[0]["message"]); !strings.Contains(msg, "min_interval") || !strings.Contains(msg, "asked for") {
		t.Errorf("the notice does not name the guardrail and what it did: %s", msg)
	}
	if p := c.file("prompt-2.txt"); !strings.Contains(p, "Limits:") || !strings.Contains(p, "min_interval") {
		t.Errorf("the next prompt does not tell the agent:\n%s", p)
	}
	if p := c.file("prompt-1.txt"); strings.Contains(p, "Limits:") {
		t.Errorf("session 1's prompt speaks of limits nothing applied yet:\n%s", p)
	}
	st := c.guardStatus()
	if len(st.Guardrails) != 1 || !strings.HasPrefix(st.Guardrails[0], "min_interval: ") {
		t.Errorf("status guardrails %q, want one min_interval line", st.Guardrails)
	}
	if out := c.must(0, "status", "--dir", c.dir); !strings.Contains(out, "guardrail") {
		t.Errorf("status does not show the guardrail:\n%s", out)
	}
	if out := c.must(0, "validate", "--dir", c.dir); !strings.Contains(out, "granted") || !strings.Contains(out, "(min_interval)") {
		t.Errorf("validate's step 2 does not show the wake asked for and granted:\n%s", out)
	}
	c.must(0, "cancel", "--dir", c.dir)
}

// quietAround is a quiet_hours value that holds now in loc: from an hour ago to two hours on,
// and the instant it ends.
func quietAround(now time.Time, loc *time.Location) (string, time.Time) {
	from := now.In(loc).Add(-time.Hour)
	to := now.In(loc).Add(2 * time.Hour).Truncate(time.Minute)
	return fmt.Sprintf("%02d:%02d-%02d:%02d", from.Hour(), from.Minute(), to.Hour(), to.Minute()), to
}

// TestGuardQuietHours: a WAKE inside quiet hours is armed (and read back from the OS) at their
// end; a message that arrives inside them starts the wake through the inbox watcher, and the
// wake defers without running a session and without taking the message, still one notice.
func TestGuardQuietHours(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	hook := startAlertHook(t, false)
	loc, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skipf("no tzdata: %v", err)
	}
	quiet, end := quietAround(time.Now(), loc)
	toml := fmt.Sprintf("agent = \"./agent.sh\"\ntimezone = \"America/New_York\"\nquiet_hours = %q\nmin_interval = \"1s\"\n", quiet) + alertToml(hook, nil)
	agent := `#!/bin/sh
echo "ran $CRYO_SESSION" >> runs.txt
echo "[CRYO:EXIT 0] session $CRYO_SESSION"
echo "[CRYO:WAKE +1m]"
`
	c := newTrial(t, m, toml, agent, nil)
	c.start(0)
	s := c.status()
	if s.NextWake == nil || !s.NextWake.Equal(end) {
		t.Fatalf("next wake %v, want the end of quiet hours %s (%s)", s.NextWake, end.UTC(), quiet)
	}
	if os := s.osTimer("wake"); os == nil || !os.Equal(end) {
		t.Fatalf("the OS wake timer is %v, want %s", os, end.UTC())
	}
	if rows := c.history(); len(rows) != 1 || rows[0].Guardrail != "quiet_hours" {
		t.Errorf("history %+v, want session 1 with guardrail quiet_hours", rows)
	}

	c.must(0, "send", "--dir", c.dir, "are you awake?")
	fixture.WaitFor(t, 60*time.Second, "the wake the message started has deferred", func() bool {
		st, err := fixture.State(m, c.dir)
		if err != nil || st.Guard == nil {
			return false
		}
		for _, n := range st.Guard.Notes {
			if strings.Contains(n, "held a wake back") {
				return true
			}
		}
		return false
	})
	if st, _ := fixture.State(m, c.dir); st.Phase != chamber.PhaseArmed || st.Session != 1 {
		t.Fatalf("after the deferral: phase %s, session %d; want armed, still 1", st.Phase, st.Session)
	}
	if runs := c.file("runs.txt"); strings.Count(runs, "ran") != 1 {
		t.Errorf("a session ran inside quiet hours: %q", runs)
	}
	if n, _ := fixture.MailNames(c.dir, message.InboxDir); len(n) != 1 {
		t.Errorf("the inbox holds %d message(s), want the 1 that waits", len(n))
	}
	s = c.status()
	if os := s.osTimer("wake"); os == nil || !os.Equal(end) {
		t.Errorf("after the deferral the OS wake timer is %v, want %s", os, end.UTC())
	}
	if got := hook.withReason("guardrail"); len(got) != 1 {
		t.Errorf("%d guardrail notices, want 1:\n%s", len(got), hook)
	}
	c.must(0, "cancel", "--dir", c.dir)
}

// TestGuardDailyCap: once max_sessions_per_day sessions ran (start's included), the next wake
// moves to the start of the next day in the chamber's zone, read back from the OS.
func TestGuardDailyCap(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	hook := startAlertHook(t, false)
	loc, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skipf("no tzdata: %v", err)
	}
	if lt := time.Now().In(loc); lt.Hour() == 23 && lt.Minute() >= 58 {
		t.Skip("too close to midnight in New York: the two sessions could fall on two days")
	}
	toml := "agent = \"./agent.sh\"\ntimezone = \"America/New_York\"\nmax_sessions_per_day = 2\nmin_interval = \"1s\"\nwatch_inbox = false\n" + alertToml(hook, nil)
	c := newTrial(t, m, toml, greedyAgent, nil)
	c.start(0)
	fixture.WaitFor(t, 60*time.Second, "session 2 has finished", func() bool {
		s := c.status()
		return s.Session >= 2 && s.Phase == "armed"
	})
	lt := time.Now().In(loc)
	midnight := time.Date(lt.Year(), lt.Month(), lt.Day()+1, 0, 0, 0, 0, loc)
	s := c.status()
	if s.Session != 2 || s.NextWake == nil || !s.NextWake.Equal(midnight) {
		t.Fatalf("session %d, next wake %v; want 2 and the next midnight in New York %s", s.Session, s.NextWake, midnight.UTC())
	}
	if os := s.osTimer("wake"); os == nil || !os.Equal(midnight) {
		t.Errorf("the OS wake timer is %v, want %s", os, midnight.UTC())
	}
	rows := c.history()
	if len(rows) != 2 || rows[1].Guardrail != "max_sessions_per_day" {
		t.Errorf("history %+v, want session 2's row naming max_sessions_per_day", rows)
	}
	if got := hook.withReason("guardrail"); len(got) != 1 || !strings.Contains(fmt.Sprint(got[0]["message"]), "max_sessions_per_day") {
		t.Errorf("guardrail notices %v, want one naming max_sessions_per_day", got)
	}
	// A wake that fires over the cap (the operator's `wake --at` in a minute's time... here:
	// a planned wake moved back by hand) defers instead of running.
	c.must(0, "wake", "--dir", c.dir, "--at", "+6s")
	fixture.WaitFor(t, 60*time.Second, "the wake over the cap has deferred", func() bool {
		s := c.status()
		return s.NextWake != nil && s.NextWake.Equal(midnight)
	})
	if s := c.status(); s.Session != 2 {
		t.Errorf("a session ran over the daily cap: session %d", s.Session)
	}
	c.must(0, "cancel", "--dir", c.dir)
}

// TestGuardPlanEnds: stop_after and max_sessions end the plan with a notice and leave no
// timer.
func TestGuardPlanEnds(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	for _, tc := range []struct {
		name, toml, agent, key string
		sessions               int
	}{
		{"stop_after", fmt.Sprintf("stop_after = %q\n", time.Now().Add(30*time.Second).UTC().Format(time.RFC3339)), `#!/bin/sh
echo "[CRYO:EXIT 0] session $CRYO_SESSION"
echo "[CRYO:WAKE +1m]"
`, "stop_after", 1},
		{"max_sessions", "max_sessions = 2\n", greedyAgent, "max_sessions", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hook := startAlertHook(t, false)
			c := newTrial(t, m, "agent = \"./agent.sh\"\nwatch_inbox = false\nmin_interval = \"1s\"\n"+tc.toml+alertToml(hook, nil), tc.agent, nil)
			c.start(0)
			fixture.WaitFor(t, 60*time.Second, "the plan has ended", func() bool { return c.status().Phase == "complete" })
			s := c.status()
			if s.Session != tc.sessions {
				t.Errorf("%d sessions ran, want %d", s.Session, tc.sessions)
			}
			if timers := fixture.Timers(t, m, timer.ID(c.dir)+"-*", true); len(timers) != 0 {
				t.Errorf("timers left after the plan ended: %v", timers)
			}
			got := hook.withReason("guardrail")
			if len(got) != 1 || !strings.Contains(fmt.Sprint(got[0]["message"]), tc.key) {
				t.Errorf("guardrail notices %v, want one naming %s", got, tc.key)
			}
			rows := c.history()
			if len(rows) != tc.sessions || rows[len(rows)-1].Guardrail != tc.key {
				t.Errorf("history %+v, want the last row naming %s", rows, tc.key)
			}
		})
	}
}

// TestGuardBudget: once budget_per_day is spent, no further session runs that day: the next
// wake moves to the next day's start (read back from the OS), the operator is alerted once with
// the figures, and history and status carry the costs. A session whose cost cannot be read is
// shown as unknown (null), never as free, and the operator is told once.
func TestGuardBudget(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	if now := time.Now().UTC(); now.Hour() == 23 && now.Minute() >= 58 {
		t.Skip("too close to midnight UTC: the sessions could fall on two days")
	}
	t.Run("spent", func(t *testing.T) {
		hook := startAlertHook(t, false)
		agent := `#!/bin/sh
cp .cryo/prompt.md "prompt-$CRYO_SESSION.txt"
echo "[CRYO:EXIT 0] session $CRYO_SESSION"
echo "[CRYO:USAGE tokens_in=1000 tokens_out=200 cost_usd=0.40]"
echo "[CRYO:WAKE +1s]"
`
		c := newTrial(t, m, "agent = \"./agent.sh\"\ntimezone = \"UTC\"\nwatch_inbox = false\nmin_interval = \"1s\"\nbudget_per_day = 1.00\n"+alertToml(hook, nil), agent, nil)
		c.start(0)
		lt := time.Now().UTC()
		midnight := time.Date(lt.Year(), lt.Month(), lt.Day()+1, 0, 0, 0, 0, time.UTC)
		fixture.WaitFor(t, 90*time.Second, "the budget holds the wake to the next day", func() bool {
			s := c.status()
			return s.Phase == "armed" && s.NextWake != nil && s.NextWake.Equal(midnight)
		})
		s := c.status()
		if s.Session != 3 {
			t.Errorf("%d sessions ran, want 3 ($0.40 each against $1.00 a day)", s.Session)
		}
		if os := s.osTimer("wake"); os == nil || !os.Equal(midnight) {
			t.Errorf("the OS wake timer is %v, want %s", os, midnight)
		}
		got := hook.withReason("guardrail")
		if len(got) != 1 || !strings.Contains(fmt.Sprint(got[0]["message"]), "$1.20 spent today") || !strings.Contains(fmt.Sprint(got[0]["message"]), "budget_per_day $1.00") {
			t.Errorf("budget notices %v, want one with the figures", got)
		}
		rows := c.history()
		for _, r := range rows {
			if r.CostUSD == nil || *r.CostUSD != 0.40 || r.TokensIn == nil || *r.TokensIn != 1000 || r.UsageSource != "agent" {
				t.Errorf("history row %d: cost %v tokens %v source %q", r.Session, r.CostUSD, r.TokensIn, r.UsageSource)
			}
		}
		if last := rows[len(rows)-1]; last.Guardrail != "budget_per_day" {
			t.Errorf("the last row's guardrail is %q, want budget_per_day", last.Guardrail)
		}
		if st := c.guardStatus(); st.SpendToday != 1.2 || st.SpendMonth < 1.2 || st.SpendTodayUnknown != 0 {
			t.Errorf("status spend: today %v month %v unknown %d", st.SpendToday, st.SpendMonth, st.SpendTodayUnknown)
		}
		if out := c.must(0, "history", "--dir", c.dir); !strings.Contains(out, "$0.40 (claimed)") || !strings.Contains(out, "1000/200") {
			t.Errorf("history's table has no TOKENS and COST:\n%s", out)
		}
		st, _ := fixture.State(m, c.dir)
		if st.Guard == nil || len(st.Guard.Notes) == 0 || !strings.Contains(strings.Join(st.Guard.Notes, " "), "budget_per_day") {
			t.Errorf("the next prompt's notes do not say the budget is spent: %+v", st.Guard)
		}
		c.must(0, "cancel", "--dir", c.dir)
	})
	t.Run("unknown", func(t *testing.T) {
		hook := startAlertHook(t, false)
		agent := `#!/bin/sh
echo "[CRYO:EXIT 0] session $CRYO_SESSION"
echo "[CRYO:WAKE +1h]"
`
		c := newTrial(t, m, "agent = \"./agent.sh\"\nwatch_inbox = false\nbudget_per_day = 5\n"+alertToml(hook, nil), agent, nil)
		c.start(0)
		c.must(0, "wake", "--dir", c.dir, "--now")
		rows := c.history()
		if len(rows) != 2 || rows[0].CostUSD != nil || rows[1].CostUSD != nil {
			t.Fatalf("history %+v, want 2 rows of unknown cost", rows)
		}
		if out := c.stdout("history", "--dir", c.dir, "--json"); !strings.Contains(out, `"cost_usd": null`) {
			t.Errorf("history --json does not say null:\n%s", out)
		}
		if got := hook.withReason("usage-unknown"); len(got) != 1 || !strings.Contains(fmt.Sprint(got[0]["message"]), "unknown") {
			t.Errorf("usage-unknown notices %v, want 1", got)
		}
		if st := c.guardStatus(); st.SpendTodayUnknown != 2 || st.SpendToday != 0 {
			t.Errorf("status: today %v, unknown %d; want 0 known and 2 unknown", st.SpendToday, st.SpendTodayUnknown)
		}
		if out := c.must(0, "status", "--dir", c.dir); !strings.Contains(out, "2 session(s) whose cost is unknown") {
			t.Errorf("status does not show the unknown spend:\n%s", out)
		}
		c.must(0, "cancel", "--dir", c.dir)
	})
}

// TestGuardDSTReadBack: on the nights the clocks change in Berlin, quiet hours and the daily
// cap arm the real OS timer (read back from systemd) at the right instant. The `start` that
// chooses the wake runs with its clock set to that night (CRYOCHAMBER_NOW, a test hook); the
// instants are in 2027, so systemd arms them as any future wake.
func TestGuardDSTReadBack(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	if _, err := time.LoadLocation("Europe/Berlin"); err != nil {
		t.Skipf("no tzdata: %v", err)
	}
	agent := `#!/bin/sh
echo "[CRYO:EXIT 0] session $CRYO_SESSION"
echo "[CRYO:WAKE +1h]"
`
	for _, tc := range []struct {
		name, toml, now, want, key string
	}{
		// 21:30 CET; WAKE +1h = 22:30 CET, inside quiet hours that end at 07:00 CEST: 7h30 later
		// in real time, not 8h30.
		{"quiet hours on the spring-forward night", "quiet_hours = \"22:00-07:00\"\n", "2027-03-27T20:30:00Z", "2027-03-28T05:00:00Z", "quiet_hours"},
		// 23:30 CEST; WAKE +1h = 00:30 CEST, inside quiet hours that end at 07:00 CET.
		{"quiet hours on the fall-back night", "quiet_hours = \"22:00-07:00\"\n", "2027-10-30T21:30:00Z", "2027-10-31T06:00:00Z", "quiet_hours"},
		// The cap (1) is reached by start's session at 10:00 CET on the 25-hour day: the next
		// local midnight is 2027-11-01 00:00 CET.
		{"daily cap on the fall-back day", "max_sessions_per_day = 1\n", "2027-10-31T09:00:00Z", "2027-10-31T23:00:00Z", "max_sessions_per_day"},
		// The same on the 23-hour day: 2027-03-29 00:00 CEST.
		{"daily cap on the spring-forward day", "max_sessions_per_day = 1\n", "2027-03-28T09:00:00Z", "2027-03-28T22:00:00Z", "max_sessions_per_day"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTrial(t, m, "agent = \"./agent.sh\"\ntimezone = \"Europe/Berlin\"\nwatch_inbox = false\n"+tc.toml, agent, nil)
			c.env = append(c.env, "CRYOCHAMBER_NOW="+tc.now)
			c.start(0)
			want := mustParse(t, tc.want)
			s := c.status()
			if s.NextWake == nil || !s.NextWake.Equal(want) {
				t.Errorf("next wake %v, want %s", s.NextWake, want)
			}
			if os := s.osTimer("wake"); os == nil || !os.Equal(want) {
				t.Errorf("systemd reads the wake timer back as %v, want %s", os, want)
			}
			if rows := c.history(); len(rows) != 1 || rows[0].Guardrail != tc.key {
				t.Errorf("history %+v, want the row naming %s", rows, tc.key)
			}
			c.must(0, "cancel", "--dir", c.dir)
		})
	}
}

func mustParse(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

package chamber

import (
	"github.com/cryochamber/cryochamber/validate"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Skipf("no tzdata for %s: %v", name, err)
	}
	return loc
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func guardOf(t *testing.T, toml string) guardConfig {
	t.Helper()
	c, err := ParseConfig("cryo.toml", []byte(toml), time.UTC)
	if err != nil {
		t.Fatalf("%q: %v", toml, err)
	}
	return c.guard
}

// TestChooseWake: the guardrails at the choice of the next wake, with a fixed clock, quiet hours
// and day boundaries computed in the chamber's zone across both DST changes of Europe/Berlin
// (2026-03-29 02:00 → 03:00, 2026-10-25 03:00 → 02:00).
func TestChooseWake(t *testing.T) {
	mustLoc(t, "Europe/Berlin")
	berlin := "timezone = \"Europe/Berlin\"\n"
	for _, tc := range []struct {
		name           string
		toml           string
		now, asked     string // now is also the session's end
		planned, msg   bool
		today, total   int
		want           string // granted (RFC 3339), or "end"
		moved, endWith string
	}{
		{name: "WAKE +1s moved to min_interval", toml: "", now: "2026-06-01T10:00:00Z", asked: "2026-06-01T10:00:01Z", planned: true,
			want: "2026-06-01T10:01:00Z", moved: "min_interval"},
		{name: "min_interval in seconds", toml: "min_interval = \"15s\"\n", now: "2026-06-01T10:00:00Z", asked: "2026-06-01T10:00:01Z", planned: true,
			want: "2026-06-01T10:00:15Z", moved: "min_interval"},
		{name: "a wake far enough is granted as asked", toml: "", now: "2026-06-01T10:00:00Z", asked: "2026-06-01T12:00:00Z", planned: true,
			want: "2026-06-01T12:00:00Z"},
		{name: "a waiting message is not held by min_interval", toml: "", now: "2026-06-01T10:00:00Z", asked: "2026-06-01T10:00:06Z", msg: true,
			want: "2026-06-01T10:00:06Z"},
		{name: "quiet hours over the spring-forward night end at 07:00 CEST", toml: berlin + "quiet_hours = \"22:00-07:00\"\n",
			now: "2026-03-28T20:00:00Z", asked: "2026-03-28T22:30:00Z", planned: true, // 23:30 CET
			want: "2026-03-29T05:00:00Z", moved: "quiet_hours"}, // 07:00 CEST, 7h30 later, not 8h30
		{name: "quiet hours over the fall-back night end at 07:00 CET", toml: berlin + "quiet_hours = \"22:00-07:00\"\n",
			now: "2026-10-24T19:00:00Z", asked: "2026-10-24T21:00:00Z", planned: true, // 23:00 CEST
			want: "2026-10-25T06:00:00Z", moved: "quiet_hours"}, // 07:00 CET, 9 hours later
		{name: "a wake just after quiet hours is granted", toml: berlin + "quiet_hours = \"22:00-07:00\"\n",
			now: "2026-10-24T19:00:00Z", asked: "2026-10-25T06:00:00Z", planned: true, want: "2026-10-25T06:00:00Z"},
		{name: "a wake after midnight inside quiet hours", toml: berlin + "quiet_hours = \"22:00-07:00\"\n",
			now: "2026-06-01T20:00:00Z", asked: "2026-06-02T01:00:00Z", planned: true, // 03:00 CEST
			want: "2026-06-02T05:00:00Z", moved: "quiet_hours"},
		{name: "quiet hours within a day", toml: berlin + "quiet_hours = \"12:00-13:30\"\n",
			now: "2026-06-01T08:00:00Z", asked: "2026-06-01T10:15:00Z", planned: true,
			want: "2026-06-01T11:30:00Z", moved: "quiet_hours"},
		{name: "a message waits through quiet hours by default", toml: berlin + "quiet_hours = \"22:00-07:00\"\n",
			now: "2026-06-01T21:00:00Z", asked: "2026-06-01T21:00:06Z", msg: true,
			want: "2026-06-02T05:00:00Z", moved: "quiet_hours"},
		{name: "quiet_hours_messages = wake", toml: berlin + "quiet_hours = \"22:00-07:00\"\nquiet_hours_messages = \"wake\"\n",
			now: "2026-06-01T21:00:00Z", asked: "2026-06-01T21:00:06Z", msg: true, want: "2026-06-01T21:00:06Z"},
		{name: "daily cap on the spring-forward day: next local midnight (a 23-hour day)", toml: berlin + "max_sessions_per_day = 5\n",
			now: "2026-03-29T10:00:00Z", asked: "2026-03-29T12:00:00Z", planned: true, today: 5,
			want: "2026-03-29T22:00:00Z", moved: "max_sessions_per_day"},
		{name: "daily cap on the fall-back day: next local midnight (a 25-hour day)", toml: berlin + "max_sessions_per_day = 5\n",
			now: "2026-10-25T10:00:00Z", asked: "2026-10-25T12:00:00Z", planned: true, today: 5,
			want: "2026-10-25T23:00:00Z", moved: "max_sessions_per_day"},
		{name: "under the daily cap", toml: berlin + "max_sessions_per_day = 5\n",
			now: "2026-10-25T10:00:00Z", asked: "2026-10-25T12:00:00Z", planned: true, today: 4, want: "2026-10-25T12:00:00Z"},
		{name: "a wake tomorrow is not held by today's cap", toml: berlin + "max_sessions_per_day = 5\n",
			now: "2026-10-25T10:00:00Z", asked: "2026-10-26T08:00:00Z", planned: true, today: 9, want: "2026-10-26T08:00:00Z"},
		{name: "daily cap then quiet hours", toml: berlin + "max_sessions_per_day = 2\nquiet_hours = \"22:00-07:00\"\n",
			now: "2026-10-24T10:00:00Z", asked: "2026-10-24T10:02:00Z", planned: true, today: 2,
			want: "2026-10-25T06:00:00Z", moved: "max_sessions_per_day,quiet_hours"},
		{name: "stop_after (a date, its start in the zone) ends the plan", toml: berlin + "stop_after = \"2027-06-01\"\n",
			now: "2027-05-31T20:00:00Z", asked: "2027-05-31T22:00:00Z", planned: true, want: "end", endWith: "stop_after"},
		{name: "a wake before stop_after is granted", toml: berlin + "stop_after = \"2027-06-01\"\n",
			now: "2027-05-31T20:00:00Z", asked: "2027-05-31T21:59:59Z", planned: true, want: "2027-05-31T21:59:59Z"},
		{name: "stop_after as RFC 3339", toml: "stop_after = \"2027-06-01T09:00:00+02:00\"\n",
			now: "2027-06-01T06:00:00Z", asked: "2027-06-01T07:00:00Z", planned: true, want: "end", endWith: "stop_after"},
		{name: "quiet hours push a wake past stop_after", toml: berlin + "stop_after = \"2027-06-01T06:00:00+02:00\"\nquiet_hours = \"22:00-07:00\"\n",
			now: "2027-05-31T19:00:00Z", asked: "2027-05-31T21:00:00Z", planned: true, want: "end", endWith: "stop_after"},
		{name: "max_sessions reached", toml: "max_sessions = 3\n",
			now: "2026-06-01T10:00:00Z", asked: "2026-06-01T11:00:00Z", planned: true, total: 3, want: "end", endWith: "max_sessions"},
		{name: "max_sessions not yet", toml: "max_sessions = 3\n",
			now: "2026-06-01T10:00:00Z", asked: "2026-06-01T11:00:00Z", planned: true, total: 2, want: "2026-06-01T11:00:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := guardOf(t, tc.toml)
			now := mustTime(t, tc.now)
			c := chooseWake(g, now, now, mustTime(t, tc.asked), tc.planned, tc.msg, guardCounts{Today: tc.today, Sessions: tc.total}, nil)
			if tc.want == "end" {
				if c.End != tc.endWith {
					t.Fatalf("got %+v, want the plan ended by %s", c, tc.endWith)
				}
				if !strings.Contains(c.Why, tc.endWith) {
					t.Errorf("why %q does not name %s", c.Why, tc.endWith)
				}
				return
			}
			if c.End != "" {
				t.Fatalf("the plan ended (%s): %s", c.End, c.Why)
			}
			if want := mustTime(t, tc.want); !c.At.Equal(want) {
				t.Errorf("granted %s, want %s (%s)", c.At.UTC().Format(time.RFC3339), tc.want, c.Why)
			}
			if got := c.keys(); got != tc.moved {
				t.Errorf("moved by %q, want %q", got, tc.moved)
			}
			if tc.moved != "" && (!strings.Contains(c.Why, "asked for") || !strings.Contains(c.Why, "granted")) {
				t.Errorf("why %q does not say what was asked and granted", c.Why)
			}
		})
	}
}

// TestJitter: the spread is within [0, jitter), the same for the same seed, applied to the
// agent's WAKE only, and never pulls a wake below min_interval.
func TestJitter(t *testing.T) {
	g := guardOf(t, "jitter = \"10m\"\n")
	now := mustTime(t, "2026-06-01T10:00:00Z")
	asked := now.Add(time.Hour)
	seen := map[time.Time]bool{}
	for seed := uint64(1); seed <= 20; seed++ {
		a := chooseWake(g, now, now, asked, true, false, guardCounts{}, rand.New(rand.NewPCG(seed, 7)))
		b := chooseWake(g, now, now, asked, true, false, guardCounts{}, rand.New(rand.NewPCG(seed, 7)))
		if !a.At.Equal(b.At) {
			t.Fatalf("seed %d: %s then %s", seed, a.At, b.At)
		}
		if a.At.Before(asked) || !a.At.Before(asked.Add(10*time.Minute+time.Second)) {
			t.Fatalf("seed %d: %s is outside [%s, +10m]", seed, a.At, asked)
		}
		if len(a.Moved) != 0 {
			t.Fatalf("jitter counted as a guardrail move: %v", a.Moved)
		}
		seen[a.At] = true
	}
	if len(seen) < 5 {
		t.Errorf("20 seeds gave %d distinct wakes: no spread", len(seen))
	}
	if c := chooseWake(g, now, now, asked, false, false, guardCounts{}, rand.New(rand.NewPCG(1, 7))); !c.At.Equal(asked) {
		t.Errorf("jitter applied to a wake that is not the agent's WAKE: %s", c.At)
	}
}

// TestWakeGuard: the wake's own check, with a fixed clock in the zone.
func TestWakeGuard(t *testing.T) {
	mustLoc(t, "Europe/Berlin")
	base := "timezone = \"Europe/Berlin\"\nquiet_hours = \"22:00-07:00\"\nmax_sessions_per_day = 3\nstop_after = \"2027-06-01\"\nmax_sessions = 100\n"
	for _, tc := range []struct {
		name    string
		toml    string
		now     string
		why     Why
		today   int
		total   int
		until   string
		key     string
		end     bool
		noGuard bool
	}{
		{name: "a planned wake outside the limits runs", now: "2026-06-01T10:00:00Z", why: WhyPlan, noGuard: true},
		{name: "a retry inside quiet hours (fall-back night) defers to 07:00 CET", now: "2026-10-25T00:30:00Z", why: WhyRetry,
			until: "2026-10-25T06:00:00Z", key: "quiet_hours"},
		{name: "a message inside quiet hours waits", now: "2026-06-01T21:30:00Z", why: WhyInbox, until: "2026-06-02T05:00:00Z", key: "quiet_hours"},
		{name: "quiet_hours_messages = wake lets it in", toml: "quiet_hours_messages = \"wake\"\n", now: "2026-06-01T21:30:00Z", why: WhyInbox, noGuard: true},
		{name: "over the daily cap: the next local day, after quiet hours", now: "2026-03-29T12:00:00Z", why: WhyInbox, today: 3,
			until: "2026-03-30T05:00:00Z", key: "max_sessions_per_day"},
		{name: "past stop_after: the plan ends", now: "2027-05-31T22:00:00Z", why: WhyPlan, key: "stop_after", end: true},
		{name: "max_sessions reached: the plan ends", now: "2026-06-01T10:00:00Z", why: WhyTodo, total: 100, key: "max_sessions", end: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := guardOf(t, base+tc.toml)
			until, key, end := wakeGuard(g, mustTime(t, tc.now), tc.why, guardCounts{Today: tc.today, Sessions: tc.total})
			if tc.noGuard {
				if key != "" {
					t.Fatalf("held by %s until %s", key, until)
				}
				return
			}
			if key != tc.key || end != tc.end {
				t.Fatalf("key %q end %v, want %q %v", key, end, tc.key, tc.end)
			}
			if !tc.end && !until.Equal(mustTime(t, tc.until)) {
				t.Errorf("until %s, want %s", until.UTC().Format(time.RFC3339), tc.until)
			}
		})
	}
}

// TestGuardrailConfig: the keys' defaults and every bad value's message, with its line.
func TestGuardrailConfig(t *testing.T) {
	g := guardOf(t, "")
	if g.minInterval != time.Minute || g.perDay != 96 || g.quiet != nil || g.stopAfter != nil || g.maxSessions != 0 || g.jitter != 0 || g.quietWake {
		t.Fatalf("defaults: %+v", g)
	}
	for _, tc := range []struct{ toml, want string }{
		{"agent = \"x\"\nmin_interval = \"soon\"\n", `cryo.toml:2: min_interval: "soon" is not a duration`},
		{"min_interval = 30\n", "has no unit"},
		{"max_sessions_per_day = 0\n", "cryo.toml:1: max_sessions_per_day: must be at least 1, not 0"},
		{"\nquiet_hours = \"22-07\"\n", `cryo.toml:2: quiet_hours: "22-07" is not a range of hours`},
		{"quiet_hours = \"25:00-07:00\"\n", "is not a range of hours"},
		{"quiet_hours = \"07:00-07:00\"\n", "starts and ends at the same time"},
		{"quiet_hours_messages = \"ring\"\n", `quiet_hours_messages: unknown value "ring"`},
		{"stop_after = \"next June\"\n", `cryo.toml:1: stop_after: "next June" is not a date or an instant`},
		{"max_sessions = -1\n", "max_sessions: must be at least 1"},
		{"jitter = \"-5m\"\n", "must be positive"},
	} {
		_, err := ParseConfig("cryo.toml", []byte(tc.toml), time.UTC)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.toml, err, tc.want)
		}
	}
}

// TestJudgeShowsGuardrail: validation's step 2 shows the wake asked for and the wake granted,
// naming the key, and the plan ends (never silently armed) when max_sessions is reached.
func TestJudgeShowsGuardrail(t *testing.T) {
	r := testRunner(t, "agent = \"/bin/true\"\n", t0)
	rep := validate.New(nil)
	v := r.judge(rep, parse("[CRYO:EXIT 0] ok", "[CRYO:WAKE +1s]"), t0, WhyPlan)
	if want := t0.Add(time.Minute); v.next == nil || !v.next.Equal(want) {
		t.Fatalf("next %v, want %s", v.next, want)
	}
	if rep.Wake == nil || *rep.Wake != v.next.UTC().Format(time.RFC3339) {
		t.Errorf("the report's wake is %v, want the granted %s", rep.Wake, v.next)
	}
	found := false
	for _, c := range rep.Checks {
		if c.Step == validate.StepWake && strings.Contains(c.Detail, "asked for 2026-11-23T10:00:01Z, granted 2026-11-23T10:01:00Z (min_interval)") {
			found = true
		}
	}
	if !found {
		t.Errorf("step 2 does not show asked and granted: %+v", rep.Checks)
	}
	if v.guard.keys() != "min_interval" {
		t.Errorf("guard keys %q", v.guard.keys())
	}

	r = testRunner(t, "agent = \"/bin/true\"\nmax_sessions = 2\n", t0)
	r.st.Guard = &GuardState{Sessions: 2}
	rep = validate.New(nil)
	v = r.judge(rep, parse("[CRYO:EXIT 0] ok", "[CRYO:WAKE +1h]"), t0, WhyPlan)
	rep.Finish()
	if v.next != nil || !rep.PlanComplete || v.guard == nil || v.guard.End != "max_sessions" {
		t.Fatalf("max_sessions reached: next %v, complete %v, guard %+v", v.next, rep.PlanComplete, v.guard)
	}
}

// TestGuardMovesPlanWakeWithTodo: a TODO moved past the plan's WAKE takes the plan's wake with
// it, so that the plan's wake is never left behind in the past.
func TestGuardMovesPlanWakeWithTodo(t *testing.T) {
	r := testRunner(t, "agent = \"/bin/true\"\nmin_interval = \"10m\"\n", t0)
	rep := validate.New(nil)
	v := r.judge(rep, parse("[CRYO:EXIT 0] ok", "[CRYO:TODO +1m \"x\"]", "[CRYO:WAKE +5m]"), t0, WhyPlan)
	want := t0.Add(10 * time.Minute)
	if v.next == nil || !v.next.Equal(want) || v.planWake == nil || !v.planWake.Equal(want) || v.nextReason != WhyPlan {
		t.Fatalf("next %v (%s), plan wake %v; want both %s, for the plan", v.next, v.nextReason, v.planWake, want)
	}
}

package chamber

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/agent"
	"github.com/cryochamber/cryochamber/internal/confined"
	"github.com/cryochamber/cryochamber/marker"
	"github.com/cryochamber/cryochamber/message"
	"github.com/cryochamber/cryochamber/validate"
)

// The lifecycle's rules, table-tested in the package with a fixed clock and temporary
// directories: no root, no user manager. (The end-to-end tests prove the same rules against
// the real thing; these let a contributor without root exercise them, and pin each case.)

var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

// testRunner is a runner on a fresh chamber and private state directory, at a fixed now.
func testRunner(t *testing.T, toml string, now time.Time) *runner {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, "chamber")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	env := &Env{Now: func() time.Time { return now }, Local: time.UTC, StateDir: filepath.Join(base, "state"),
		Environ: []string{"PATH=/usr/bin:/bin"}, Stdout: io.Discard, Stderr: io.Discard}
	cfg, err := ParseConfig("cryo.toml", []byte(toml), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := confined.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	s, err := storeFor(env, chamberID(dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ensure(); err != nil {
		t.Fatal(err)
	}
	return &runner{env: env, dir: dir, id: chamberID(dir), store: s, fs: fs, cfg: cfg,
		st: &State{Phase: PhaseRunning, Session: 3}, out: io.Discard}
}

func parse(lines ...string) *marker.Result {
	p := marker.NewParser(time.UTC)
	for i, l := range lines {
		p.Line(i+2, l)
	}
	return p.Result()
}

func ptr(t time.Time) *time.Time { return &t }

func TestJudge(t *testing.T) {
	end := t0                       // the session ended now
	asap := t0.Add(6 * time.Second) // armLead ahead, rounded to the next second
	// min_interval at its smallest: these cases are about the arming lead and late_grace
	// (the guardrails have their own, guardrails_test.go).
	const toml = "agent = \"/bin/true\"\nmin_interval = \"1s\"\n"
	cases := []struct {
		name     string
		markers  []string
		why      Why
		planWake *time.Time
		now      time.Time
		// want
		next     *time.Time
		reason   Why
		complete bool
		failed   []validate.Step // steps that fail
		detail   string          // in some check's detail
	}{
		{name: "wake relative", markers: []string{"[CRYO:EXIT 0] ok", "[CRYO:WAKE +1h]"}, why: WhyPlan,
			next: ptr(t0.Add(time.Hour)), reason: WhyPlan},
		{name: "wake absolute with offset", markers: []string{"[CRYO:EXIT 0] ok", "[CRYO:WAKE 2026-11-24T09:00+01:00]"}, why: WhyPlan,
			next: ptr(time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)), reason: WhyPlan},
		{name: "wake past within late_grace means now", markers: []string{"[CRYO:EXIT 0] ok", "[CRYO:WAKE 2026-11-23T09:55Z]"}, why: WhyPlan,
			next: &asap, reason: WhyPlan, detail: "waking as soon as possible"},
		{name: "wake past beyond late_grace refuses", markers: []string{"[CRYO:EXIT 0] ok", "[CRYO:WAKE 2026-11-23T09:00Z]"}, why: WhyPlan,
			failed: []validate.Step{validate.StepWake}, detail: "more than late_grace"},
		{name: "wake inside the arming lead", markers: []string{"[CRYO:EXIT 0] ok", "[CRYO:WAKE 2026-11-23T10:00:02Z]"}, why: WhyPlan,
			next: &asap, reason: WhyPlan, detail: "arming lead"},
		{name: "no EXIT is never plan complete", markers: []string{"[CRYO:WAKE +1h]"}, why: WhyPlan,
			failed: []validate.Step{validate.StepMarkers}, detail: "no EXIT marker"},
		{name: "an unparseable WAKE is never plan complete", markers: []string{"[CRYO:EXIT 0] ok", "[CRYO:WAKE banana]"}, why: WhyPlan,
			failed: []validate.Step{validate.StepMarkers}},
		{name: "no WAKE ends the plan", markers: []string{"[CRYO:EXIT 0] done"}, why: WhyPlan, complete: true},
		{name: "no WAKE in an early session keeps the plan's wake", markers: []string{"[CRYO:EXIT 0] answered"}, why: WhyInbox,
			planWake: ptr(t0.Add(48 * time.Hour)), next: ptr(t0.Add(48 * time.Hour)), reason: WhyPlan, detail: "woken early (inbox)"},
		{name: "the same for a TODO session", markers: []string{"[CRYO:EXIT 0] did the TODO"}, why: WhyTodo,
			planWake: ptr(t0.Add(5 * time.Hour)), next: ptr(t0.Add(5 * time.Hour)), reason: WhyPlan},
		{name: "an early session whose plan wake has passed completes", markers: []string{"[CRYO:EXIT 0] ok"}, why: WhyRequested,
			planWake: ptr(t0.Add(-time.Hour)), complete: true},
		{name: "a TODO before the WAKE comes first", markers: []string{"[CRYO:EXIT 0] ok", "[CRYO:TODO +10m \"x\"]", "[CRYO:WAKE +1d]"}, why: WhyPlan,
			next: ptr(t0.Add(10 * time.Minute)), reason: WhyTodo},
		{name: "a TODO after the WAKE waits", markers: []string{"[CRYO:EXIT 0] ok", "[CRYO:TODO +2d \"x\"]", "[CRYO:WAKE +1d]"}, why: WhyPlan,
			next: ptr(t0.Add(24 * time.Hour)), reason: WhyPlan},
		{name: "a TODO alone keeps the chamber going", markers: []string{"[CRYO:EXIT 0] ok", "[CRYO:TODO +3h \"x\"]"}, why: WhyPlan,
			next: ptr(t0.Add(3 * time.Hour)), reason: WhyTodo},
		{name: "a TODO long past refuses", markers: []string{"[CRYO:EXIT 0] ok", "[CRYO:TODO 2026-11-22T10:00Z \"x\"]", "[CRYO:WAKE +1h]"}, why: WhyPlan,
			failed: []validate.Step{validate.StepWake}, detail: "TODO time"},
		{name: "a CMD naming another program refuses", markers: []string{"[CRYO:EXIT 0] ok", "[CRYO:WAKE +1h]", "[CRYO:CMD opencode next]"}, why: WhyPlan,
			next: ptr(t0.Add(time.Hour)), reason: WhyPlan, failed: []validate.Step{validate.StepCommand}, detail: `CMD program "opencode" is not allowed (allowed: /bin/true)`},
		{name: "relative times count from the end of the session, late_grace from it too", markers: []string{"[CRYO:EXIT 0] ok", "[CRYO:WAKE +1h]"}, why: WhyPlan,
			now: t0.Add(20 * time.Minute), next: ptr(t0.Add(time.Hour)), reason: WhyPlan},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := tc.now
			if now.IsZero() {
				now = t0
			}
			r := testRunner(t, toml, now)
			r.st.PlanWake = tc.planWake
			rep := validate.New(nil)
			v := r.judge(rep, parse(tc.markers...), end, tc.why)
			var failed []validate.Step
			var details []string
			for _, c := range rep.Checks {
				if c.Status == validate.Fail {
					failed = append(failed, c.Step)
				}
				details = append(details, c.Detail)
			}
			if !equalSteps(failed, tc.failed) {
				t.Errorf("failed steps %v, want %v; checks %+v", failed, tc.failed, rep.Checks)
			}
			rep.Finish()
			if rep.PlanComplete != tc.complete {
				t.Errorf("plan complete %v, want %v", rep.PlanComplete, tc.complete)
			}
			if len(tc.failed) > 0 && rep.PlanComplete {
				t.Error("a refusal reads as plan complete")
			}
			if len(tc.failed) == 0 || tc.next != nil {
				switch {
				case tc.next == nil && v.next != nil:
					t.Errorf("next %v, want none", v.next)
				case tc.next != nil && (v.next == nil || !v.next.Equal(*tc.next)):
					t.Errorf("next %v, want %v", v.next, tc.next)
				case tc.next != nil && v.nextReason != tc.reason:
					t.Errorf("reason %s, want %s", v.nextReason, tc.reason)
				}
			}
			if tc.detail != "" && !strings.Contains(strings.Join(details, "\n"), tc.detail) {
				t.Errorf("no check says %q: %q", tc.detail, details)
			}
		})
	}
}

func equalSteps(a, b []validate.Step) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestJudgeWaitingMessageComesFirst(t *testing.T) {
	r := testRunner(t, "agent = \"/bin/true\"\n", t0)
	if _, err := message.Write(r.fs, inboxDir, &message.Message{From: "ada", Time: t0, Body: "hi"}); err != nil {
		t.Fatal(err)
	}
	v := r.judge(validate.New(nil), parse("[CRYO:EXIT 0] ok", "[CRYO:WAKE +1d]"), t0, WhyPlan)
	if v.next == nil || v.nextReason != WhyInbox || !v.next.Equal(t0.Add(6*time.Second)) {
		t.Errorf("next %v (%s), want the waiting message at once", v.next, v.nextReason)
	}
	if v.planWake == nil || !v.planWake.Equal(t0.Add(24*time.Hour)) {
		t.Errorf("the plan's wake %v, want the WAKE kept", v.planWake)
	}
}

func TestClassify(t *testing.T) {
	ok := parse("[CRYO:EXIT 1] half")
	for _, tc := range []struct {
		name   string
		res    agent.Result
		m      *marker.Result
		exit   int
		reason Ending
		failed bool
		detail string
	}{
		{"answered", agent.Result{ExitCode: 0, Started: true}, ok, 1, "", false, "agent exited with status 0"},
		{"answered despite a non-zero status", agent.Result{ExitCode: 3, Started: true}, ok, 1, "", false, "status 3"},
		{"no EXIT, status 0", agent.Result{ExitCode: 0, Started: true}, parse("hello"), 2, "no-exit", true, "without an EXIT marker"},
		{"no EXIT, crashed", agent.Result{ExitCode: 3, Started: true}, parse("hello"), 2, "crashed", true, "status 3"},
		{"killed by a signal", agent.Result{ExitCode: -1, Signal: "killed", Started: true}, parse(), 2, "crashed", true, "signal killed"},
		{"timeout", agent.Result{TimedOut: true}, ok, 2, "timeout", true, "session_timeout (2h0m0s)"},
		{"interrupted", agent.Result{Canceled: true}, ok, 2, "interrupted", true, "interrupted"},
		{"not started", agent.Result{ExitCode: -1, Err: errors.New("not found")}, parse(), 2, "agent-failed", true, "agent did not run: not found"},
		{"invalid markers with EXIT 0 count as exit 2", agent.Result{ExitCode: 0, Started: true}, parse("[CRYO:EXIT 0] ok", "[CRYO:WAKE banana]"), 2, "invalid", false, "1 invalid marker"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := classify(tc.res, tc.m, 2*time.Hour)
			if o.exit != tc.exit || o.reason != tc.reason || o.failed() != tc.failed || !strings.Contains(o.detail, tc.detail) {
				t.Errorf("classify = %+v (failed %v), want exit %d reason %q failed %v detail ~%q", o, o.failed(), tc.exit, tc.reason, tc.failed, tc.detail)
			}
		})
	}
}

func TestDue(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(r *runner)
		force   bool
		due     bool
		why     Why
		message string
	}{
		{"armed, not yet", func(r *runner) { r.st.Phase, r.st.Wake = PhaseArmed, ptr(t0.Add(time.Hour)) }, false, false, "", "not due: next wake at 2026-11-23T11:00:00Z (in 1h00m)"},
		{"armed, due", func(r *runner) { r.st.Phase, r.st.Wake, r.st.Reason = PhaseArmed, ptr(t0), WhyTodo }, false, true, WhyTodo, ""},
		{"armed, a second early (timer granularity)", func(r *runner) { r.st.Phase, r.st.Wake = PhaseArmed, ptr(t0.Add(time.Second)) }, false, true, WhyPlan, ""},
		{"armed, forced", func(r *runner) { r.st.Phase, r.st.Wake = PhaseArmed, ptr(t0.Add(time.Hour)) }, true, true, WhyRequested, ""},
		{"armed, a wake request", func(r *runner) {
			r.st.Phase, r.st.Wake = PhaseArmed, ptr(t0.Add(time.Hour))
			_ = r.store.setFlag(requestName, t0)
		}, false, true, WhyRequested, ""},
		{"armed, a waiting message", func(r *runner) {
			r.st.Phase, r.st.Wake = PhaseArmed, ptr(t0.Add(time.Hour))
			_, _ = message.Write(r.fs, inboxDir, &message.Message{From: "x", Time: t0, Body: "b"})
		}, false, true, WhyInbox, ""},
		{"cancelled while armed", func(r *runner) {
			r.st.Phase, r.st.Wake = PhaseArmed, ptr(t0)
			_ = r.store.setFlag(cancelledName, t0)
		}, true, false, "", "chamber is cancelled"},
		{"paused", func(r *runner) { r.st.Phase, r.st.Wake = PhasePaused, ptr(t0) }, true, false, "", "paused"},
		{"complete", func(r *runner) { r.st.Phase = PhaseComplete }, true, false, "", "plan is complete"},
		{"failed", func(r *runner) { r.st.Phase = PhaseFailed }, true, false, "", "failed and is stopped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := testRunner(t, "agent = \"/bin/true\"\n", t0)
			tc.setup(r)
			due, why, msg := r.due(tc.force)
			if due != tc.due || why != tc.why || !strings.Contains(msg, tc.message) {
				t.Errorf("due = %v %q %q, want %v %q %q", due, why, msg, tc.due, tc.why, tc.message)
			}
		})
	}
}

func TestRetryAt(t *testing.T) {
	end := t0
	for _, tc := range []struct {
		k, max int
		now    time.Time
		want   time.Time
		slow   bool
	}{
		{1, 3, t0, t0.Add(5 * time.Minute), false},
		{2, 3, t0, t0.Add(15 * time.Minute), false},
		{3, 3, t0, t0.Add(time.Hour), false},
		{4, 3, t0, t0.Add(6 * time.Hour), true},
		{40, 3, t0, t0.Add(6 * time.Hour), true},
		{1, 0, t0, t0.Add(6 * time.Hour), true},
		{5, 10, t0, t0.Add(time.Hour), false}, // beyond the three delays: the last one
		// A recovery long after the session ended: never in the past.
		{1, 3, t0.Add(time.Hour), t0.Add(time.Hour + 6*time.Second), false},
	} {
		got, slow := retryAt(tc.k, tc.max, 6*time.Hour, end, tc.now)
		if !got.Equal(tc.want) || slow != tc.slow {
			t.Errorf("retryAt(%d, max %d) = %v %v, want %v %v", tc.k, tc.max, got, slow, tc.want, tc.slow)
		}
	}
}

// TestStateBound: a state full of markers (a hundred PLAN notes within the marker limits) is
// written within what its reader accepts, and reads back.
func TestStateBound(t *testing.T) {
	st := &State{Phase: PhaseComplete, Session: 7}
	for i := 0; i < 100; i++ {
		st.Plans = append(st.Plans, strings.Repeat("p", 60<<10))
		st.Warnings = append(st.Warnings, strings.Repeat("w", 60<<10))
		st.Fallbacks = append(st.Fallbacks, FallbackEntry{Action: "email", Target: "a@b.c", Message: strings.Repeat("m", 60<<10)})
	}
	data, err := st.marshal(t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) >= maxStateSize {
		t.Fatalf("state is %d bytes, more than its reader accepts", len(data))
	}
	if _, err := parseState("state.json", data); err != nil {
		t.Fatalf("the reader refuses what the writer wrote: %v", err)
	}
	if n := len(st.Plans); n > maxListItems || !strings.HasPrefix(st.Plans[n-1], "(") {
		t.Errorf("plans not bounded with a note: %d, last %.40q", n, st.Plans[n-1])
	}
}

// TestClaimNamesAreCheckedAsNames: a state naming a claim that is a path is refused when it is
// loaded, so no claim can move a file from outside the chamber.
func TestClaimNamesAreCheckedAsNames(t *testing.T) {
	for _, name := range []string{"../../outside/secret.txt", "a/b.md", ".hidden.md", "x"} {
		st := &State{Version: stateVersion, Phase: PhaseRunning, Claimed: []string{name}}
		data, _ := st.marshal(t0)
		if _, err := parseState("state.json", data); err == nil || !strings.Contains(err.Error(), "is not a message name") {
			t.Errorf("claim %q: %v, want refused", name, err)
		}
	}
}

func TestChunkReplyIDs(t *testing.T) {
	ids := make([]string, 95)
	got := chunk(ids, maxReplyIDs)
	if len(got) != 3 || len(got[0]) != 40 || len(got[2]) != 15 {
		t.Errorf("chunk(95) = %d pieces", len(got))
	}
	if got := chunk(nil, maxReplyIDs); len(got) != 1 || len(got[0]) != 0 {
		t.Errorf("chunk(nil) = %v", got)
	}
}

package binary

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/chamber"
	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// The operator's controls (issue 14), end to end against a real user manager: pause across a
// due wake and a TODO, resume, pause --until, wake --at, the list of upcoming wakes, validate
// agreeing with the next wake, history, and the command line's conventions.

// controlsAgent records each prompt and answers from a script of markers per session
// (markers-<n>.txt), else a plain hour.
const controlsAgent = `#!/bin/sh
cp .cryo/prompt.md "prompt-$CRYO_SESSION.txt"
echo "ran $CRYO_SESSION" >> runs.txt
if [ -f "markers-$CRYO_SESSION.txt" ]; then cat "markers-$CRYO_SESSION.txt"; exit 0; fi
echo "[CRYO:EXIT 0] session $CRYO_SESSION"
echo "[CRYO:WAKE +1h]"
`

func statusJSON(t *testing.T, env []string, dir string) chamber.StatusInfo {
	t.Helper()
	code, out := bin(t, env, dir, "status", "--dir", dir, "--json")
	if code != 0 {
		t.Fatalf("status: %d\n%s", code, out)
	}
	var s chamber.StatusInfo
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &s); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	return s
}

// TestPauseKeepsTheSchedule: pause removes every timer but keeps the plan's wake and a TODO;
// both fall due during the pause and nothing runs; resume runs what was missed once, with a
// prompt that says what was missed, and the schedule goes on. start on a paused chamber says
// to resume. cancel then start never duplicates a pending TODO.
func TestPauseKeepsTheSchedule(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	dir := filepath.Join(t.TempDir(), "garden")
	fixture.WriteFiles(t, dir, map[string]string{
		"plan.md":   "water the garden\n",
		"cryo.toml": "agent = \"./agent.sh\"\nwatch_inbox = false\nmin_interval = \"1s\"\n",
		"agent.sh":  controlsAgent,
		// Session 1: the plan's wake in 12 s and a TODO in 8 s.
		"markers-1.txt": "[CRYO:EXIT 0] scheduled\n[CRYO:TODO +8s \"water the ferns\"]\n[CRYO:WAKE +12s]\n",
	})
	env := fixture.Env(m)
	id := timer.ID(dir)
	fixture.Must(t, 0, env, dir, "start", filepath.Join(dir, "plan.md"))
	if n := len(fixture.Timers(t, m, id+"-*", true)); n != 2 {
		t.Fatalf("after start: %d timers, want 2 (wake, dead-man)", n)
	}

	out := fixture.Must(t, 0, env, dir, "pause", "--dir", dir)
	if !strings.Contains(out, "paused "+dir+" until `cryochamber resume`; the schedule is kept") {
		t.Errorf("pause said:\n%s", out)
	}
	if got := fixture.Timers(t, m, id+"-*", true); len(got) != 0 {
		t.Fatalf("timers after pause: %v", got)
	}
	s := statusJSON(t, env, dir)
	if s.State != "paused" || s.Paused == nil || s.PausedUntil != nil || len(s.Upcoming) < 2 {
		t.Fatalf("status while paused: state %q paused %v until %v upcoming %+v", s.State, s.Paused, s.PausedUntil, s.Upcoming)
	}
	code, out := bin(t, env, dir, "status", "--dir", dir)
	if code != 0 || !regexp.MustCompile(`(?m)^paused: +since .*, until .cryochamber resume.$`).MatchString(out) {
		t.Errorf("status text while paused:\n%s", out)
	}
	code, out = bin(t, env, dir, "ps")
	if code != 0 || !regexp.MustCompile(`(?m)^paused +1 `).MatchString(out) {
		t.Errorf("ps while paused:\n%s", out)
	}
	code, out = bin(t, env, dir, "start", filepath.Join(dir, "plan.md"))
	if code != 1 || !strings.Contains(out, "is paused with its schedule kept") || !strings.Contains(out, "hint: cryochamber resume --dir "+dir) {
		t.Errorf("start on a paused chamber: exit %d\n%s", code, out)
	}

	// Both the TODO (8 s) and the plan's wake (12 s) fall due while paused. The timers are
	// gone (checked above), so nothing can run: wait until both times have passed.
	time.Sleep(time.Until(s.Upcoming[len(s.Upcoming)-1].At.Add(time.Second)))
	if got := countLines(t, filepath.Join(dir, "runs.txt"), "ran"); got != 1 {
		t.Fatalf("%d sessions ran during the pause, want 1 (session 1 before it)", got)
	}

	out = fixture.Must(t, 0, env, dir, "resume", "--dir", dir)
	if !strings.Contains(out, "missed during the pause, and run now: the plan's wake due") || !strings.Contains(out, `the TODO "water the ferns" due`) {
		t.Errorf("resume said:\n%s", out)
	}
	waitPhase(t, m, dir, chamber.PhaseArmed, 2, 30*time.Second)
	prompt, _ := os.ReadFile(filepath.Join(dir, "prompt-2.txt"))
	for _, want := range []string{"The chamber was paused from", "Missed meanwhile, and run now, once:", "water the ferns"} {
		if !strings.Contains(string(prompt), want) {
			t.Errorf("session 2's prompt lacks %q", want)
		}
	}
	if got := countLines(t, filepath.Join(dir, "runs.txt"), "ran"); got != 2 {
		t.Errorf("%d sessions after the resume, want 2: what was missed runs once", got)
	}
	if n := len(fixture.Timers(t, m, id+"-*", true)); n != 2 {
		t.Errorf("after the resume: %d timers, want 2", n)
	}

	// cancel, then start: session 3 schedules the same TODO session 1 had (a plan that
	// restarts repeats itself); it is not added twice.
	fixture.WriteFiles(t, dir, map[string]string{
		"markers-3.txt": "[CRYO:EXIT 0] again\n[CRYO:TODO 2099-01-01T09:00Z \"renew the domain\"]\n[CRYO:WAKE +1h]\n",
		"markers-4.txt": "[CRYO:EXIT 0] again\n[CRYO:TODO 2099-01-01T09:00Z \"renew the domain\"]\n[CRYO:WAKE +1h]\n",
	})
	fixture.Must(t, 0, env, dir, "wake", "--dir", dir, "--now")
	fixture.Must(t, 0, env, dir, "cancel", "--dir", dir)
	fixture.Must(t, 0, env, dir, "start", filepath.Join(dir, "plan.md"))
	n := 0
	for _, u := range statusJSON(t, env, dir).Upcoming {
		if u.Kind == "todo" && u.What == "renew the domain" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the TODO is pending %d times after cancel and start, want once", n)
	}
	fixture.Must(t, 0, env, dir, "cancel", "--dir", dir)
}

// waitPhase polls the state until phase at session n or later.
func waitPhase(t *testing.T, m *systemdtest.Manager, dir string, phase chamber.Phase, n int, timeout time.Duration) {
	t.Helper()
	m.WaitFor(t, timeout, fmt.Sprintf("phase %s at session %d", phase, n), func() bool {
		st, err := fixture.State(m, dir)
		return err == nil && st.Phase == phase && st.Session >= n
	})
}

// TestPauseUntilResumesByItself: pause --until arms one timer; when it fires, the chamber
// resumes by itself and runs what fell due meanwhile.
func TestPauseUntilResumesByItself(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	dir := filepath.Join(t.TempDir(), "trip")
	fixture.WriteFiles(t, dir, map[string]string{
		"plan.md":       "x\n",
		"cryo.toml":     "agent = \"./agent.sh\"\nwatch_inbox = false\nmin_interval = \"1s\"\n",
		"agent.sh":      controlsAgent,
		"markers-1.txt": "[CRYO:EXIT 0] soon\n[CRYO:WAKE +3s]\n",
	})
	env := fixture.Env(m)
	id := timer.ID(dir)
	fixture.Must(t, 0, env, dir, "start", filepath.Join(dir, "plan.md"))
	out := fixture.Must(t, 0, env, dir, "pause", "--dir", dir, "--until", "+8s")
	if !strings.Contains(out, "paused "+dir+" until ") {
		t.Errorf("pause --until said:\n%s", out)
	}
	if got := fixture.Timers(t, m, id+"-*", true); len(got) != 1 || !strings.HasSuffix(got[0], "-wake.timer") {
		t.Fatalf("timers while paused until: %v, want the one wake timer that ends the pause", got)
	}
	s := statusJSON(t, env, dir)
	if s.PausedUntil == nil {
		t.Fatalf("status does not show the end of the pause: %+v", s)
	}
	// The timer ends the pause, the resume runs the missed wake a few seconds later.
	waitPhase(t, m, dir, chamber.PhaseArmed, 2, 40*time.Second)
	prompt, _ := os.ReadFile(filepath.Join(dir, "prompt-2.txt"))
	if !strings.Contains(string(prompt), "Missed meanwhile, and run now, once: the plan's wake due") {
		t.Errorf("session 2's prompt:\n%s", prompt)
	}
	if s := statusJSON(t, env, dir); s.Paused != nil || s.State != "armed" {
		t.Errorf("after the pause ended: state %q paused %v", s.State, s.Paused)
	}
	fixture.Must(t, 0, env, dir, "cancel", "--dir", dir)
}

// TestWakeAtAndUpcoming: status lists every upcoming wake, a TODO before the plan's WAKE
// included, in one format; wake --at moves the plan's wake, read back from the OS.
func TestWakeAtAndUpcoming(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	dir := filepath.Join(t.TempDir(), "book")
	fixture.WriteFiles(t, dir, map[string]string{
		"plan.md":       "x\n",
		"cryo.toml":     "agent = \"./agent.sh\"\ntimezone = \"UTC\"\n",
		"agent.sh":      controlsAgent,
		"markers-1.txt": "[CRYO:EXIT 0] scheduled\n[CRYO:TODO +2h \"check the proofs\"]\n[CRYO:WAKE +1d]\n",
	})
	env := fixture.Env(m)
	fixture.Must(t, 0, env, dir, "start", filepath.Join(dir, "plan.md"))
	s := statusJSON(t, env, dir)
	var kinds []string
	for _, u := range s.Upcoming {
		kinds = append(kinds, u.Kind)
	}
	if strings.Join(kinds, ",") != "todo,fallback,wake" {
		t.Errorf("upcoming kinds %v, want the TODO, its dead-man, then the plan's wake; %+v", kinds, s.Upcoming)
	}
	if s.Plans == nil || s.Todos == nil || s.Fallbacks == nil || s.Warnings == nil || s.Upcoming == nil {
		t.Errorf("status --json has a null list: %+v", s)
	}
	_, out := bin(t, env, dir, "status", "--dir", dir)
	if !regexp.MustCompile(`(?m)^upcoming: +wake +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(in (23h5\dm|1 days)\)  the plan's wake$`).MatchString(out) {
		t.Errorf("status does not list the plan's wake after the TODO:\n%s", out)
	}
	if strings.Count(out, "UTC") != strings.Count(out, " UTC") || strings.Contains(out, "UTC  (") {
		t.Errorf("a time printed twice:\n%s", out)
	}

	at := time.Now().UTC().Add(3 * time.Hour).Truncate(time.Second)
	out = fixture.Must(t, 0, env, dir, "wake", "--dir", dir, "--at", at.Format("2006-01-02T15:04:05Z"))
	if !strings.Contains(out, "the plan's next wake is now "+at.Format(time.RFC3339)) || !strings.Contains(out, "something comes before it: todo") {
		t.Errorf("wake --at said:\n%s", out)
	}
	s = statusJSON(t, env, dir)
	found := false
	for _, u := range s.Upcoming {
		if u.Kind == "wake" && u.At.Equal(at) {
			found = true
		}
	}
	if !found {
		t.Errorf("the moved wake is not upcoming: %+v", s.Upcoming)
	}
	code, out := bin(t, env, dir, "wake", "--dir", dir, "--at", "yesterday")
	if code != 2 || !strings.Contains(out, `--at "yesterday"`) || !strings.Contains(out, "hint: give a time like WAKE's") {
		t.Errorf("wake --at yesterday: exit %d\n%s", code, out)
	}
	code, out = bin(t, env, dir, "wake", "--dir", dir, "--at", "2020-01-01T00:00Z")
	if code != 2 || !strings.Contains(out, "is in the past by more than late_grace") {
		t.Errorf("wake --at in the past: exit %d\n%s", code, out)
	}
	fixture.Must(t, 0, env, dir, "validate", "--dir", dir)
	fixture.Must(t, 0, env, dir, "cancel", "--dir", dir)
}

// TestValidateAgreesWithTheNextWake: after each edit, validate's verdict is what the next wake
// does: a cryo.toml edit is not in force (validate passes, warns, and the wake runs); a changed
// program inside the chamber fails step 3, and the wake refuses.
func TestValidateAgreesWithTheNextWake(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	env := fixture.Env(m)
	for _, tc := range []struct {
		name     string
		edit     func(dir string)
		validate int    // validate's exit status
		wake     int    // the next wake's
		says     string // in validate's output
	}{
		{"cryo.toml agent edited", func(dir string) {
			fixture.WriteFiles(t, dir, map[string]string{"cryo.toml": "agent = \"./other.sh\"\n"})
		}, 0, 0, "cryo.toml was edited since it was accepted (agent)"},
		{"agent.sh rewritten", func(dir string) {
			fixture.WriteFiles(t, dir, map[string]string{"agent.sh": "#!/bin/sh\necho '[CRYO:EXIT 0] changed'\n"})
		}, 1, 1, "agent.sh changed since the chamber was started or reloaded"},
		{"nothing", func(string) {}, 0, 0, "ok: may hibernate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "c")
			fixture.WriteFiles(t, dir, map[string]string{"plan.md": "x\n", "cryo.toml": "agent = \"./agent.sh\"\n", "agent.sh": controlsAgent, "other.sh": controlsAgent})
			fixture.Must(t, 0, env, dir, "start", filepath.Join(dir, "plan.md"))
			tc.edit(dir)
			code, out := bin(t, env, dir, "validate", "--dir", dir)
			if code != tc.validate || !strings.Contains(out, tc.says) {
				t.Errorf("validate: exit %d, want %d, and %q:\n%s", code, tc.validate, tc.says, out)
			}
			code, out = bin(t, env, dir, "wake", "--dir", dir, "--now")
			if code != tc.wake {
				t.Errorf("the next wake: exit %d, want %d (what validate said):\n%s", code, tc.wake, out)
			}
			bin(t, env, dir, "cancel", "--dir", dir)
		})
	}
}

// TestHistory: one row per finished session, from the index outside the chamber: why it ran,
// how it ended, what it answered, what it scheduled; --since narrows it; JSON field names are
// status's.
func TestHistory(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	dir := filepath.Join(t.TempDir(), "h")
	fixture.WriteFiles(t, dir, map[string]string{
		"plan.md":       "x\n",
		"cryo.toml":     "agent = \"./agent.sh\"\nwatch_inbox = false\n",
		"agent.sh":      controlsAgent,
		"markers-2.txt": "[CRYO:EXIT 1] half done\n[CRYO:REPLY \"on it\"]\n[CRYO:TODO +1d \"finish\"]\n[CRYO:WAKE +1h]\n",
		"markers-3.txt": "no markers at all\n",
	})
	env := fixture.Env(m)
	fixture.Must(t, 0, env, dir, "start", filepath.Join(dir, "plan.md"))
	fixture.Must(t, 0, env, dir, "send", "--dir", dir, "how is it going?")
	fixture.Must(t, 0, env, dir, "wake", "--dir", dir, "--now")
	bin(t, env, dir, "wake", "--dir", dir, "--now") // session 3 fails: a retry is armed
	code, out := bin(t, env, dir, "history", "--dir", dir, "--json")
	if code != 0 {
		t.Fatalf("history: %d\n%s", code, out)
	}
	var rows []chamber.HistoryRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3:\n%s", len(rows), out)
	}
	want := []struct {
		why               chamber.Why
		exit              int
		outcome           string
		answered, replies int
		todos             int
	}{
		{chamber.WhyStart, 0, "ok", 0, 0, 0},
		{chamber.WhyRequested, 1, "partial", 1, 1, 1},
		{chamber.WhyRequested, 2, "no-exit", 0, 0, 0},
	}
	for i, w := range want {
		r := rows[i]
		if r.Session != i+1 || r.Why != w.why || r.Exit != w.exit || r.Outcome != w.outcome || r.Answered != w.answered || r.Replies != w.replies || r.TodosAdd != w.todos {
			t.Errorf("row %d = %+v, want %+v", i, r, w)
		}
	}
	if rows[1].Summary != "half done" || rows[1].NextWake == "" || rows[2].NextWake == "" {
		t.Errorf("rows: %+v", rows)
	}
	_, text := bin(t, env, dir, "history", "--dir", dir)
	if !regexp.MustCompile(`(?m)^2 +\S+ \S+ \S+ +0s +\S+ +requested +EXIT 1 partial +1 +1 +\d+ +- +unknown +- +half done$`).MatchString(text) {
		t.Errorf("history table:\n%s", text)
	}
	_, out = bin(t, env, dir, "history", "--dir", dir, "--json", "--since", "2099-01-01")
	if strings.TrimSpace(out) != "[]" {
		t.Errorf("history --since in the future = %s, want []", out)
	}
	// The window (issue 28): the last N rows, --all for every one; a bad N is a usage error.
	_, out = bin(t, env, dir, "history", "--dir", dir, "--json", "--last", "2")
	rows = nil
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 2 || rows[0].Session != 2 || rows[1].Session != 3 {
		t.Errorf("history --json --last 2 = %v, %v:\n%s", rows, err, out)
	}
	_, text = bin(t, env, dir, "history", "--dir", dir, "--last", "2")
	if !strings.Contains(text, "(the last 2 sessions: --all shows every one)") || strings.Contains(text, "\n1  ") {
		t.Errorf("history --last 2:\n%s", text)
	}
	_, text = bin(t, env, dir, "history", "--dir", dir, "--all")
	if strings.Contains(text, "--all shows") || !regexp.MustCompile(`(?m)^1 `).MatchString(text) {
		t.Errorf("history --all:\n%s", text)
	}
	code, text = bin(t, env, dir, "history", "--dir", dir, "--last", "0")
	if code != 2 || !strings.Contains(text, "cryochamber: --last 0 is not a number of sessions\nhint: give --last 1 or more, or --all") {
		t.Errorf("history --last 0: exit %d\n%s", code, text)
	}
	fixture.Must(t, 0, env, dir, "cancel", "--dir", dir)
}

// TestCommandLineConventions: flags are accepted anywhere on the line, help works, usage
// errors name the command once, init refuses two directories, and start refuses plan.md while
// it is still init's template.
func TestCommandLineConventions(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	env := fixture.Env(m)
	dir := filepath.Join(t.TempDir(), "conv")
	out := fixture.Must(t, 0, env, "/", "init", dir)
	if !strings.Contains(out, `The agent is "opencode" unless cryo.toml says otherwise`) {
		t.Errorf("init does not say how to choose the agent:\n%s", out)
	}
	code, out := bin(t, env, dir, "start", filepath.Join(dir, "plan.md"), "--agent", "./agent.sh")
	if code != 2 || !strings.Contains(out, "is still the template that `cryochamber init` wrote") || !strings.Contains(out, "--force") {
		t.Errorf("start on the template: exit %d\n%s", code, out)
	}
	fixture.WriteFiles(t, dir, map[string]string{"plan.md": "a real plan\n", "agent.sh": controlsAgent})
	// Flags after the argument, as the README shows them.
	out = fixture.Must(t, 0, env, "/", "start", filepath.Join(dir, "plan.md"), "--agent", "./agent.sh")
	if !strings.Contains(out, "session 1: EXIT 0") {
		t.Errorf("start plan.md --agent:\n%s", out)
	}
	out = fixture.Must(t, 0, env, "/", "send", "hello there", "--dir", dir, "--from", "ada")
	if !strings.Contains(out, "sent ") {
		t.Errorf("send TEXT --dir:\n%s", out)
	}
	out = fixture.Must(t, 0, env, "/", "help")
	if !strings.Contains(out, "COMMANDS:") || !strings.Contains(out, "pause") || !strings.Contains(out, "history") {
		t.Errorf("help:\n%s", out)
	}
	code, out = bin(t, env, "/", "--bogus")
	if code != 2 || strings.Contains(out, "cryochamber cryochamber") || !strings.Contains(out, "hint: see `cryochamber --help`") {
		t.Errorf("--bogus: exit %d\n%s", code, out)
	}
	code, out = bin(t, env, "/", "status", "--dir", dir, "--bogus")
	if code != 2 || !strings.Contains(out, "hint: see `cryochamber status --help`") {
		t.Errorf("status --bogus: exit %d\n%s", code, out)
	}
	code, out = bin(t, env, "/", "init", "--dir", dir+"-a", dir+"-b")
	if code != 2 || !strings.Contains(out, "init got two directories") {
		t.Errorf("init --dir a b: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(dir + "-a"); err == nil {
		t.Error("init --dir a b created a")
	}
	code, out = bin(t, env, "/", "start", filepath.Join(dir, "plan.md"), "--backend", "cron")
	if code != 2 || !strings.Contains(out, `unknown backend "cron"`) {
		t.Errorf("--backend cron: exit %d\n%s", code, out)
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		if out := fixture.Must(t, 0, env, "/", "completion", shell); !strings.Contains(out, "cryochamber") {
			t.Errorf("completion %s:\n%s", shell, out)
		}
	}
	if out := fixture.Must(t, 0, env, "/", "man"); !strings.Contains(out, ".TH") && !strings.Contains(out, ".nh") {
		t.Errorf("man:\n%.300s", out)
	}
	fixture.Must(t, 0, env, "/", "cancel", "--dir", dir)
}

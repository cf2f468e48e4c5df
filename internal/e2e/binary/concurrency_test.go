package binary

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/chamber"
	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/message"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// newChamber writes a chamber with the given agent and cryo.toml lines, and starts it.
func newChamber(t *testing.T, m *systemdtest.Manager, name, agent, toml string) (string, []string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	fixture.WriteFiles(t, dir, fixture.Files{"plan.md": "x\n", "cryo.toml": "agent = \"./agent.sh\"\n" + toml, "agent.sh": agent})
	env := fixture.Env(m)
	fixture.Must(t, 0, env, dir, "start", filepath.Join(dir, "plan.md"))
	return dir, env
}

func countLines(t *testing.T, path, prefix string) int {
	t.Helper()
	data, _ := os.ReadFile(path)
	n := 0
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// TestFiftyWakesAtOnce: 50 `cryochamber wake` processes started at once on a chamber that is due
// (and systemd's own timer firing at the same moment) give exactly one agent run.
func TestFiftyWakesAtOnce(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	agent := `#!/bin/sh
echo "ran $CRYO_SESSION" >> runs.txt
sleep 0.3
if [ -e exit-2 ]; then echo "[CRYO:EXIT 2] failed"; else echo "[CRYO:EXIT 0] ok"; fi
if [ "$CRYO_SESSION" = 1 ]; then echo "[CRYO:WAKE +7s]"; else echo "[CRYO:WAKE +1h]"; fi
`
	dir, env := newChamber(t, m, "fifty", agent, "watch_inbox = false\nmin_interval = \"1s\"\n")
	st, err := fixture.State(m, dir)
	if err != nil {
		t.Fatal(err)
	}
	// Start them all just as the wake falls due.
	time.Sleep(time.Until(*st.Wake))
	var wg sync.WaitGroup
	codes := make([]int, 50)
	for i := range codes {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			codes[i], _ = bin(t, env, dir, "wake", "--dir", dir)
		}(i)
	}
	wg.Wait()
	for i, c := range codes {
		if c != 0 {
			t.Errorf("wake %d exited %d", i, c)
		}
	}
	fixture.WaitFor(t, 20*time.Second, "session 2 to hibernate", func() bool {
		st, err := fixture.State(m, dir)
		return err == nil && st.Session >= 2 && st.Phase == chamber.PhaseArmed
	})
	// The 50 processes have exited; once the manager is idle, the wake systemd itself started at
	// the WAKE has exited too, and nothing is queued: whatever was going to run has run.
	m.WaitIdle(t, 30*time.Second, st.ID+"-*")
	if n := countLines(t, filepath.Join(dir, "runs.txt"), "ran 2"); n != 1 {
		t.Fatalf("session 2 ran %d times", n)
	}
	if n := countLines(t, filepath.Join(dir, "runs.txt"), "ran "); n != 2 {
		t.Fatalf("%d sessions ran, want 2", n)
	}
}

// raceAgent records its runs; with pause-agent present it stops in the middle of its session
// (writing agent-paused) until the test removes pause-agent.
const raceAgent = `#!/bin/sh
echo "ran $CRYO_SESSION" >> runs.txt
if [ -e pause-agent ]; then
	touch agent-paused
	i=0
	while [ -e pause-agent ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
fi
if [ -e exit-2 ]; then echo "[CRYO:EXIT 2] failed"; else echo "[CRYO:EXIT 0] ok"; fi
if [ "$CRYO_SESSION" = 1 ]; then echo "[CRYO:WAKE +1h]"; else echo "[CRYO:WAKE +2h]"; fi
`

// TestWakeRacesCancel: cancel lands at each named point of a running wake, deterministically: the
// wake pauses there (CRYOCHAMBER_PAUSE_AT), the test checks that it is there (what the chamber
// looks like at that point), runs cancel, checks that cancel found the lock held and that the
// wake was still paused, then lets the wake go on. Whatever the point, the session that was
// running finishes, does not re-arm, and the chamber ends cancelled with no timer left. Two more
// cases bracket the race: cancel before the wake starts, and after it has hibernated.
func TestWakeRacesCancel(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	logHas := func(dir, re string) bool {
		data, _ := os.ReadFile(filepath.Join(dir, chamber.LogFile))
		return regexp.MustCompile("(?m)" + re).Match(data)
	}
	state := func(t *testing.T, dir string) *chamber.State {
		t.Helper()
		st, err := fixture.State(m, dir)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	// pending is the state being written (in the private state directory), not yet renamed
	// into place.
	pending := func(t *testing.T, dir string) *chamber.State {
		t.Helper()
		statePath := chamber.StatePath(fixture.StateDir(m), dir)
		tmp, _ := filepath.Glob(filepath.Join(filepath.Dir(statePath), "."+filepath.Base(statePath)+".tmp-*"))
		if len(tmp) != 1 {
			t.Fatalf("want one state being written, found %v", tmp)
		}
		data, err := os.ReadFile(tmp[0])
		var st chamber.State
		if err != nil || json.Unmarshal(data, &st) != nil {
			t.Fatalf("%s: %v\n%s", tmp[0], err, data)
		}
		return &st
	}
	// pendingAgent is agent.json being written (in the private state directory), not yet
	// renamed into place.
	pendingAgent := func(t *testing.T, dir string) *agentRecordJSON {
		t.Helper()
		statePath := chamber.StatePath(fixture.StateDir(m), dir)
		tmp, _ := filepath.Glob(filepath.Join(filepath.Dir(statePath), ".agent.json.tmp-*"))
		if len(tmp) != 1 {
			t.Fatalf("want one agent.json being written, found %v", tmp)
		}
		data, err := os.ReadFile(tmp[0])
		var rec agentRecordJSON
		if err != nil || json.Unmarshal(data, &rec) != nil {
			t.Fatalf("%s: %v\n%s", tmp[0], err, data)
		}
		return &rec
	}
	// wakeUnit is what the manager holds for the wake timer, its next elapse (session 1's until
	// the wake arms session 3's, which is an hour later; the timer is transient, no file).
	wakeUnit := func(t *testing.T, dir string) string {
		t.Helper()
		out := strings.TrimSpace(m.Systemctl(t, "show", "--property=NextElapseUSecRealtime", "--value", timer.SystemdTimerName(state(t, dir).ID, timer.Wake)))
		if out == "" {
			t.Fatal("the manager reports no next elapse for the wake timer")
		}
		return out
	}
	// Each paused case: the point, and what the chamber must look like while the wake waits
	// there (proof that cancel lands at that point of the wake and nowhere else).
	// unit1 is session 1's wake unit, as the wake found it.
	cases := []struct {
		point string
		at    func(t *testing.T, dir, unit1 string)
	}{
		{"state-temp:1", func(t *testing.T, dir, unit1 string) { // the claim is being saved
			st, next := state(t, dir), pending(t, dir)
			if st.Phase != chamber.PhaseArmed || st.Session != 1 || next.Phase != chamber.PhaseRunning || next.Session != 2 || next.LogOffset != st.LogOffset {
				t.Fatalf("state %s session %d, being written %s session %d offset %d; want armed 1, then the claim of running 2", st.Phase, st.Session, next.Phase, next.Session, next.LogOffset)
			}
		}},
		{"claimed", func(t *testing.T, dir, unit1 string) { // claim saved; no block yet
			if st := state(t, dir); st.Phase != chamber.PhaseRunning || st.Session != 2 || logHas(dir, `^--- CRYO SESSION 2 `) {
				t.Fatalf("phase %s session %d; want running session 2 and no block 2 yet", st.Phase, st.Session)
			}
		}},
		{"header", func(t *testing.T, dir, unit1 string) { // the agent is about to start
			if !logHas(dir, `^--- CRYO SESSION 2 `) || logHas(dir, `^--- CRYO END 2 `) || countLines(t, filepath.Join(dir, "runs.txt"), "ran 2") != 0 {
				t.Fatal("want block 2 begun and the agent not started")
			}
		}},
		{"agent-temp", func(t *testing.T, dir, unit1 string) { // the agent's group, the session's dead-man and block 2's offset being recorded (agent.json)
			st, next := state(t, dir), pendingAgent(t, dir)
			// The group is recorded once the sandbox holding the agent runs: the agent's own
			// first line (ran 2) comes a moment later, while the wake waits here.
			fixture.WaitFor(t, 10*time.Second, "the agent of session 2 to start", func() bool {
				return countLines(t, filepath.Join(dir, "runs.txt"), "ran 2") == 1
			})
			if st.Phase != chamber.PhaseRunning || st.Holder == nil || st.Holder.Agent != nil || next.Session != 2 || next.PID != st.Holder.PID || next.Agent.PGID <= 1 ||
				!logHas(dir, `^--- CRYO SESSION 2 `) {
				t.Fatalf("agent.json %+v being written beside holder %+v; want the started agent's group recorded for this claim", next, st.Holder)
			}
			if next.LogOffset <= st.LogOffset || next.Fallback == nil || st.Timers.Fallback == nil || !next.Fallback.Before(*st.Timers.Fallback) {
				t.Fatalf("offset %d over %d, dead-man %v over %v; want block 2's offset and session 2's earlier dead-man recorded with the group",
					next.LogOffset, st.LogOffset, next.Fallback, st.Timers.Fallback)
			}
		}},
		{"agent", func(t *testing.T, dir, unit1 string) { // the agent is running (it paused itself)
			if countLines(t, filepath.Join(dir, "runs.txt"), "ran 2") != 1 || logHas(dir, `^--- CRYO END 2 `) {
				t.Fatal("want the agent of session 2 running and its block open")
			}
		}},
		{"ended", func(t *testing.T, dir, unit1 string) { // END written; nothing judged or armed
			if st := state(t, dir); st.Phase != chamber.PhaseRunning || !logHas(dir, `^--- CRYO END 2 \S+ exit=0 ---$`) || wakeUnit(t, dir) != unit1 {
				t.Fatalf("phase %s; want running with block 2 closed and session 1's timer still installed", st.Phase)
			}
		}},
		{"armed", func(t *testing.T, dir, unit1 string) { // session 3's timers armed; the state not saved
			if st := state(t, dir); st.Phase != chamber.PhaseRunning || wakeUnit(t, dir) == unit1 {
				t.Fatalf("phase %s; want running with session 3's wake timer installed", st.Phase)
			}
		}},
		{"state-temp:2", func(t *testing.T, dir, unit1 string) { // hibernation being saved, after its cancel check
			st, next := state(t, dir), pending(t, dir)
			if st.Phase != chamber.PhaseRunning || next.Phase != chamber.PhaseArmed || next.Session != 2 || next.Holder != nil {
				t.Fatalf("state %s, being written %s session %d; want running, then armed after session 2", st.Phase, next.Phase, next.Session)
			}
		}},
		{"state-temp:3", func(t *testing.T, dir, unit1 string) { // the last save (after an alert: EXIT 2), after both cancel checks
			st, next := state(t, dir), pending(t, dir)
			if st.Phase != chamber.PhaseArmed || st.Session != 2 || next.Phase != chamber.PhaseArmed || next.Session != 2 {
				t.Fatalf("state %s session %d, being written %s session %d; want armed after session 2, saved again", st.Phase, st.Session, next.Phase, next.Session)
			}
		}},
	}
	// knownDefects are the points where cancel does not win today. Such a case checks that very
	// outcome (so it cannot pass silently) and fails once the defect is fixed, to be made an
	// ordinary case.
	knownDefects := map[string]string{}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.point, ":", "#"), func(t *testing.T) {
			dir, env := newChamber(t, m, "race", raceAgent, "watch_inbox = false\n")
			if c.point == "state-temp:3" {
				// The last save is written only when something changed after the hibernation's
				// own save: an alert (EXIT 2) or a notice.
				if err := os.WriteFile(filepath.Join(dir, "exit-2"), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			pause := filepath.Join(t.TempDir(), "paused")
			wakeEnv := append(append([]string(nil), env...), "CRYOCHAMBER_PAUSE_AT="+c.point, "CRYOCHAMBER_PAUSE_FILE="+pause)
			if c.point == "agent" {
				wakeEnv, pause = env, filepath.Join(dir, "pause-agent")
				if err := os.WriteFile(pause, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			type result struct {
				code int
				out  string
			}
			unit1 := wakeUnit(t, dir)
			done := make(chan result, 1)
			go func() {
				code, out := bin(t, wakeEnv, dir, "wake", "--dir", dir, "--now")
				done <- result{code, out}
			}()
			reached := pause
			if c.point == "agent" {
				reached = filepath.Join(dir, "agent-paused")
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				if _, err := os.Stat(reached); err == nil {
					break
				}
				select {
				case r := <-done:
					t.Fatalf("the wake ended (exit %d) without reaching %s:\n%s", r.code, c.point, r.out)
				case <-time.After(20 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Fatalf("the wake did not reach %s within 30 s", c.point)
				}
			}
			c.at(t, dir, unit1)

			code, out := bin(t, env, dir, "cancel", "--dir", dir)
			if code != 0 || !strings.Contains(out, "it will finish and not re-arm") {
				t.Fatalf("cancel while the wake is paused at %s: exit %d, want 0 and the lock found held:\n%s", c.point, code, out)
			}
			select {
			case r := <-done:
				t.Fatalf("the wake did not wait at %s: it ended (exit %d) before it was let go:\n%s", c.point, r.code, r.out)
			default:
			}
			if err := os.Remove(pause); err != nil {
				t.Fatal(err)
			}
			var r result
			select {
			case r = <-done:
			case <-time.After(60 * time.Second):
				t.Fatalf("the wake did not finish within 60 s of being let go")
			}
			if defect := knownDefects[c.point]; defect != "" {
				st := state(t, dir)
				units := fixture.UnitFiles(t, m, st.ID)
				if r.code == 0 && strings.Contains(r.out, "hibernating: session 3") && st.Phase == chamber.PhaseArmed && len(units) == 0 {
					t.Logf("KNOWN DEFECT (still there): %s", defect)
					return
				}
				t.Fatalf("the known defect at %s is gone (%s): make this an ordinary case; wake exit %d, phase %s, units %v:\n%s", c.point, defect, r.code, st.Phase, units, r.out)
			}
			if r.code != 0 || !strings.Contains(r.out, "the chamber was cancelled during session 2: nothing armed") {
				t.Fatalf("wake: exit %d, want 0 and the cancel honoured:\n%s", r.code, r.out)
			}
			checkCancelled(t, m, dir, 1)
		})
	}
	t.Run("before", func(t *testing.T) {
		dir, env := newChamber(t, m, "race", raceAgent, "watch_inbox = false\n")
		if code, out := bin(t, env, dir, "cancel", "--dir", dir); code != 0 || !strings.Contains(out, "every timer removed") {
			t.Fatalf("cancel: %d\n%s", code, out)
		}
		if code, out := bin(t, env, dir, "wake", "--dir", dir, "--now"); code != 0 || !strings.Contains(out, "cancelled; nothing to do") {
			t.Fatalf("wake after cancel: %d\n%s", code, out)
		}
		checkCancelled(t, m, dir, 0)
	})
	t.Run("after", func(t *testing.T) {
		dir, env := newChamber(t, m, "race", raceAgent, "watch_inbox = false\n")
		if code, out := bin(t, env, dir, "wake", "--dir", dir, "--now"); code != 0 || !strings.Contains(out, "hibernating: session 3") {
			t.Fatalf("wake: %d\n%s", code, out)
		}
		if code, out := bin(t, env, dir, "cancel", "--dir", dir); code != 0 || !strings.Contains(out, "every timer removed") {
			t.Fatalf("cancel after the wake: %d\n%s", code, out)
		}
		checkCancelled(t, m, dir, 1)
	})
}

// checkCancelled: the chamber ended cancelled, no unit of it is left, every block is closed,
// and session 2's agent ran sessions2 times.
func checkCancelled(t *testing.T, m *systemdtest.Manager, dir string, sessions2 int) {
	t.Helper()
	st, err := fixture.State(m, dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Phase != chamber.PhaseCancelled || st.Holder != nil {
		t.Errorf("phase %s holder %+v; want cancelled and no holder", st.Phase, st.Holder)
	}
	if units := fixture.UnitFiles(t, m, st.ID); len(units) != 0 {
		t.Errorf("units left after cancel: %v", units)
	}
	logData, _ := os.ReadFile(filepath.Join(dir, chamber.LogFile))
	starts := regexp.MustCompile(`(?m)^--- CRYO SESSION `).FindAll(logData, -1)
	ends := regexp.MustCompile(`(?m)^--- CRYO END `).FindAll(logData, -1)
	if len(starts) != len(ends) {
		t.Errorf("%d blocks but %d END lines:\n%s", len(starts), len(ends), logData)
	}
	if n := countLines(t, filepath.Join(dir, "runs.txt"), "ran 2"); n != sessions2 {
		t.Errorf("session 2 ran %d times, want %d", n, sessions2)
	}
}

// TestSendRacesClaim: messages sent while sessions claim the inbox are each claimed by exactly
// one session (or still waiting), never lost, never shown twice, and answered exactly once.
func TestSendRacesClaim(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	agent := `#!/bin/sh
for last; do :; done
printf '%s\n' "$last" | sed -n 's/^From .*(id \(.*\)):$/\1/p' >> seen.txt
echo "[CRYO:EXIT 0] ok"
echo "[CRYO:WAKE +1h]"
case "$last" in *"Messages claimed"*) echo '[CRYO:REPLY "ok"]';; esac
`
	dir, env := newChamber(t, m, "sendrace", agent, "watch_inbox = false\n")
	const senders = 30
	var wg sync.WaitGroup
	for i := 0; i < senders; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			time.Sleep(time.Duration(i*20) * time.Millisecond)
			if code, out := bin(t, env, dir, "send", "--dir", dir, fmt.Sprintf("message %d", i)); code != 0 {
				t.Errorf("send %d: %s", i, out)
			}
		}(i)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 6; i++ {
			if code, out := bin(t, env, dir, "wake", "--dir", dir, "--now"); code != 0 {
				t.Errorf("wake: %s", out)
			}
		}
	}()
	wg.Wait()
	// One more session claims whatever arrived after the last one.
	if code, out := bin(t, env, dir, "wake", "--dir", dir, "--now"); code != 0 {
		t.Fatalf("wake: %s", out)
	}
	names, _ := fixture.MailNames(dir, message.ArchiveDir)
	if len(names) != senders {
		inbox, _ := fixture.MailNames(dir, message.InboxDir)
		t.Fatalf("%d messages archived, %d in the inbox; want all %d archived", len(names), len(inbox), senders)
	}
	shown, _ := os.ReadFile(filepath.Join(dir, "seen.txt"))
	for _, name := range names {
		id := strings.TrimSuffix(name, ".md")
		if n := strings.Count(string(shown), id); n != 1 {
			t.Errorf("message %s shown %d times", id, n)
		}
		if n := repliesTo(t, dir, id); n != 1 {
			t.Errorf("message %s answered %d times", id, n)
		}
	}
}

// TestTwoChambersSameSecond: two chambers due at the same second both wake.
func TestTwoChambersSameSecond(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	at := time.Now().UTC().Add(9 * time.Second).Truncate(time.Second).Format(time.RFC3339)
	agent := `#!/bin/sh
echo "ran $CRYO_SESSION $(date -u +%s)" >> runs.txt
if [ -e exit-2 ]; then echo "[CRYO:EXIT 2] failed"; else echo "[CRYO:EXIT 0] ok"; fi
if [ "$CRYO_SESSION" = 1 ]; then echo "[CRYO:WAKE ` + at + `]"; fi
`
	a, _ := newChamber(t, m, "alpha", agent, "min_interval = \"1s\"\n")
	b, _ := newChamber(t, m, "beta", agent, "min_interval = \"1s\"\n")
	for _, dir := range []string{a, b} {
		fixture.WaitFor(t, 40*time.Second, dir+" to complete", func() bool {
			st, err := fixture.State(m, dir)
			return err == nil && st.Phase == chamber.PhaseComplete && st.Session == 2
		})
		if n := countLines(t, filepath.Join(dir, "runs.txt"), "ran 2 "); n != 1 {
			t.Fatalf("%s: session 2 ran %d times", dir, n)
		}
	}
}

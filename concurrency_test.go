package main

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/chamber"
	"github.com/cryochamber/cryochamber/message"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// newChamber writes a chamber with the given agent and cryo.toml lines, and starts it.
func newChamber(t *testing.T, m *systemdtest.Manager, name, agent, toml string) (string, []string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for file, data := range map[string]string{
		"plan.md":   "x\n",
		"cryo.toml": "agent = \"./agent.sh\"\n" + toml,
		"agent.sh":  agent,
	} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := managerEnv(m)
	if code, out := bin(t, env, dir, "start", filepath.Join(dir, "plan.md")); code != 0 {
		t.Fatalf("start: %d\n%s", code, out)
	}
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

func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFiftyWakesAtOnce: 50 `cryochamber wake` processes started at once on a chamber that is due
// (and systemd's own timer firing at the same moment) give exactly one agent run.
func TestFiftyWakesAtOnce(t *testing.T) {
	m := systemdtest.Start(t)
	agent := `#!/bin/sh
echo "ran $CRYO_SESSION" >> runs.txt
sleep 0.3
echo "[CRYO:EXIT 0] ok"
if [ "$CRYO_SESSION" = 1 ]; then echo "[CRYO:WAKE +7s]"; else echo "[CRYO:WAKE +1h]"; fi
`
	dir, env := newChamber(t, m, "fifty", agent, "watch_inbox = false\n")
	st, err := stateOf(m, dir)
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
	waitUntil(t, 20*time.Second, "session 2 to hibernate", func() bool {
		st, err := stateOf(m, dir)
		return err == nil && st.Session >= 2 && st.Phase == chamber.PhaseArmed
	})
	time.Sleep(time.Second) // anything still racing would show up now
	if n := countLines(t, filepath.Join(dir, "runs.txt"), "ran 2"); n != 1 {
		t.Fatalf("session 2 ran %d times", n)
	}
	if n := countLines(t, filepath.Join(dir, "runs.txt"), "ran "); n != 2 {
		t.Fatalf("%d sessions ran, want 2", n)
	}
}

// TestWakeRacesCancel: cancel at random moments of a running wake (during the agent, while it
// judges and arms). Whatever the interleaving, no timer stays armed and the chamber ends
// cancelled.
func TestWakeRacesCancel(t *testing.T) {
	m := systemdtest.Start(t)
	agent := `#!/bin/sh
echo "[CRYO:EXIT 0] ok"
echo "[CRYO:WAKE +1h]"
`
	rng := rand.New(rand.NewSource(1))
	for round := 0; round < 12; round++ {
		dir, env := newChamber(t, m, fmt.Sprintf("race%d", round), agent, "watch_inbox = false\n")
		done := make(chan int, 1)
		go func() {
			code, _ := bin(t, env, dir, "wake", "--dir", dir, "--now")
			done <- code
		}()
		time.Sleep(time.Duration(rng.Intn(150)) * time.Millisecond)
		if code, out := bin(t, env, dir, "cancel", "--dir", dir); code != 0 {
			t.Fatalf("round %d: cancel: %d\n%s", round, code, out)
		}
		<-done
		// A session that was running when cancel came finishes and does not re-arm.
		waitUntil(t, 10*time.Second, "the chamber to settle", func() bool {
			st, err := stateOf(m, dir)
			return err == nil && st.Phase != chamber.PhaseRunning
		})
		st, _ := stateOf(m, dir)
		if st.Phase != chamber.PhaseCancelled {
			t.Fatalf("round %d: phase %s, want cancelled", round, st.Phase)
		}
		if units := cryoUnits(t, m, st.ID); len(units) != 0 {
			t.Fatalf("round %d: units left after cancel: %v", round, units)
		}
	}
}

func cryoUnits(t *testing.T, m *systemdtest.Manager, id string) []string {
	ents, _ := os.ReadDir(m.UnitDir)
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), id) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestSendRacesClaim: messages sent while sessions claim the inbox are each claimed by exactly
// one session (or still waiting), never lost, never shown twice, and answered exactly once.
func TestSendRacesClaim(t *testing.T) {
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
	names, _ := mailNames(dir, message.ArchiveDir)
	if len(names) != senders {
		inbox, _ := mailNames(dir, message.InboxDir)
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
	m := systemdtest.Start(t)
	at := time.Now().UTC().Add(9 * time.Second).Truncate(time.Second).Format(time.RFC3339)
	agent := `#!/bin/sh
echo "ran $CRYO_SESSION $(date -u +%s)" >> runs.txt
echo "[CRYO:EXIT 0] ok"
if [ "$CRYO_SESSION" = 1 ]; then echo "[CRYO:WAKE ` + at + `]"; fi
`
	a, _ := newChamber(t, m, "alpha", agent, "")
	b, _ := newChamber(t, m, "beta", agent, "")
	for _, dir := range []string{a, b} {
		waitUntil(t, 40*time.Second, dir+" to complete", func() bool {
			st, err := stateOf(m, dir)
			return err == nil && st.Phase == chamber.PhaseComplete && st.Session == 2
		})
		if n := countLines(t, filepath.Join(dir, "runs.txt"), "ran 2 "); n != 1 {
			t.Fatalf("%s: session 2 ran %d times", dir, n)
		}
	}
}

package binary

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/cryochamber/cryochamber/chamber"
	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/message"
	"github.com/cryochamber/cryochamber/sessionlog"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// crashAgent records every run (session number, and the ids of the messages it was shown),
// and can kill its cryochamber parent in the middle of its output.
const crashAgent = `#!/bin/sh
echo "ran $CRYO_SESSION" >> runs.txt
for last; do :; done
printf '%s\n' "$last" | sed -n 's/^From .*(id \(.*\)):$/\1/p' >> seen.txt
if [ -e crash-output ]; then
	rm crash-output
	echo "half of the output"
	kill -9 $PPID
	exit 0
fi
if [ -e exit-2 ]; then
	rm exit-2
	echo "[CRYO:EXIT 2] session $CRYO_SESSION failed"
else
	echo "[CRYO:EXIT 0] session $CRYO_SESSION"
fi
echo "[CRYO:WAKE +1h]"
case "$last" in *"Messages claimed"*) echo '[CRYO:REPLY "ok"]';; esac
`

// bin runs the built cryochamber with env; it returns the exit status (-9 when SIGKILLed) and
// its output (stdout and stderr together).
func bin(t *testing.T, env []string, dir string, args ...string) (int, string) {
	t.Helper()
	r := fixture.Run(t, env, dir, args...)
	return r.Code, r.Output
}

// TestCrashPoints kills `cryochamber wake` with SIGKILL at each stage of a wake, several times
// each, then lets the next command run. Afterwards timer.json parses, the torn block is closed,
// no session number ran twice, the claimed message was shown at most once and answered exactly
// once, the armed timers agree with timer.json, and the chamber keeps working.
func TestCrashPoints(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	points := []string{
		"claimed",      // state saved as running with its claims; files not moved yet
		"header",       // the SESSION line is written; the agent has not started
		"output",       // the agent is printing (it kills its parent)
		"ended",        // the END line is appended; nothing judged or armed
		"state-temp:1", // writing the state (the claim), before the rename
		"agent-temp",   // writing agent.json (the agent's process group, the session's dead-man, the log offset), before the rename
		"armed",        // both timers armed; the state not saved
		"state-temp:2", // writing the state (armed), before the rename
		"state-temp:3", // writing the state again after an alert (the agent says EXIT 2), before the rename
	}
	const rounds = 3
	for _, point := range points {
		for round := 1; round <= rounds; round++ {
			t.Run(fmt.Sprintf("%s/%d", strings.ReplaceAll(point, ":", "#"), round), func(t *testing.T) {
				crashOnce(t, m, point, round)
			})
		}
	}
}

func crashOnce(t *testing.T, m *systemdtest.Manager, point string, round int) {
	dir := filepath.Join(t.TempDir(), "chamber")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Unconfined: the agent kills its cryochamber parent (kill -9 $PPID), which a caged session
	// cannot see (its PID namespace holds only itself).
	fixture.WriteFiles(t, dir, fixture.Files{
		"plan.md":   "x\n",
		"cryo.toml": "agent = \"./agent.sh\"\nwatch_inbox = false\n\n[sandbox]\nmode = \"off\"\n",
		"agent.sh":  crashAgent,
	})
	env := fixture.Env(m)
	if code, out := bin(t, env, dir, "start", filepath.Join(dir, "plan.md")); code != 0 {
		t.Fatalf("start: %d\n%s", code, out)
	}
	msgText := fmt.Sprintf("message for %s round %d", point, round)
	if code, out := bin(t, env, dir, "send", "--dir", dir, msgText); code != 0 {
		t.Fatalf("send: %d\n%s", code, out)
	}
	msgID := onlyMessage(t, filepath.Join(dir, message.InboxDir))

	crashEnv := env
	if point == "state-temp:3" {
		// The last save is written only when something changed after the hibernation's own
		// save: an alert (EXIT 2) or a notice.
		if err := os.WriteFile(filepath.Join(dir, "exit-2"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if point == "output" {
		if err := os.WriteFile(filepath.Join(dir, "crash-output"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	} else {
		crashEnv = append(append([]string(nil), env...), "CRYOCHAMBER_CRASH_AT="+point)
	}
	code, out := bin(t, crashEnv, dir, "wake", "--dir", dir, "--now")
	if code != -int(syscall.SIGKILL) {
		t.Fatalf("wake with CRYOCHAMBER_CRASH_AT=%s exited %d, want SIGKILL\n%s", point, code, out)
	}
	// Whatever the point, timer.json parses.
	if _, err := fixture.State(m, dir); err != nil {
		t.Fatalf("after the crash timer.json does not load: %v", err)
	}

	// The next command (here a wake, as the wake or dead-man timer would run it) repairs.
	code, out = bin(t, env, dir, "wake", "--dir", dir)
	t.Logf("recovery (exit %d):\n%s", code, out)
	// Then the chamber keeps working: a normal session runs and hibernates.
	if code, out := bin(t, env, dir, "wake", "--dir", dir, "--now"); code != 0 {
		t.Fatalf("a wake after the recovery failed: %d\n%s", code, out)
	}

	st, err := fixture.State(m, dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Phase != chamber.PhaseArmed || st.Holder != nil || len(st.Claimed) != 0 {
		t.Fatalf("state after recovery: phase %s holder %+v claimed %v", st.Phase, st.Holder, st.Claimed)
	}
	// Every block is closed, and the log reads back.
	logData, err := os.ReadFile(filepath.Join(dir, chamber.LogFile))
	if err != nil {
		t.Fatal(err)
	}
	starts := regexp.MustCompile(`(?m)^--- CRYO SESSION (\d+) `).FindAllSubmatch(logData, -1)
	ends := regexp.MustCompile(`(?m)^--- CRYO END (\d+) `).FindAllSubmatch(logData, -1)
	if len(starts) != len(ends) {
		t.Fatalf("%d blocks but %d END lines:\n%s", len(starts), len(ends), logData)
	}
	if info, err := sessionlog.Latest(filepath.Join(dir, chamber.LogFile), st.LogOffset); err != nil || info.End == nil {
		t.Fatalf("latest block: %+v %v", info, err)
	}
	// No session number ran twice.
	runs, _ := os.ReadFile(filepath.Join(dir, "runs.txt"))
	seen := map[string]bool{}
	for _, l := range strings.Fields(strings.ReplaceAll(string(runs), "ran", "")) {
		if seen[l] {
			t.Fatalf("session %s ran twice:\n%s", l, runs)
		}
		seen[l] = true
	}
	// The message was claimed by one session, shown to it once, and answered exactly once.
	if names, _ := fixture.MailNames(dir, message.InboxDir); len(names) != 0 {
		t.Fatalf("the message is still in the inbox: %v", names)
	}
	if _, err := os.Stat(filepath.Join(dir, message.ArchiveDir, msgID+".md")); err != nil {
		t.Fatalf("the message is not in the archive: %v", err)
	}
	// Claims are terminal: a crash after the claim and before the agent saw it means it is never
	// shown (cryochamber answers it, saying the session failed); it is never shown twice.
	shown, _ := os.ReadFile(filepath.Join(dir, "seen.txt"))
	if n := strings.Count(string(shown), msgID); n > 1 {
		t.Fatalf("the message was shown %d times; runs:\n%s", n, runs)
	}
	if n := repliesTo(t, dir, msgID); n != 1 {
		t.Fatalf("the message got %d replies, want 1", n)
	}
	// The timers agree with timer.json, and no temporary file is left behind.
	if code, out := bin(t, env, dir, "validate", "--dir", dir); code != 0 {
		t.Fatalf("validate after recovery: %d\n%s", code, out)
	}
	if stale, _ := filepath.Glob(filepath.Join(dir, ".timer.json.tmp-*")); len(stale) != 0 {
		t.Fatalf("temporary files left: %v", stale)
	}
	if code, out := bin(t, env, dir, "cancel", "--dir", dir); code != 0 {
		t.Fatalf("cancel: %s", out)
	}
}

func onlyMessage(t *testing.T, dir string) string {
	t.Helper()
	names, err := fixture.MailNames(filepath.Dir(filepath.Dir(dir)), filepath.Join(filepath.Base(filepath.Dir(dir)), filepath.Base(dir)))
	if err != nil || len(names) != 1 {
		t.Fatalf("want one message in %s, got %v %v", dir, names, err)
	}
	return strings.TrimSuffix(names[0], ".md")
}

func repliesTo(t *testing.T, dir, id string) int {
	t.Helper()
	names, _ := fixture.MailNames(dir, message.OutboxDir)
	sort.Strings(names)
	n := 0
	for _, name := range names {
		m, err := fixture.MailRead(dir, message.OutboxDir, name)
		if err != nil {
			t.Fatalf("outbox %s: %v", name, err)
		}
		if m.Kind != message.KindReply {
			continue
		}
		for _, r := range m.InReplyTo {
			if r == id {
				n++
			}
		}
	}
	return n
}

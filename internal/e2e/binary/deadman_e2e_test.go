package binary

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// Issue 28: a session's dead-man is armed while the log and the chamber are checked and
// snapshotted, and waited for before the SESSION line. A wake killed at the header, or once its
// agent runs, leaves the session's own dead-man in the OS, at its start + fallback_after (the
// plan's own is an hour later). Joined only at the agent's start, a kill at the header found the
// old timer stopped and the new one not yet created: no dead-man at all.
func TestDeadmanArmedBeforeTheAgent(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	for _, point := range []string{"header", "output"} {
		t.Run(point, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "chamber")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			files := map[string]string{
				"plan.md":   "x\n",
				"cryo.toml": "agent = \"./agent.sh\"\nwatch_inbox = false\nfallback_after = \"1h\"\n\n[sandbox]\nmode = \"off\"\n",
				"agent.sh":  crashAgent, // crash_test.go: kills its parent when crash-output exists
			}
			for name, data := range files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			env := fixture.Env(m)
			if code, out := bin(t, env, dir, "start", filepath.Join(dir, "plan.md")); code != 0 {
				t.Fatalf("start: %d\n%s", code, out)
			}
			crashEnv := env
			if point == "output" {
				if err := os.WriteFile(filepath.Join(dir, "crash-output"), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			} else {
				crashEnv = append(append([]string(nil), env...), "CRYOCHAMBER_CRASH_AT="+point)
			}
			started := time.Now()
			if code, out := bin(t, crashEnv, dir, "wake", "--dir", dir, "--now"); code != -int(syscall.SIGKILL) {
				t.Fatalf("wake killed at %s exited %d, want SIGKILL\n%s", point, code, out)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			be, err := timer.NewSystemd(ctx, m.Options())
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			at, ok, err := be.Next(ctx, timer.ID(dir), timer.Fallback)
			if err != nil || !ok {
				t.Fatalf("killed at %s: the OS holds no dead-man (ok %v, err %v)", point, ok, err)
			}
			// The plan's own dead-man is at its wake (+1h) + 1h; the session's at its start + 1h.
			own := started.Add(time.Hour + 5*time.Second)
			if at.After(own) {
				t.Errorf("killed at %s: the OS holds the dead-man at %s, want the session's own, by %s", point, at, own)
			}
			t.Logf("killed at %s: dead-man at %s (%s after the wake began)", point, at.Format(time.RFC3339), at.Sub(started).Round(time.Second))
			bin(t, env, dir, "wake", "--dir", dir) // recover
			if code, out := bin(t, env, dir, "cancel", "--dir", dir); code != 0 {
				t.Fatalf("cancel: %s", out)
			}
		})
	}
}

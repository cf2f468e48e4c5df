package binary

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// On systemd the timers are transient: a reboot (here: the user manager stopped and a new one
// started with the same HOME, as testdata/script/delayed-wake.txtar does for a wake that fell
// due meanwhile) removes every one of them. Each chamber's boot unit then runs its wake, which
// re-arms from the state what is not due yet: the plan's wake and its dead-man, the wake that
// ends a pause, the retry of an alert that was not delivered. Nothing runs that was not due.
func TestRebootRearmsFromState(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	agent := `#!/bin/sh
echo "ran $CRYO_SESSION" >> runs.txt
echo "[CRYO:EXIT ${CRYO_EXIT:-0}] session $CRYO_SESSION"
echo "[CRYO:WAKE +1h]"
`
	armed, env := newChamber(t, m, "armed", agent, "")
	paused, _ := newChamber(t, m, "paused", agent, "")
	if code, out := bin(t, env, paused, "pause", "--until", "+2h"); code != 0 {
		t.Fatalf("pause: %d\n%s", code, out)
	}
	// EXIT 2 alerts the operator's webhook, which refuses: the alert waits for its retry timer.
	alerting := filepath.Join(t.TempDir(), "alerting")
	if err := os.MkdirAll(alerting, 0o755); err != nil {
		t.Fatal(err)
	}
	fixture.WriteFiles(t, alerting, fixture.Files{
		"plan.md":   "x\n",
		"cryo.toml": "agent = \"./agent.sh\"\n\n[[fallback]]\naction = \"webhook\"\ntarget = \"http://127.0.0.1:1/refused\"\n",
		"agent.sh":  strings.Replace(agent, "${CRYO_EXIT:-0}", "2", 1),
	})
	if code, out := bin(t, env, alerting, "start", filepath.Join(alerting, "plan.md")); code != 0 {
		t.Fatalf("start: %d\n%s", code, out)
	}

	type want struct {
		dir  string
		kind timer.Kind
		at   func() *time.Time
	}
	var wants []want
	for _, c := range []struct {
		dir   string
		kinds []timer.Kind
	}{{armed, []timer.Kind{timer.Wake, timer.Fallback}}, {paused, []timer.Kind{timer.Wake}}, {alerting, []timer.Kind{timer.Wake, timer.Fallback, timer.Alert}}} {
		st, err := fixture.State(m, c.dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range c.kinds {
			at := map[timer.Kind]*time.Time{timer.Wake: st.Timers.Wake, timer.Fallback: st.Timers.Fallback, timer.Alert: st.Timers.Alert}[k]
			if at == nil {
				t.Fatalf("%s: the state records no %s timer before the reboot: the test cannot tell", filepath.Base(c.dir), k)
			}
			dir, kind := c.dir, k
			wants = append(wants, want{dir: dir, kind: kind, at: func() *time.Time {
				st, err := fixture.State(m, dir)
				if err != nil {
					t.Fatal(err)
				}
				return map[timer.Kind]*time.Time{timer.Wake: st.Timers.Wake, timer.Fallback: st.Timers.Fallback, timer.Alert: st.Timers.Alert}[kind]
			}})
		}
	}
	if got := fixture.Timers(t, m, "cryo-*", false); len(got) != len(wants) {
		t.Fatalf("before the reboot the manager holds %v, want %d timers", got, len(wants))
	}

	m.Restart(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	be, err := timer.NewSystemd(ctx, m.Options())
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	for _, w := range wants {
		name := filepath.Base(w.dir) + " " + string(w.kind)
		fixture.WaitFor(t, 30*time.Second, name+" timer re-armed by the boot unit", func() bool {
			at := w.at()
			next, ok, err := be.Next(ctx, timer.ID(w.dir), w.kind)
			return err == nil && ok && at != nil && next.Equal(*at)
		})
	}
	for _, dir := range []string{armed, paused, alerting} {
		if n := countLines(t, filepath.Join(dir, "runs.txt"), "ran "); n != 1 {
			t.Errorf("%s: the agent ran %d times; after a reboot with nothing due it must not run again", filepath.Base(dir), n)
		}
		log, _ := os.ReadFile(filepath.Join(dir, "cryo.log"))
		if dir != paused && !strings.Contains(string(log), "timer disagreed with the state; re-armed it") {
			t.Errorf("%s: the log does not say the wake timer was re-armed:\n%s", filepath.Base(dir), log)
		}
		code, out := bin(t, env, dir, "status")
		if code != 0 || strings.Contains(out, "MISMATCH") {
			t.Errorf("%s: status after the reboot (%d):\n%s", filepath.Base(dir), code, out)
		}
	}
}

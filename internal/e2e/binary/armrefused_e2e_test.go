package binary

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// TestSilent3_11RefusedAfterWakeFellDue: as TestSilent3_11RefusedAfterSlowArming, but the WAKE
// the session asked for (20 s on) falls due while the manager is silent, so the arming moves it
// to armLead from then; and once the manager answers it stays slow (stopped 1.2 s of every
// 1.23 s: each try takes over a second), while the wake timer's name is masked. The refusal
// must refuse: the `refused` alert, phase failed, nothing armed. Before (the review of round
// 1), a try that took a second looked as if it had waited past the wake it armed (the wake is
// armLead ahead only), so the masked unit was retried as late, and kept after armPatience with
// a `timer` alert and no timer in the OS when every try took a second. Here the manager's
// pauses make most tries, not every one, take a second: with the fix taken back this trial
// still passed, after moving the wake five times; the test that fails without the fix is
// chamber's TestArmPatientlyRefusalAfterMovedWake (each answer 1.1 s late, by a stand-in).
func TestSilent3_11RefusedAfterWakeFellDue(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	hook := startAlertHook(t, false)
	agent := "#!/bin/sh\necho \"ran $CRYO_SESSION\" >> runs.txt\n[ \"$CRYO_SESSION\" = 2 ] && sleep 3\necho \"[CRYO:EXIT 0] session $CRYO_SESSION\"\n" +
		"if [ \"$CRYO_SESSION\" = 2 ]; then " + wakeAt(20) + "; else echo \"[CRYO:WAKE +1h]\"; fi\n"
	c := newTrial(t, m, "agent = \"./agent.sh\"\nmin_interval = \"1s\"\nwatch_inbox = false\n"+alertToml(hook, nil), agent, nil)
	c.start(0)
	id := timer.ID(c.dir)
	done, cont := wakeFrozen(t, m, c)
	mask := maskWakeTimer(t, m, c)
	var res wakeResult
	deadline := time.Now().Add(75 * time.Second)
pulse:
	for {
		select {
		case res = <-done:
			break pulse
		case <-time.After(time.Until(deadline)):
		}
		// Past the first 75 s: a manager that answers, slowly.
		cont()
		time.Sleep(30 * time.Millisecond)
		_ = syscall.Kill(m.PID, syscall.SIGSTOP)
		deadline = time.Now().Add(1200 * time.Millisecond)
	}
	cont()
	t.Logf("the wake (exit %d):\n%s", res.code, res.out)
	if !strings.Contains(res.out, "did not take the next wake in time") || !strings.Contains(res.out, "fell due while the timer manager was silent") {
		t.Fatalf("the arming was not slow past the WAKE: the test does not try what it says\n%s", res.out)
	}
	if res.code == 0 || !strings.Contains(res.out, "refused to hibernate") {
		t.Errorf("the masked wake timer was not refused (exit %d)", res.code)
	}
	if s := c.status(); s.Phase != "failed" {
		t.Errorf("phase %q after the refusal, want failed", s.Phase)
	}
	if armed := strings.TrimSpace(m.Systemctl(t, "list-units", "--all", "--plain", "--no-legend", "--type=timer", id+"-*")); armed != "" {
		t.Errorf("timers left armed after the refusal:\n%s", armed)
	}
	if refused := hook.withReason("refused"); len(refused) != 1 {
		t.Errorf("%d `refused` alerts, want 1:\n%s", len(refused), hook)
	}
	if n := len(hook.withReason("timer")); n != 0 {
		t.Errorf("%d `timer` alerts: the plan was refused, not kept", n)
	}
	if err := os.Remove(mask); err != nil {
		t.Fatal(err)
	}
	c.must(0, "cancel", "--dir", c.dir)
}

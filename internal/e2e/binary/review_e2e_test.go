package binary

// The fixes of the last review that had no test of their own (issue 23's closing note, review
// fixes 4 and 5), each tried end to end with the built binary against a private systemd user
// manager (timer/systemdtest). Each failed with its fix taken back.

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// TestSilent3_11RefusedAfterSlowArming: the user manager answers nothing for 75 s while a
// session hibernates (SIGSTOP, as in TestSilent3_11ManagerSlowAtHibernation), so the 60 s the
// session's end was given are spent; when it answers again, it refuses the wake timer (its name
// was masked meanwhile: a refusal by the manager, which still refuses the plan). The refusal
// must then run with time of its own: every timer of the chamber disarmed (none left armed while
// the state says failed) and the `refused` alert delivered. Before (review fix 4), the refusal
// ran on the spent context: the session's dead-man stayed armed and no alert went out.
func TestSilent3_11RefusedAfterSlowArming(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	hook := startAlertHook(t, false)
	agent := "#!/bin/sh\necho \"ran $CRYO_SESSION\" >> runs.txt\n[ \"$CRYO_SESSION\" = 2 ] && sleep 3\necho \"[CRYO:EXIT 0] session $CRYO_SESSION\"\necho \"[CRYO:WAKE +1h]\"\n"
	c := newTrial(t, m, "agent = \"./agent.sh\"\nmin_interval = \"1s\"\nwatch_inbox = false\n"+alertToml(hook, nil), agent, nil)
	c.start(0)
	id := timer.ID(c.dir)
	done, cont := wakeFrozen(t, m, c)
	mask := maskWakeTimer(t, m, c)
	time.Sleep(75 * time.Second)
	cont()
	res := <-done
	t.Logf("the wake (exit %d):\n%s", res.code, res.out)
	if res.code == 0 || !strings.Contains(res.out, "did not take the next wake in time") || !strings.Contains(res.out, "refused to hibernate") {
		t.Fatalf("the wake was not refused by the manager after a slow arming (exit %d): the test does not try what it says\n%s", res.code, res.out)
	}
	if s := c.status(); s.Phase != "failed" {
		t.Errorf("phase %q after the refusal, want failed", s.Phase)
	}
	// Nothing of the chamber is left armed in the manager while the state says failed.
	if armed := strings.TrimSpace(m.Systemctl(t, "list-units", "--all", "--plain", "--no-legend", "--type=timer", id+"-*")); armed != "" {
		t.Errorf("timers left armed after the refusal:\n%s\n%s", armed, res.out)
	}
	if refused := hook.withReason("refused"); len(refused) != 1 {
		t.Errorf("%d `refused` alerts, want 1:\n%s\n%s", len(refused), hook, res.out)
	}
	if n := len(hook.withReason("timer")); n != 0 {
		t.Errorf("%d `timer` alerts: the plan was refused, not kept", n)
	}
	if err := os.Remove(mask); err != nil {
		t.Fatal(err)
	}
	c.must(0, "cancel", "--dir", c.dir)
}

// TestSilent3_06StatusNoWatcherInstalled: a chamber whose hibernation could not install its
// inbox watcher is armed without one, and says so: here the agent made messages/inbox a
// symbolic link to itself, which systemd cannot watch (inotify: ELOOP), so the path unit fails
// to start. `status` must not start the wake service for it: that wake cannot start a watcher
// the hibernation did not install (checkWatcher skips a chamber whose state has no watcher), so
// the start would be a wake for nothing, and the warning's "the wake service was started now:
// it starts the watcher again" untrue. Before (review fix 5), status started it. (A watcher
// that was installed and then lost is started again by the wake status starts:
// TestSilent3_06WatcherAfterBurst.)
func TestSilent3_06StatusNoWatcherInstalled(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	agent := "#!/bin/sh\nrm -rf messages/inbox && ln -s inbox messages/inbox\n" + strings.TrimPrefix(okAgent, "#!/bin/sh\n")
	c := newTrial(t, m, "agent = \"./agent.sh\"\nmin_interval = \"1s\"\n", agent, nil)
	id := timer.ID(c.dir)
	wakeSvc := timer.SystemdServiceName(id, timer.Wake)
	if out := c.start(0); !strings.Contains(out, "cannot watch the inbox") {
		t.Fatalf("start installed the watcher of an inbox that cannot be watched: the test does not try what it says\n%s", out)
	}
	started := func() string {
		return strings.TrimSpace(m.Systemctl(t, "show", "-p", "ExecMainStartTimestampMonotonic", "--value", wakeSvc))
	}
	if v := started(); v != "0" {
		t.Fatalf("the wake service ran before status (%s): the test cannot tell", v)
	}
	s := c.status()
	time.Sleep(2 * time.Second) // a start status queued would have run by now
	m.WaitIdle(t, 30*time.Second, wakeSvc)
	if v := started(); v != "0" {
		t.Errorf("status started the wake service (ExecMainStartTimestampMonotonic=%s) of a chamber armed without a watcher", v)
	}
	all := strings.Join(s.Warnings, "\n")
	if !strings.Contains(all, "inbox watcher") || strings.Contains(all, "the wake service was started now") {
		t.Errorf("status: watcher %q, warnings %q", s.Watcher, s.Warnings)
	}
	c.must(0, "cancel", "--dir", c.dir)
}

// TestSilent3_11WakeDueDuringSlowArming: the user manager answers nothing for 75 s while a
// session hibernates, and the WAKE the session asked for (20 s on) passes meanwhile. When the
// manager answers again, the wake is due: it must be armed as soon as possible (what the
// judgement does with a WAKE that passed within late_grace), and its session run, never the
// plan refused because the manager was slow (issue 23, item 11).
func TestSilent3_11WakeDueDuringSlowArming(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	hook := startAlertHook(t, false)
	agent := "#!/bin/sh\necho \"ran $CRYO_SESSION\" >> runs.txt\n[ \"$CRYO_SESSION\" = 2 ] && sleep 3\necho \"[CRYO:EXIT 0] session $CRYO_SESSION\"\n" +
		"if [ \"$CRYO_SESSION\" = 2 ]; then " + wakeAt(20) + "; else echo \"[CRYO:WAKE +1h]\"; fi\n"
	c := newTrial(t, m, "agent = \"./agent.sh\"\nmin_interval = \"1s\"\nwatch_inbox = false\n"+alertToml(hook, nil), agent, nil)
	c.start(0)
	done, cont := wakeFrozen(t, m, c)
	time.Sleep(75 * time.Second)
	cont()
	res := <-done
	t.Logf("the wake (exit %d):\n%s", res.code, res.out)
	if !strings.Contains(res.out, "did not take the next wake in time") {
		t.Fatalf("the arming was not slow: the test does not try what it says")
	}
	if refused := hook.withReason("refused"); res.code != 0 || len(refused) != 0 {
		t.Errorf("the plan was refused because the manager was slow past its WAKE (exit %d): %v", res.code, refused)
	}
	m.WaitFor(t, 60*time.Second, "session 3, at the WAKE that passed", func() bool { return strings.Contains(c.file("runs.txt"), "ran 3") })
	c.must(0, "cancel", "--dir", c.dir)
}

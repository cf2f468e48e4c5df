package binary

// Issue 23, round 2, its leftovers (the rest is silent2_e2e_test.go): alerts that reach nobody
// said in the digest and the heartbeat (item 12's second half), the inbox watcher lost (item 6),
// thirty chambers overdue at the user manager's start (item 11's second half). Each is tried end
// to end with the built binary against a private systemd user manager (timer/systemdtest), and a
// real Dovecot and SMTP server where named.

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/confined"
	"github.com/cryochamber/cryochamber/internal/heartbeat/hctest"
	"github.com/cryochamber/cryochamber/internal/mailtest"
	"github.com/cryochamber/cryochamber/message"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// TestSilent3_12NobodyInDigestAndHeartbeat: the chamber's only alert target is a chat hook
// revoked for good (500). Once its delivery failed twice (the first attempt and the real alert
// timer's retry a minute later) no alert reaches anyone: the heartbeat monitor (a stand-in
// healthchecks.io, which alerts the operator by its own channels) gets /fail with that reason at
// once and once only, and again instead of the success of the next good session; the next digest
// says it at its top, and reaches the operator through the chamber's email channel (a real
// Dovecot and SMTP server). Before, the digest said nothing of it and the monitor got a success.
func TestSilent3_12NobodyInDigestAndHeartbeat(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	hc := hctest.Start(t)
	imap := mailtest.StartIMAP(t)
	smtp := mailtest.StartSMTP(t)
	revoked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "hook revoked", http.StatusInternalServerError)
	}))
	t.Cleanup(revoked.Close)
	agent := `#!/bin/sh
if [ "$CRYO_SESSION" = 1 ]; then echo "[CRYO:EXIT 2] the ferns look dry"; else echo "[CRYO:EXIT 0] watered"; fi
echo "[CRYO:WAKE +1h]"
`
	toml := "min_interval = \"1s\"\nwatch_inbox = false\ntimezone = \"UTC\"\n" +
		strings.Replace(fmt.Sprintf(syncToml, smtp.Port, imap.Port), "summaries = true\n", "", 1) +
		"\n[webhook]\nretries = 0\n\n[[fallback]]\naction = \"webhook\"\ntarget = \"" + revoked.URL + "/hook\"\n" +
		"\n[heartbeat]\nurl = \"" + hc.PingURL + "\"\n"
	c := newTrial(t, m, toml, agent, nil)
	c.env = append(c.env, "CRYO_IMAP_PW="+imap.Password)
	c.start(0)
	nobodyPings := func() []string {
		var out []string
		for _, e := range hc.Events() {
			if e.Kind == "fail" && strings.Contains(e.Body, "NO ALERT REACHES ANYONE") {
				out = append(out, e.Body)
			}
		}
		return out
	}
	if n := len(nobodyPings()); n != 0 {
		t.Fatalf("the monitor was told after one failed attempt: %v", hc.Events())
	}
	m.WaitFor(t, 150*time.Second, "the monitor is told that no alert reaches anyone", func() bool { return len(nobodyPings()) > 0 })
	if b := nobodyPings()[0]; !strings.Contains(b, revoked.URL) || !strings.Contains(b, "500") || !strings.Contains(b, c.dir) {
		t.Errorf("the /fail body: %q", b)
	}
	// Once: the next dead-man check does not ping again.
	c.must(0, "fallback", "--dir", c.dir)
	if n := len(nobodyPings()); n != 1 {
		t.Errorf("%d /fail pings saying it after another dead-man check, want 1: %v", n, hc.Kinds())
	}
	// A session that ends well while it lasts reports /fail with the reason, not a success.
	c.must(0, "wake", "--dir", c.dir, "--now")
	ev := hc.Events()
	var last string
	for _, e := range ev {
		if e.Kind == "success" || e.Kind == "fail" {
			last = e.Kind + " " + e.Body
		}
	}
	if !strings.HasPrefix(last, "fail session 2: NO ALERT REACHES ANYONE") || !strings.Contains(last, "EXIT 0") {
		t.Errorf("session 2 ended well while no alert reaches anyone; the monitor's last ping: %q", last)
	}

	// The digest says it first, in its subject and at its top.
	printed := c.must(0, "digest", "--dir", c.dir)
	if !strings.HasPrefix(printed, "NO ALERT REACHES ANYONE: ") || strings.Index(printed, revoked.URL) > strings.Index(printed, "Sessions run:") {
		t.Errorf("digest --dir prints:\n%s", printed)
	}
	c.must(0, "digest", "--dir", c.dir, "--send")
	c.must(0, "sync")
	mails := mailsWith(smtp, "Sessions run: 2")
	if len(mails) == 0 {
		var got []string
		for _, r := range smtp.Messages() {
			got = append(got, r.Header.Get("Subject"))
		}
		t.Fatalf("no digest mailed through the channel; mails: %q", got)
	}
	body := mails[0].Body
	if i := strings.Index(body, "NO ALERT REACHES ANYONE"); i < 0 || i > strings.Index(body, "Sessions run:") || !strings.Contains(body, revoked.URL) {
		t.Errorf("the mailed digest (subject %q):\n%s", mails[0].Header.Get("Subject"), body)
	}
	c.must(0, "cancel", "--dir", c.dir)
}

// overdueAgent records each session in runs.txt; session 1 wakes at the instant written in
// wakeat (the test's), every later one an hour on.
const overdueAgent = `#!/bin/sh
echo "ran $CRYO_SESSION" >> runs.txt
echo "[CRYO:EXIT 0] session $CRYO_SESSION"
if [ "$CRYO_SESSION" = 1 ]; then echo "[CRYO:WAKE $(cat wakeat)]"; else echo "[CRYO:WAKE +1h]"; fi
`

// TestSilent3_11ThirtyOverdueAtManagerStart: thirty chambers whose WAKE passed while the user
// manager was down (a machine off overnight). When it starts again, every boot unit runs its
// wake at once, thirty sessions run and thirty chambers arm (each arming reloads the manager)
// together. Every chamber must end with its session run and its next wake armed, or with a retry
// armed and an alert: none refused because our own contention outlasted the time a session is
// given to hibernate (issue 23, item 11, its second half). (The manager restarted once more while
// the wakes run was tried too: the wakes cut short got their notice `shutdown` and ran again, but
// a private manager restarted under that load does not answer systemdtest within its 30 s here;
// the bus that goes away during a hibernation is TestSilent3_11ManagerSlowAtHibernation.)
func TestSilent3_11ThirtyOverdueAtManagerStart(t *testing.T) {
	t.Parallel()
	const n = 30
	m := systemdtest.Start(t)
	hook := startAlertHook(t, false)
	wakeAt := time.Now().UTC().Add(n * 5 * time.Second).Truncate(time.Second)
	toml := "agent = \"./agent.sh\"\nmin_interval = \"1s\"\n" + alertToml(hook, nil)
	var cs []*trial
	for i := 0; i < n; i++ {
		c := newTrial(t, m, toml, overdueAgent, map[string]string{"wakeat": wakeAt.Format(time.RFC3339)})
		c.start(0)
		cs = append(cs, c)
	}
	if left := time.Until(wakeAt); left < 5*time.Second {
		t.Fatalf("starting %d chambers took too long: their WAKE (%s) is %s away", n, wakeAt, left)
	}
	m.Stop(t)
	time.Sleep(time.Until(wakeAt) + 5*time.Second)
	m.Restart(t)
	ran := func() int {
		k := 0
		for _, c := range cs {
			if strings.Contains(c.file("runs.txt"), "ran 2") {
				k++
			}
		}
		return k
	}
	// Each chamber ends with session 2 run and its next wake armed (or a retry armed, with an
	// alert or a notice that says why), in the state and in the manager alike.
	m.WaitFor(t, 12*time.Minute, "every overdue chamber to run its session", func() bool { return ran() == n })
	m.WaitIdle(t, 8*time.Minute, "cryo-*")
	var bad []string
	for i, c := range cs {
		s := c.status()
		switch {
		case s.Phase == "armed" && s.NextWake != nil && s.osTimer("wake") != nil && s.osTimer("wake").Equal(*s.NextWake):
			if !s.NextWake.After(wakeAt.Add(30 * time.Minute)) {
				t.Logf("chamber %d: a retry is armed: %+v", i, s)
			}
		default:
			bad = append(bad, fmt.Sprintf("chamber %d: phase %s, next wake %v, timers %+v, last %+v, warnings %q", i, s.Phase, s.NextWake, s.Timers, s.Last, s.Warnings))
		}
	}
	if refused := hook.withReason("refused"); len(refused) > 0 || len(bad) > 0 {
		t.Errorf("%d refused alerts; %d chambers not on their plan:\n%s\n%v", len(refused), len(bad), strings.Join(bad, "\n"), refused)
	}
	for _, c := range cs {
		c.run("cancel", "--dir", c.dir)
	}
}

// TestSilent3_06WatcherAfterBurst: messages posted one after another, each answered by a quick
// session (the dashboard's "send" without "wake", a chat), start the wake service more often
// than systemd's default start limit allows (5 starts in 10 s). Then the watcher must still be
// on, and the next message posted without "wake" must be answered by a session within seconds
// (issue 23, item 6: it stayed in the inbox and the page said "the inbox watcher is not running").
func TestSilent3_06WatcherAfterBurst(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	hook := startAlertHook(t, false)
	c := newTrial(t, m, "agent = \"./agent.sh\"\nmin_interval = \"1s\"\n"+alertToml(hook, nil), okAgent, nil)
	c.start(0)
	id := timer.ID(c.dir)
	pathUnit, wakeSvc := id+"-inbox.path", id+"-wake.service"
	runs := func() int { return strings.Count(c.file("runs.txt"), "ran ") }
	began := time.Now()
	for i := 1; i <= 7; i++ {
		want := runs() + 1
		c.must(0, "send", fmt.Sprintf("message %d", i))
		m.WaitFor(t, 60*time.Second, fmt.Sprintf("message %d to be answered", i), func() bool { return runs() >= want })
		m.WaitIdle(t, 30*time.Second, wakeSvc)
		t.Logf("message %d answered after %s: %s", i, time.Since(began).Round(time.Millisecond),
			strings.Join(strings.Fields(m.Systemctl(t, "show", "-p", "ActiveState", "-p", "Result", pathUnit)), " "))
	}
	if st := strings.TrimSpace(m.Systemctl(t, "is-active", pathUnit)); st != "active" {
		t.Errorf("after the burst the inbox watcher is %s: %s", st, m.Systemctl(t, "show", "-p", "Result", pathUnit))
	}
	if n := len(hook.alerts()); n != 0 {
		t.Errorf("%d alerts or notices after a burst that lost nothing:\n%s", n, hook)
	}

	// A watcher lost all the same (stopped by hand here; a trigger limit, a unit of an older
	// build), and a message dropped into inbox/ by a writer that does not start the wake:
	// status (what the dashboard shows) finds it, and the wake it starts turns the watcher on
	// again, tells the operator once, and answers the message.
	lose := func(i int) {
		t.Helper()
		m.Systemctl(t, "stop", pathUnit)
		want := runs() + 1
		fs, err := confined.Open(c.dir)
		if err != nil {
			t.Fatal(err)
		}
		defer fs.Close()
		if _, err := message.Write(fs, message.InboxDir, &message.Message{From: "alice", Time: time.Now().UTC(), Kind: message.KindMessage, Body: fmt.Sprintf("dropped %d", i)}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		if runs() >= want {
			t.Fatalf("a session ran with the watcher stopped: the test does not try what it says")
		}
		s := c.status()
		if s.Watcher != "stopped" || !strings.Contains(strings.Join(s.Warnings, "\n"), "the wake service was started now") {
			t.Errorf("status with the watcher stopped: watcher %q, warnings %q", s.Watcher, s.Warnings)
		}
		m.WaitFor(t, 60*time.Second, fmt.Sprintf("the dropped message %d to be answered", i), func() bool { return runs() >= want })
		m.WaitIdle(t, 30*time.Second, wakeSvc)
		if st := strings.TrimSpace(m.Systemctl(t, "is-active", pathUnit)); st != "active" {
			t.Errorf("the watcher found stopped is %s after the wake", st)
		}
	}
	lose(1)
	notices := hook.withReason("watcher")
	if len(notices) != 1 || !strings.Contains(fmt.Sprint(notices[0]["message"]), pathUnit) {
		t.Errorf("%d notices `watcher`, want 1 naming %s:\n%s", len(notices), pathUnit, hook)
	}
	lose(2)
	if n := len(hook.withReason("watcher")); n != 1 {
		t.Errorf("%d notices `watcher` after the second loss the same day, want 1", n)
	}
	if s := c.status(); s.Watcher != "on" {
		t.Errorf("status after: watcher %q, warnings %q", s.Watcher, s.Warnings)
	}
	c.must(0, "cancel", "--dir", c.dir)
}

// TestSilent3_11ManagerSlowAtHibernation: the user manager answers nothing for 75 s while a
// session hibernates (stopped with SIGSTOP: what thirty chambers arming at once, each reloading
// it, do to a busy manager at its start, longer). The 60 s a session is given to judge, arm and
// alert pass; the plan must not be refused for it: once the manager answers again the next wake
// is armed, and the session's end says it was late (issue 23, item 11: "pass the hibernation
// budget and refuse the plan").
func TestSilent3_11ManagerSlowAtHibernation(t *testing.T) {
	t.Parallel()
	// "answered": session 2 answers and asks for a wake; "failed": it fails without an answer,
	// so its end arms a retry (retry, hibernate.go), which must be as patient with the manager.
	for _, tc := range []struct{ name, end string }{
		{"answered", "echo \"[CRYO:EXIT 0] session $CRYO_SESSION\"\necho \"[CRYO:WAKE +1h]\"\n"},
		{"failed", "[ \"$CRYO_SESSION\" = 2 ] && exit 3\necho \"[CRYO:EXIT 0] session $CRYO_SESSION\"\necho \"[CRYO:WAKE +1h]\"\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			managerSlowAtHibernation(t, tc.end, tc.name == "answered")
		})
	}
}

func managerSlowAtHibernation(t *testing.T, end string, answered bool) {
	m := systemdtest.Start(t)
	hook := startAlertHook(t, false)
	agent := "#!/bin/sh\necho \"ran $CRYO_SESSION\" >> runs.txt\n[ \"$CRYO_SESSION\" = 2 ] && sleep 3\n" + end
	c := newTrial(t, m, "agent = \"./agent.sh\"\nmin_interval = \"1s\"\nwatch_inbox = false\n"+alertToml(hook, nil), agent, nil)
	c.start(0)
	done, cont := wakeFrozen(t, m, c)
	time.Sleep(75 * time.Second)
	cont()
	res := <-done
	s := c.status()
	if (answered && res.code != 0) || s.Phase != "armed" || s.NextWake == nil || s.osTimer("wake") == nil || !s.osTimer("wake").Equal(*s.NextWake) {
		t.Errorf("after a manager that did not answer for 75 s: wake exit %d, status %+v\n%s", res.code, s, res.out)
	}
	if refused := hook.withReason("refused"); len(refused) != 0 {
		t.Errorf("the plan was refused: %v", refused)
	}
	if !strings.Contains(res.out, "the next wake was armed at try") || len(hook.withReason("timer")) != 0 {
		t.Errorf("the wake does not say it armed late, or alerted (%d alerts):\n%s", len(hook.alerts()), res.out)
	}
	c.must(0, "cancel", "--dir", c.dir)
}

// TestSilent3_06InboxReplaced: the watched directory replaced behind the watcher (messages/inbox
// renamed away and made again, as a restore from a backup or a careless agent would): inotify
// watched the old directory, but systemd watches the path's parents too and sets its watches up
// again, so a message dropped into the new inbox (by a writer that does not start the wake) is
// still answered within seconds. Tried for issue 23, item 6: no defect found.
func TestSilent3_06InboxReplaced(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	c := newTrial(t, m, "agent = \"./agent.sh\"\nmin_interval = \"1s\"\n", okAgent, nil)
	c.start(0)
	inbox := filepath.Join(c.dir, message.InboxDir)
	if err := os.Rename(inbox, inbox+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(inbox, 0o755); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	m.WaitIdle(t, 30*time.Second, timer.ID(c.dir)+"-wake.service") // the rename's own event
	before := strings.Count(c.file("runs.txt"), "ran ")
	fs, err := confined.Open(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	if _, err := message.Write(fs, message.InboxDir, &message.Message{From: "alice", Time: time.Now().UTC(), Kind: message.KindMessage, Body: "into the new inbox"}); err != nil {
		t.Fatal(err)
	}
	m.WaitFor(t, 60*time.Second, "the message in the new inbox to be answered", func() bool { return strings.Count(c.file("runs.txt"), "ran ") > before })
	c.must(0, "cancel", "--dir", c.dir)
}

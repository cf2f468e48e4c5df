package binary

// Issue 26: told even when the machine is gone. A chamber with [heartbeat] pings a stand-in
// healthchecks.io (internal/heartbeat/hctest, which replays the service's documented answers
// and keeps a check's state as the service does) from sessions the real user manager's timers
// start; every hibernation sets the check's timeout to the next wake; with the manager stopped
// for good the stand-in says the check goes down at the next wake plus grace; cancel pauses
// it. And every routine session leaves one sealed summary in the outbox.

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/internal/heartbeat/hctest"
	"github.com/cryochamber/cryochamber/message"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// heartbeatAgent answers by its session number: 1 ends well and wakes in 65 s (the monitor's
// smallest timeout is 60 s), 2 fails without an EXIT, 3 ends well and wakes in two hours.
const heartbeatAgent = `#!/bin/sh
case "$CRYO_SESSION" in
1) echo "[CRYO:EXIT 0] watered the garden"; echo "[CRYO:WAKE +65s]" ;;
2) echo "the hose burst" >&2; exit 1 ;;
*) echo "[CRYO:EXIT 0] watered again"; echo "[CRYO:WAKE +2h]" ;;
esac
`

func TestHeartbeatFollowsTheSessions(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	hc := hctest.Start(t)
	toml := "[heartbeat]\nurl = \"" + hc.PingURL + "\"\napi_url = \"" + hc.URL + "\"\napi_key_env = \"HC_API_KEY\"\ncheck = \"" + hc.UUID + "\"\ngrace = \"10m\"\n"
	c := newTrial(t, m, "agent = \"./agent.sh\"\n"+toml, heartbeatAgent, nil)
	c.env = append(c.env, "HC_API_KEY="+hc.Key)
	const grace = 600

	// expectTimeout checks the last update: the timeout counts from the last ping, and must
	// reach the chamber's next wake within a second.
	expectTimeout := func(what string) time.Time {
		t.Helper()
		st, err := fixture.State(m, c.dir)
		if err != nil || st.Wake == nil {
			t.Fatalf("%s: state %+v, %v", what, st, err)
		}
		timeout, g := hc.Timeout()
		last := hc.LastPing()
		if last == nil {
			t.Fatalf("%s: no ping reached the monitor: %v", what, hc.Kinds())
		}
		want := st.Wake.Sub(*last).Seconds()
		if math.Abs(float64(timeout)-want) > 1 || g != grace {
			t.Fatalf("%s: the monitor holds timeout %ds grace %ds; want %.1fs (to the next wake %s from the ping at %s) and %ds",
				what, timeout, g, want, st.Wake.Format(time.RFC3339), last.Format(time.RFC3339Nano), grace)
		}
		return *st.Wake
	}

	c.start(0)
	if got, want := hc.Kinds(), []string{"start", "success", "update"}; !slices.Equal(got, want) {
		t.Fatalf("after a good session the monitor got %v, want %v", got, want)
	}
	expectTimeout("session 1")
	// A routine session leaves exactly one item in the outbox: its summary, sealed.
	items := c.outbox()
	if len(items) != 1 || items[0].Kind != message.KindSummary || items[0].Session != 1 || !strings.Contains(items[0].Body, "watered the garden") {
		t.Fatalf("outbox after a routine session: %+v", items)
	}
	key, err := message.LoadSealKey(filepath.Join(fixture.StateDir(m), "chambers", timer.ID(c.dir), message.SealKeyFile))
	if err != nil || !items[0].SealedBy(key) {
		t.Fatalf("the summary is not sealed by the chamber's key (%v)", err)
	}

	// Session 2 is started by the OS timer, and fails: /start, /fail with a one-line reason,
	// then the timeout to the retry.
	m.WaitFor(t, 3*time.Minute, "session 2 to fail and be retried", func() bool {
		return len(hc.Kinds()) >= 6
	})
	if got, want := hc.Kinds()[:6], []string{"start", "success", "update", "start", "fail", "update"}; !slices.Equal(got, want) {
		t.Fatalf("after a failing session the monitor got %v, want %v", hc.Kinds(), want)
	}
	fail := hc.Events()[4]
	if !strings.Contains(fail.Body, "session 2") || !strings.Contains(fail.Body, "crashed") || strings.Contains(fail.Body, "\n") || strings.Contains(fail.Body, "hose") {
		t.Fatalf("the /fail body is %q: want one line with the reason, and none of the agent's output", fail.Body)
	}
	m.WaitIdle(t, time.Minute, "*-wake.service")
	expectTimeout("session 2 (retry)")

	// Session 3 ends well: the check is up, and expects the next ping at the next wake.
	c.must(0, "wake", "--dir", c.dir, "--now")
	expectTimeout("session 3")
	// The operator moves the next wake: the monitor is told, counting from the last ping.
	c.must(0, "wake", "--dir", c.dir, "--at", "+3h")
	if k := hc.Kinds(); k[len(k)-1] != "update" {
		t.Fatalf("wake --at did not update the check: %v", k)
	}
	next := expectTimeout("wake --at")

	// The machine is gone: nothing of ours runs any more. The monitor alone says so, at
	// exactly the next wake plus grace.
	m.Stop(t)
	down := hc.DownAt()
	if down == nil || math.Abs(down.Sub(next.Add(grace*time.Second)).Seconds()) > 1 {
		t.Fatalf("the stand-in goes down at %v; want the next wake %s plus grace %ds", down, next.Format(time.RFC3339), grace)
	}
	if s := hc.StatusAt(next.Add(-time.Second)); s != "up" {
		t.Fatalf("before the next wake the check is %s, want up", s)
	}
	if s := hc.StatusAt(next.Add(grace*time.Second - 2*time.Second)); s != "grace" {
		t.Fatalf("within grace after the missed wake the check is %s, want grace", s)
	}
	if s := hc.StatusAt(next.Add(grace*time.Second + time.Second)); s != "down" {
		t.Fatalf("after the next wake plus grace the check is %s, want down", s)
	}

	// validate reads the check back as a step.
	m.Restart(t)
	m.WaitIdle(t, time.Minute, "cryo-*") // the boot unit's wake (nothing due) has come and gone
	c.env = append(fixture.Env(m), "HC_API_KEY="+hc.Key)
	out := c.stdout("validate", "--dir", c.dir, "--json")
	var v struct {
		Checks []struct {
			Step   int    `json:"step"`
			Status string `json:"status"`
			Detail string `json:"detail"`
		} `json:"checks"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("validate --json: %v\n%s", err, out)
	}
	found := false
	for _, ch := range v.Checks {
		if ch.Step == 9 {
			found = true
			timeout, _ := hc.Timeout()
			if ch.Status != "pass" || !strings.Contains(ch.Detail, "timeout "+itoa(timeout)+"s") {
				t.Fatalf("validate's heartbeat step: %+v (the monitor holds %ds)", ch, timeout)
			}
		}
	}
	if !found {
		t.Fatalf("validate shows no heartbeat step:\n%s", out)
	}

	// pause pauses the check (no false alarm while the operator is away); cancel too.
	c.must(0, "pause", "--dir", c.dir)
	if k := hc.Kinds(); k[len(k)-1] != "pause" {
		t.Fatalf("after pause the monitor got %v", k)
	}
	c.must(0, "resume", "--dir", c.dir)
	c.must(0, "cancel", "--dir", c.dir)
	if k := hc.Kinds(); k[len(k)-1] != "pause" || hc.StatusAt(next.Add(48*time.Hour)) != "paused" {
		t.Fatalf("after cancel the monitor got %v and says %s, want a pause", k, hc.StatusAt(next.Add(48*time.Hour)))
	}
}

// A monitor that cannot be reached never stops a session, and status says so.
func TestHeartbeatUnreachableShownInStatus(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	// A port nothing listens on: take one, then close it.
	hc := hctest.Start(t)
	dead := hc.PingURL
	hc.Close()
	agent := "#!/bin/sh\necho \"[CRYO:EXIT 0] fine\"\necho \"[CRYO:WAKE +2h]\"\n"
	c := newTrial(t, m, "agent = \"./agent.sh\"\n[heartbeat]\nurl = \""+dead+"\"\n", agent, nil)
	began := time.Now()
	c.start(0)
	if took := time.Since(began); took > 40*time.Second {
		t.Fatalf("start took %s with the monitor down", took)
	}
	s := c.status()
	if s.Phase != "armed" {
		t.Fatalf("phase %s, want armed", s.Phase)
	}
	out := c.stdout("status", "--dir", c.dir, "--json")
	var hb struct {
		Heartbeat *struct {
			OK    bool   `json:"ok"`
			Error string `json:"error"`
		} `json:"heartbeat"`
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(out), &hb); err != nil || hb.Heartbeat == nil || hb.Heartbeat.OK || hb.Heartbeat.Error == "" {
		t.Fatalf("status --json heartbeat: %+v (%v)\n%s", hb.Heartbeat, err, out)
	}
	if !strings.Contains(strings.Join(hb.Warnings, "\n"), "heartbeat: the monitor did not take") {
		t.Fatalf("status warnings %q: want the heartbeat failure", hb.Warnings)
	}
	if strings.Contains(out, strings.TrimPrefix(dead, "http://")) {
		t.Fatalf("status shows the ping URL (anyone who has it can ping):\n%s", out)
	}
}

// summaries = "off" files nothing.
func TestSummariesOff(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	agent := "#!/bin/sh\necho \"[CRYO:EXIT 0] fine\"\necho \"[CRYO:WAKE +2h]\"\n"
	c := newTrial(t, m, "agent = \"./agent.sh\"\nsummaries = \"off\"\n", agent, nil)
	c.start(0)
	if items := c.outbox(); len(items) != 0 {
		t.Fatalf("summaries = \"off\" left %d outbox item(s)", len(items))
	}
	if _, err := os.Stat(filepath.Join(c.dir, "messages", "outbox")); err != nil {
		t.Fatal(err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// The session that completes the plan pings success and pauses the check: the monitor expects
// nothing more.
func TestHeartbeatPausedAtCompletion(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	hc := hctest.Start(t)
	toml := "agent = \"./agent.sh\"\n[heartbeat]\nurl = \"" + hc.PingURL + "\"\napi_url = \"" + hc.URL + "\"\napi_key_env = \"HC_API_KEY\"\ncheck = \"" + hc.UUID + "\"\n"
	c := newTrial(t, m, toml, "#!/bin/sh\necho \"[CRYO:EXIT 0] all done\"\n", nil)
	c.env = append(c.env, "HC_API_KEY="+hc.Key)
	c.start(0)
	if got, want := hc.Kinds(), []string{"start", "success", "pause"}; !slices.Equal(got, want) {
		t.Fatalf("the completing session sent %v, want %v", got, want)
	}
	if s := hc.StatusAt(time.Now().Add(365 * 24 * time.Hour)); s != "paused" {
		t.Fatalf("a year on the check is %s, want paused", s)
	}
}

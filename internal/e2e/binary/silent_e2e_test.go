package binary

// Issue 12, "Nothing stops silently": every way a plan was seen to stop, or a message to go
// unanswered, with nobody told, tried end to end: the built binary, a private systemd user
// manager (timer/systemdtest), a real SMTP server (aiosmtpd, internal/mailtest) and a webhook
// on 127.0.0.1 that records what it is sent. Each test is named after the item
// (TestSilent02StateStaysReadable ... TestSilent19BusRedialled); item 1 (a full disk, an
// unwritable outbox) is TestDiskTrouble in disk_test.go, item 20 (the default agent outside its
// chamber) is TestAgentOutsideClaude, TestAgentOutsideCodex and TestAgentOutsideOpencode in
// agents_e2e_test.go. docs/RELIABILITY.md has the table of them all.
//
// Every wait is bounded and polls for the thing it waits for; where a test must show that
// something did NOT happen (a second mail), it first waits for the event that would have caused
// it (the redelivery record gone, the alert timer removed) instead of sleeping.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/internal/mailtest"
	"github.com/cryochamber/cryochamber/message"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// alertHook is a webhook on 127.0.0.1 that records every request. When hold is set, each
// request waits for release (a webhook that hangs) before it is answered.
type alertHook struct {
	URL string

	mu      sync.Mutex
	bodies  []string
	arrived chan struct{} // one send per request, as it arrives (buffered)
	hold    bool
	release chan struct{}
	srv     *httptest.Server
}

func startAlertHook(t *testing.T, hold bool) *alertHook {
	t.Helper()
	h := &alertHook{arrived: make(chan struct{}, 1024), hold: hold, release: make(chan struct{})}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		h.mu.Lock()
		h.bodies = append(h.bodies, string(b))
		h.mu.Unlock()
		select {
		case h.arrived <- struct{}{}:
		default:
		}
		if h.hold {
			select {
			case <-h.release:
			case <-r.Context().Done():
			}
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	h.URL = h.srv.URL + "/hook"
	t.Cleanup(func() {
		h.unhold()
		h.srv.CloseClientConnections()
		h.srv.Close()
	})
	return h
}

// unhold answers every held request and every later one at once.
func (h *alertHook) unhold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hold {
		h.hold = false
		close(h.release)
	}
}

// alerts decodes what the webhook received (one JSON object per request).
func (h *alertHook) alerts() []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]any
	for _, b := range h.bodies {
		var m map[string]any
		if json.Unmarshal([]byte(b), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// withReason are the requests whose "reason" is reason.
func (h *alertHook) withReason(reason string) []map[string]any {
	var out []map[string]any
	for _, a := range h.alerts() {
		if a["reason"] == reason {
			out = append(out, a)
		}
	}
	return out
}

func (h *alertHook) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.bodies, "\n")
}

// trial is one chamber under one private user manager.
type trial struct {
	t   *testing.T
	m   *systemdtest.Manager
	env []string
	dir string
	bin string // the cryochamber binary the trial runs (fixture.Binary() unless a test installs a copy)
}

// newTrial writes a chamber (plan.md, cryo.toml, agent.sh and the extra files) in a fresh
// directory; files whose content starts with "#!" are executable.
func newTrial(t *testing.T, m *systemdtest.Manager, toml, agent string, extra map[string]string) *trial {
	t.Helper()
	files := fixture.Files{"plan.md": "Keep the garden watered.\n"}
	for k, v := range extra {
		files[k] = v
	}
	dir := fixture.Chamber(t, toml, agent, files)
	return &trial{t: t, m: m, env: fixture.Env(m), dir: dir, bin: fixture.Binary()}
}

// run runs the binary in the chamber and returns its exit status and output (stdout and
// stderr together), within 3 minutes.
func (c *trial) run(args ...string) (int, string) {
	c.t.Helper()
	r := c.cmd().Run(c.t, args...)
	return r.Code, r.Output
}

// cmd is how the trial runs its binary.
func (c *trial) cmd() fixture.Cmd {
	return fixture.Cmd{Binary: c.bin, Env: c.env, Dir: c.dir, Limit: 3 * time.Minute}
}

// must runs the binary and fails the test unless it exits with want.
func (c *trial) must(want int, args ...string) string {
	c.t.Helper()
	return c.cmd().Must(c.t, want, args...)
}

// stdout runs the binary and returns what it printed on stdout alone (for --json).
func (c *trial) stdout(args ...string) string {
	c.t.Helper()
	return c.cmd().Run(c.t, args...).Stdout
}

// start starts the chamber (session 1 runs) and expects exit status want.
func (c *trial) start(want int) string {
	c.t.Helper()
	return c.must(want, "start", filepath.Join(c.dir, "plan.md"))
}

// silentStatus is `status --json`, decoded (the fields both the old and the new binary print).
type silentStatus struct {
	Phase      string     `json:"phase"`
	State      string     `json:"state"`
	Session    int        `json:"session"`
	NextWake   *time.Time `json:"next_wake"`
	NextReason string     `json:"next_wake_reason"`
	Retrying   *time.Time `json:"retrying_since"`
	Watcher    string     `json:"inbox_watcher"`
	Timers     []struct {
		Kind  string     `json:"kind"`
		Armed *time.Time `json:"armed"`
		OS    *time.Time `json:"os_next"`
		Agree bool       `json:"agree"`
	} `json:"timers"`
	Upcoming []struct {
		Kind string    `json:"kind"`
		At   time.Time `json:"at"`
	} `json:"upcoming"`
	Holder *struct {
		PID   int       `json:"pid"`
		Since time.Time `json:"since"`
		Alive bool      `json:"alive"`
	} `json:"lock_holder"`
	Undelivered int      `json:"undelivered_alerts"`
	Warnings    []string `json:"warnings"`
	Last        *struct {
		Session int    `json:"session"`
		Exit    int    `json:"exit"`
		Reason  string `json:"reason"`
	} `json:"last"`
}

func (c *trial) status() silentStatus {
	c.t.Helper()
	out := c.stdout("status", "--dir", c.dir, "--json")
	var s silentStatus
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		_, all := c.run("status", "--dir", c.dir, "--json")
		c.t.Fatalf("status --json: %v\n%s", err, all)
	}
	return s
}

// osTimer is the next elapse the OS reports for the chamber's timer of kind, per status.
func (s silentStatus) osTimer(kind string) *time.Time {
	for _, t := range s.Timers {
		if t.Kind == kind {
			return t.OS
		}
	}
	return nil
}

// outbox reads every message of the chamber's outbox.
func (c *trial) outbox() []*message.Message {
	c.t.Helper()
	names, _ := fixture.MailNames(c.dir, message.OutboxDir)
	var out []*message.Message
	for _, n := range names {
		m, err := fixture.MailRead(c.dir, message.OutboxDir, n)
		if err != nil {
			c.t.Fatalf("outbox %s: %v", n, err)
		}
		out = append(out, m)
	}
	return out
}

// file reads a file of the chamber ("" when missing).
func (c *trial) file(name string) string {
	b, _ := os.ReadFile(filepath.Join(c.dir, name))
	return string(b)
}

// alertToml is the [[fallback]] part of a cryo.toml: a webhook (when hook is given) and an
// email (when smtp is given), in that order.
func alertToml(hook *alertHook, smtp *mailtest.SMTP) string {
	var b strings.Builder
	if hook != nil {
		fmt.Fprintf(&b, "\n[[fallback]]\naction = \"webhook\"\ntarget = %q\n", hook.URL)
	}
	if smtp != nil {
		fmt.Fprintf(&b, "\n[[fallback]]\naction = \"email\"\ntarget = \"operator@example.org\"\n")
		fmt.Fprintf(&b, "\n[email]\nhost = \"127.0.0.1\"\nport = %d\ntls = \"none\"\nfrom = \"cryochamber <cryo@example.org>\"\ntimeout = \"5s\"\n", smtp.Port)
	}
	return b.String()
}

// mailsWith are the mails smtp received whose subject or body contains s.
func mailsWith(smtp *mailtest.SMTP, s string) []mailtest.Received {
	var out []mailtest.Received
	for _, m := range smtp.Messages() {
		if strings.Contains(m.Header.Get("Subject"), s) || strings.Contains(m.Body, s) {
			out = append(out, m)
		}
	}
	return out
}

// okAgent answers every session: EXIT 0, a WAKE an hour on, and a REPLY when it was shown
// messages. It records each session's number in runs.txt.
const okAgent = `#!/bin/sh
echo "ran $CRYO_SESSION" >> runs.txt
for last; do :; done
echo "[CRYO:EXIT 0] session $CRYO_SESSION"
echo "[CRYO:WAKE +1h]"
case "$last" in *"Messages claimed"*) echo '[CRYO:REPLY "ok"]';; esac
`

// TestSilent07HundredMessages: a batch of 100 messages is answered, every one of them, by the
// agent's own REPLY (issue 12, item 7: from about 92 on, the reply's in-reply-to passed what a
// header holds, writing it failed, and none was answered).
func TestSilent07HundredMessages(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	agent := `#!/bin/sh
echo "[CRYO:EXIT 0] session $CRYO_SESSION"
echo "[CRYO:WAKE +1h]"
for last; do :; done
case "$last" in *"Messages claimed"*) echo '[CRYO:REPLY "read all of them, thank you"]';; esac
`
	c := newTrial(t, m, "agent = \"./agent.sh\"\nwatch_inbox = false\n", agent, nil)
	c.start(0)
	const n = 100
	for i := 0; i < n; i++ {
		c.must(0, "send", "--dir", c.dir, "--from", "alice", fmt.Sprintf("question %d", i))
	}
	sent, err := fixture.MailNames(c.dir, message.InboxDir)
	if err != nil || len(sent) != n {
		t.Fatalf("the inbox holds %d messages (%v), want %d", len(sent), err, n)
	}
	out := c.must(0, "wake", "--dir", c.dir, "--now")
	answered := map[string]int{}
	for _, r := range c.outbox() {
		if r.Kind != message.KindReply {
			continue
		}
		if r.From != "agent" || !strings.Contains(r.Body, "read all of them") {
			t.Errorf("reply %s from %q: %q, want the agent's REPLY", r.ID, r.From, r.Body)
		}
		for _, id := range r.InReplyTo {
			answered[id]++
		}
	}
	var wrong []string
	for _, name := range sent {
		if id := strings.TrimSuffix(name, ".md"); answered[id] != 1 {
			wrong = append(wrong, fmt.Sprintf("%s (%d times)", id, answered[id]))
		}
	}
	if len(wrong) > 0 {
		t.Fatalf("%d of %d messages not answered exactly once, e.g. %s; the wake said:\n%s", len(wrong), n, wrong[0], out)
	}
}

// TestSilent08CompletingSessionAnswers: the session that completes the plan answers the
// messages it claimed, and the completion is announced to the operator (item 8: complete()
// cleared the claims before the replies were built, so the REPLY had no in-reply-to).
func TestSilent08CompletingSessionAnswers(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	hook := startAlertHook(t, false)
	agent := `#!/bin/sh
echo '[CRYO:REPLY "all done, closing the plan"]'
echo "[CRYO:EXIT 0] the garden is finished"
`
	c := newTrial(t, m, "agent = \"./agent.sh\"\nwatch_inbox = false\n"+alertToml(hook, nil), agent, nil)
	// The message waits in the inbox before the plan starts: session 1 claims it.
	if err := os.MkdirAll(filepath.Join(c.dir, message.InboxDir), 0o700); err != nil {
		t.Fatal(err)
	}
	id, err := fixture.MailWrite(c.dir, message.InboxDir, &message.Message{From: "alice", Time: time.Now().UTC(), Body: "is it done?\n"})
	if err != nil {
		t.Fatal(err)
	}
	id = strings.TrimSuffix(id, ".md")
	out := c.start(0)
	if !strings.Contains(out, "plan complete") {
		t.Fatalf("start did not complete the plan:\n%s", out)
	}
	var reply *message.Message
	for _, r := range c.outbox() {
		if r.Kind == message.KindReply {
			reply = r
		}
	}
	if reply == nil || len(reply.InReplyTo) != 1 || reply.InReplyTo[0] != id || !strings.Contains(reply.Body, "all done") {
		t.Fatalf("the completing session's reply: %+v, want the agent's REPLY in reply to %s", reply, id)
	}
	// Completing the plan is never silent: a notice to the operator's target, and one in the
	// outbox.
	if got := hook.withReason("complete"); len(got) != 1 || !strings.Contains(fmt.Sprint(got[0]["message"]), "cryochamber start") {
		t.Errorf("completion notices at the webhook: %v", got)
	}
	notice := false
	for _, o := range c.outbox() {
		if o.Kind == message.KindNotice && strings.Contains(o.Body, "The plan is complete") {
			notice = true
		}
	}
	if !notice {
		t.Error("no completion notice in the outbox")
	}
}

// TestSilent10EarlyWakeKeepsPlan: a session woken early (here by `send --wake`, through the
// real wake service) that prints no WAKE keeps the plan's wake, and its prompt says so (item
// 10: it completed the whole plan, silently).
func TestSilent10EarlyWakeKeepsPlan(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	hook := startAlertHook(t, false)
	agent := `#!/bin/sh
echo "ran $CRYO_SESSION" >> runs.txt
for last; do :; done
if [ "$CRYO_SESSION" = 1 ]; then
	echo "[CRYO:EXIT 0] planted"
	echo "[CRYO:WAKE +3d]"
	exit 0
fi
printf '%s\n' "$last" > prompt-$CRYO_SESSION.txt
echo '[CRYO:REPLY "yes, on Thursday"]'
echo "[CRYO:EXIT 0] answered a question"
`
	c := newTrial(t, m, "agent = \"./agent.sh\"\nwatch_inbox = false\n"+alertToml(hook, nil), agent, nil)
	c.start(0)
	before := c.status()
	if before.NextWake == nil {
		t.Fatalf("no wake after session 1: %+v", before)
	}
	plan := *before.NextWake
	c.must(0, "send", "--dir", c.dir, "--wake", "will you water on Thursday?")
	fixture.WaitFor(t, 60*time.Second, "session 2, woken by send --wake, has finished", func() bool {
		s := c.status()
		return s.Session == 2 && s.Phase != "running"
	})
	s := c.status()
	if s.Phase != "armed" || s.NextWake == nil || !s.NextWake.Equal(plan) {
		t.Fatalf("after the early session: phase %s, next wake %v; want armed at the plan's wake %s", s.Phase, s.NextWake, plan)
	}
	if os := s.osTimer("wake"); os == nil || !os.Equal(plan) {
		t.Errorf("the OS wake timer is %v, want the plan's %s", os, plan)
	}
	if got := hook.withReason("complete"); len(got) != 0 {
		t.Errorf("the plan was announced complete: %v", got)
	}
	if p := c.file("prompt-2.txt"); !strings.Contains(p, "woken early") || !strings.Contains(p, "never ends the plan") {
		t.Errorf("the early session's prompt does not say its WAKE may be left out:\n%s", p)
	}
}

// TestSilent11InvalidMarkersNeverComplete: markers that do not parse, with EXIT 0, are a refusal
// with an END line (exit=2 reason=invalid), an alert, and never "plan complete" in validate's
// text or JSON; the same for a block without EXIT (item 11).
func TestSilent11InvalidMarkersNeverComplete(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	hook := startAlertHook(t, false)
	agent := `#!/bin/sh
echo "[CRYO:WAKE banana]"
echo "[CRYO:EXIT 0] all good"
`
	c := newTrial(t, m, "agent = \"./agent.sh\"\nwatch_inbox = false\n"+alertToml(hook, nil), agent, nil)
	out := c.start(1)
	if !strings.Contains(out, "refused") {
		t.Errorf("start did not refuse:\n%s", out)
	}
	if log := c.file("cryo.log"); !strings.Contains(log, "exit=2 reason=invalid") {
		t.Errorf("the block has no END line exit=2 reason=invalid:\n%s", log)
	}
	checkNotComplete := func(when string) {
		t.Helper()
		code, text := c.run("validate", "--dir", c.dir)
		if code == 0 || strings.Contains(strings.ToLower(text), "plan complete") {
			t.Errorf("%s: validate exit %d, says:\n%s", when, code, text)
		}
		js := c.stdout("validate", "--dir", c.dir, "--json")
		var v struct {
			OK           bool `json:"ok"`
			PlanComplete bool `json:"plan_complete"`
		}
		if err := json.Unmarshal([]byte(js), &v); err != nil {
			t.Fatalf("%s: validate --json: %v\n%s", when, err, js)
		}
		if v.OK || v.PlanComplete {
			t.Errorf("%s: validate --json says ok %v, plan_complete %v:\n%s", when, v.OK, v.PlanComplete, js)
		}
	}
	checkNotComplete("WAKE banana")
	if got := hook.withReason("refused"); len(got) != 1 {
		t.Errorf("refusal alerts: %v", hook.alerts())
	}
	// A block without EXIT is no answer either.
	if err := os.WriteFile(filepath.Join(c.dir, "agent.sh"), []byte("#!/bin/sh\necho \"working on it\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c.start(1)
	checkNotComplete("no EXIT")
}

// failingAgent is an agent CLI whose API key was revoked: it prints the error on stderr and
// exits 1 without markers.
const failingAgent = `#!/bin/sh
echo "ran $CRYO_SESSION" >> runs.txt
if [ -e broken ]; then
	echo "Error: Invalid API key · Please run /login" >&2
	exit 1
fi
echo "[CRYO:EXIT 0] session $CRYO_SESSION"
echo "[CRYO:WAKE +1h]"
`

// TestSilent16SlowWebhookDoesNotStarveEmail: a webhook that hangs, listed first, does not keep
// the email from being sent (item 16: targets were tried in turn under one budget, and the
// hanging webhook used it all).
func TestSilent16SlowWebhookDoesNotStarveEmail(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	hook := startAlertHook(t, true)
	smtp := mailtest.StartSMTP(t)
	toml := "agent = \"./agent.sh\"\nwatch_inbox = false\nmax_retries = 0\n\n[webhook]\ntimeout = \"60s\"\nretries = 0\n" + alertToml(hook, smtp)
	c := newTrial(t, m, toml, failingAgent, map[string]string{"broken": ""})
	type result struct {
		code int
		out  string
	}
	done := make(chan result, 1)
	go func() {
		code, out := c.run("start", filepath.Join(c.dir, "plan.md"))
		done <- result{code, out}
	}()
	// The webhook holds its request; the mail must arrive meanwhile.
	select {
	case <-hook.arrived:
	case r := <-done:
		t.Fatalf("start finished (%d) before the webhook was called:\n%s", r.code, r.out)
	case <-time.After(90 * time.Second):
		t.Fatal("the webhook was not called within 90s")
	}
	fixture.WaitFor(t, 45*time.Second, "the email alert arrives while the webhook hangs", func() bool {
		return len(mailsWith(smtp, "Invalid API key")) > 0
	})
	hook.unhold()
	select {
	case r := <-done:
		if !strings.Contains(r.out, "email operator@example.org: delivered") {
			t.Errorf("start does not report the email as delivered:\n%s", r.out)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("start did not finish after the webhook answered")
	}
}

// TestSilent17AgentFallbackMessage: the agent's FALLBACK message to the operator's own target
// reaches it, in the alert of a later session that failed (item 17: the operator's entry
// came first, without a message, and the marker's was dropped as a duplicate).
func TestSilent17AgentFallbackMessage(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	hook := startAlertHook(t, false)
	smtp := mailtest.StartSMTP(t)
	agent := `#!/bin/sh
if [ "$CRYO_SESSION" = 1 ]; then
	echo "[CRYO:FALLBACK webhook ` + hook.URL + ` \"the valve key is under the blue pot\"]"
	echo "[CRYO:FALLBACK email operator@example.org \"call Bob on 555-0100 if I stop\"]"
	echo "[CRYO:EXIT 0] planted"
	echo "[CRYO:WAKE +1h]"
	exit 0
fi
echo "Error: Invalid API key" >&2
exit 1
`
	toml := "agent = \"./agent.sh\"\nwatch_inbox = false\nmax_retries = 0\n" + alertToml(hook, smtp)
	c := newTrial(t, m, toml, agent, nil)
	c.start(0)
	c.must(1, "wake", "--dir", c.dir, "--now")
	var got []map[string]any
	for _, a := range hook.alerts() {
		if a["reason"] != "complete" && a["reason"] != "recovered" {
			got = append(got, a)
		}
	}
	if len(got) != 1 || !strings.Contains(fmt.Sprint(got[0]["message"]), "the valve key is under the blue pot") {
		t.Errorf("the webhook alert lacks the agent's FALLBACK message: %v", got)
	}
	if mails := mailsWith(smtp, "call Bob on 555-0100"); len(mails) != 1 {
		t.Errorf("the email alert lacks the agent's FALLBACK message: %d mails with it of %d", len(mails), len(smtp.Messages()))
	}
}

// TestSilent18AlertsSayWhy: an alert quotes why the agent failed (its last lines: here
// "Invalid API key"), names the host, and gives the exact command to resume (item 18).
func TestSilent18AlertsSayWhy(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	hook := startAlertHook(t, false)
	smtp := mailtest.StartSMTP(t)
	toml := "agent = \"./agent.sh\"\nwatch_inbox = false\nmax_retries = 0\n" + alertToml(hook, smtp)
	c := newTrial(t, m, toml, failingAgent, map[string]string{"broken": ""})
	c.start(1)
	host, err := os.Hostname()
	if err != nil || host == "" {
		t.Fatalf("hostname: %q %v", host, err)
	}
	resume := "cryochamber wake --dir " + c.dir + " --now"
	got := hook.alerts()
	if len(got) != 1 {
		t.Fatalf("webhook requests: %v", got)
	}
	msg := fmt.Sprint(got[0]["message"])
	for _, want := range []string{"Invalid API key", resume} {
		if !strings.Contains(msg, want) {
			t.Errorf("the webhook alert's message lacks %q:\n%s", want, msg)
		}
	}
	if got[0]["host"] != host || !strings.Contains(fmt.Sprint(got[0]["text"]), "on "+host) {
		t.Errorf("the webhook alert does not name the host %q: %v", host, got[0])
	}
	mails := smtp.Messages()
	if len(mails) != 1 {
		t.Fatalf("%d mails, want 1", len(mails))
	}
	for _, want := range []string{"Invalid API key", resume, "Host:    " + host} {
		if !strings.Contains(mails[0].Body, want) {
			t.Errorf("the email alert lacks %q:\n%s", want, mails[0].Body)
		}
	}
}

// runWithin runs the binary with env and a deadline of its own; timedOut reports that it was
// still running at the deadline (and was killed); out is stdout and stderr together.
func runWithin(t *testing.T, binary string, env []string, dir string, limit time.Duration, args ...string) (code int, out string, timedOut bool) {
	t.Helper()
	r := fixture.Cmd{Binary: binary, Env: env, Dir: dir, Limit: limit}.Try(args...)
	if r.Err != nil {
		t.Fatalf("%v: %v", args, r.Err)
	}
	return r.Code, r.Output, r.TimedOut
}

// wakeAt prints, in an agent script, a WAKE the given number of seconds from now (absolute, in
// UTC, so that the test knows the instant).
func wakeAt(seconds int) string {
	return fmt.Sprintf(`echo "[CRYO:WAKE $(date -u -d "@$(( $(date +%%s) + %d ))" +%%Y-%%m-%%dT%%H:%%M:%%SZ)]"`, seconds)
}

// hangAgent answers like okAgent, except in the session that finds the file "hang": it records
// its parent's PID (the wake's) in wake.pid and hangs, for the test to kill the wake.
const hangAgent = `#!/bin/sh
echo "ran $CRYO_SESSION" >> runs.txt
for last; do :; done
if [ -e hang ]; then
	rm hang
	echo "working on the message"
	echo $PPID > wake.pid
	exec sleep 600
fi
echo "[CRYO:EXIT 0] session $CRYO_SESSION"
echo "[CRYO:WAKE +1h]"
case "$last" in *"Messages claimed"*) echo '[CRYO:REPLY "ok"]';; esac
`

// TestSilent05KilledEarlySession: a session woken by a message (the inbox watcher), by
// `send --wake` or by `wake --now` whose process is killed with SIGKILL is recovered by its own
// dead-man within seconds of fallback_after, and status says what is armed meanwhile (item 5:
// nothing recovered it until the plan's next WAKE, and status said "next wake: none").
func TestSilent05KilledEarlySession(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	for _, how := range []string{"message", "send-wake", "wake-now"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			hook := startAlertHook(t, false)
			watch := how == "message"
			toml := fmt.Sprintf("agent = \"./agent.sh\"\nwatch_inbox = %v\nfallback_after = \"20s\"\n", watch) + alertToml(hook, nil)
			// Unconfined: hangAgent records the wake's PID for the test to kill, and a caged
			// session cannot see it (its PID namespace holds only itself).
			c := newTrial(t, m, toml+"\n[sandbox]\nmode = \"off\"\n", hangAgent, nil)
			c.start(0)
			if err := os.WriteFile(filepath.Join(c.dir, "hang"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			switch how {
			case "message":
				c.must(0, "send", "--dir", c.dir, "are you there?")
			case "send-wake":
				c.must(0, "send", "--dir", c.dir, "--wake", "are you there?")
			case "wake-now":
				c.must(0, "send", "--dir", c.dir, "are you there?")
				c.cmd().Start(t, "wake", "--dir", c.dir, "--now") // killed below
			}
			var pid int
			deadline := time.Now().Add(30 * time.Second)
			for {
				// The wake records the agent's group (with the session's dead-man) as the agent
				// starts, which may be a moment after the agent wrote wake.pid: a kill before it
				// leaves the claim alone, and status then rightly shows the plan's dead-man.
				if _, err := fmt.Sscan(c.file("wake.pid"), &pid); err == nil && pid > 0 {
					if st, err := fixture.State(m, c.dir); err == nil && st.Holder != nil && st.Holder.Agent != nil {
						break
					}
				}
				if time.Now().After(deadline) {
					_, st := c.run("status", "--dir", c.dir)
					t.Fatalf("the session did not start within 30s; runs %q; status:\n%s\njournal:\n%s", c.file("runs.txt"), st, m.Journal(t))
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatalf("kill -9 %d: %v", pid, err)
			}
			// Dead and reaped by its parent (the user manager, or this test): until then its PID
			// is a zombie's, which status, asking with signal 0, rightly sees as still there.
			fixture.WaitFor(t, 30*time.Second, "the wake is dead and reaped", func() bool {
				return !fixture.Exists(fmt.Sprintf("/proc/%d", pid))
			})
			// While it is dead, status says what will recover it: the session's dead-man.
			s := c.status()
			var deadman *time.Time
			for _, u := range s.Upcoming {
				if u.Kind == "fallback" {
					at := u.At
					deadman = &at
				}
			}
			if s.Phase != "running" || s.Holder == nil || s.Holder.Alive || deadman == nil ||
				deadman.Before(s.Holder.Since.Add(20*time.Second)) || deadman.After(s.Holder.Since.Add(22*time.Second)) {
				t.Fatalf("after the kill: %+v, holder %+v, dead-man %v; want running, the holder dead, a dead-man fallback_after (20s) after the session started", s, s.Holder, deadman)
			}
			began := s.Holder.Since
			if os := s.osTimer("fallback"); os == nil || !os.Equal(*deadman) {
				t.Errorf("the OS fallback timer is at %v, want %s", os, deadman)
			}
			_, text := c.run("status", "--dir", c.dir)
			if !strings.Contains(text, "fallback") || !strings.Contains(text, "DEAD") {
				t.Errorf("status does not say the holder is dead and the dead-man is armed:\n%s", text)
			}
			// The dead-man recovers it: an alert, the message answered, a retry armed.
			fixture.WaitFor(t, 60*time.Second, "the dead-man alerts and recovers the session", func() bool {
				s := c.status()
				return len(hook.withReason("crashed")) > 0 && s.Phase == "armed"
			})
			if late := time.Since(began); late > 50*time.Second {
				t.Errorf("recovered %s after the session started (fallback_after 20s)", late.Round(time.Second))
			}
			s = c.status()
			if s.NextWake == nil || s.osTimer("wake") == nil || !s.osTimer("wake").Equal(*s.NextWake) {
				t.Errorf("after the recovery: next wake %v, OS wake timer %v", s.NextWake, s.osTimer("wake"))
			}
			replies := 0
			for _, o := range c.outbox() {
				if o.Kind == message.KindReply && len(o.InReplyTo) == 1 {
					replies++
				}
			}
			if replies != 1 {
				t.Errorf("the claimed message got %d replies, want 1", replies)
			}
		})
	}
}

// TestSilent06MessageDuringAlert: a message sent while the wake service is still delivering an
// alert (to a slow webhook) is answered within seconds, not at the next WAKE (item 6: systemd
// merged the inbox watcher's start into the running service, and the message waited).
func TestSilent06MessageDuringAlert(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	hook := startAlertHook(t, true)
	agent := `#!/bin/sh
echo "ran $CRYO_SESSION" >> runs.txt
for last; do :; done
case "$last" in
*"first question"*)
	echo '[CRYO:REPLY "looking into it"]'
	echo "[CRYO:EXIT 2] the pump is broken"
	echo "[CRYO:WAKE +1h]"
	exit 0;;
*"Messages claimed"*)
	echo '[CRYO:REPLY "answered"]';;
esac
echo "[CRYO:EXIT 0] session $CRYO_SESSION"
echo "[CRYO:WAKE +1h]"
`
	c := newTrial(t, m, "agent = \"./agent.sh\"\nwatch_inbox = true\n"+alertToml(hook, nil), agent, nil)
	c.start(0)
	c.must(0, "send", "--dir", c.dir, "first question")
	select {
	case <-hook.arrived: // session 2 ended with EXIT 2: its alert hangs at the webhook
	case <-time.After(60 * time.Second):
		t.Fatalf("session 2 did not alert; runs: %q", c.file("runs.txt"))
	}
	if s := c.status(); s.Session != 2 {
		t.Fatalf("the alert came from session %d, want 2", s.Session)
	}
	c.must(0, "send", "--dir", c.dir, "second question")
	hook.unhold()
	fixture.WaitFor(t, 60*time.Second, "the second question is answered", func() bool {
		for _, o := range c.outbox() {
			if o.Kind == message.KindReply && o.Body == "answered\n" {
				return true
			}
		}
		return false
	})
	if s := c.status(); s.Session != 3 || s.Phase != "armed" {
		t.Errorf("after the answer: session %d phase %s, want session 3 armed", s.Session, s.Phase)
	}
}

// TestSilent09FailuresNeverEndPlan: failures after the fast retries never end the plan: the
// chamber keeps retrying every slow_retry (the real timer fires the next one), with one alert
// as it enters that state, a notice in the outbox per later failure, "retrying every 1m since
// ..." in status and ps, and one "recovered" notice when a session succeeds (item 9: after
// max_retries the chamber was failed, with nothing armed).
func TestSilent09FailuresNeverEndPlan(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	hook := startAlertHook(t, false)
	toml := "agent = \"./agent.sh\"\nwatch_inbox = false\nmax_retries = 0\nslow_retry = \"1m\"\n" + alertToml(hook, nil)
	c := newTrial(t, m, toml, failingAgent, map[string]string{"broken": ""})
	c.start(1)
	s := c.status()
	if s.Phase != "armed" || s.Retrying == nil || s.NextWake == nil {
		t.Fatalf("after the first failure: %+v; want armed and retrying", s)
	}
	_, text := c.run("status", "--dir", c.dir)
	if !strings.Contains(text, "every 1m since") {
		t.Errorf("status does not say it is retrying every 1m:\n%s", text)
	}
	_, ps := c.run("ps")
	if !strings.Contains(ps, "retrying every 1m since") {
		t.Errorf("ps does not say it is retrying every 1m:\n%s", ps)
	}
	if n := len(hook.alerts()); n != 1 {
		t.Fatalf("%d alerts after entering slow retry, want 1: %s", n, hook)
	}
	// The timer fires a minute later: session 2 fails too; no second alert, a notice.
	fixture.WaitFor(t, 100*time.Second, "the slow retry runs session 2", func() bool {
		s := c.status()
		return s.Session == 2 && s.Phase == "armed"
	})
	s = c.status()
	if s.Retrying == nil || s.NextWake == nil || !s.NextWake.After(time.Now()) {
		t.Fatalf("after session 2 failed: %+v; want still retrying", s)
	}
	since := *s.Retrying
	if n := len(hook.alerts()); n != 1 {
		t.Errorf("%d alerts after the second failure, want still 1: %s", n, hook)
	}
	notices := 0
	for _, o := range c.outbox() {
		if o.Kind == message.KindNotice && strings.Contains(o.Body, "Still retrying every 1m") {
			notices++
		}
	}
	if notices != 1 {
		t.Errorf("%d 'still retrying' notices in the outbox, want 1", notices)
	}
	// The cause is fixed, and the operator tries at once as the alert said: the session
	// succeeds, and the operator is told once that the chamber recovered.
	if err := os.Remove(filepath.Join(c.dir, "broken")); err != nil {
		t.Fatal(err)
	}
	c.must(0, "wake", "--dir", c.dir, "--now")
	s = c.status()
	if s.Retrying != nil || s.Last == nil || s.Last.Exit != 0 {
		t.Errorf("after session 3 succeeded: %+v", s)
	}
	if got := hook.withReason("recovered"); len(got) != 1 || !strings.Contains(fmt.Sprint(got[0]["message"]), "began "+since.UTC().Format(time.RFC3339)) {
		t.Errorf("recovered notices: %d, want 1 that says when the failures began (%s): %s", len(got), since.UTC().Format(time.RFC3339), hook)
	}
	if n := len(hook.alerts()); n != 2 {
		t.Errorf("%d requests to the webhook in all, want 2 (one alert, one recovered notice): %s", n, hook)
	}
}

// TestSilent14SMTPOutage: an alert whose mail server is down when it is sent arrives once the
// server is back, by the chamber's alert timer, exactly once (item 14: one attempt, never
// resent).
func TestSilent14SMTPOutage(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	smtp := mailtest.StartSMTP(t)
	smtp.Stop()
	toml := "agent = \"./agent.sh\"\nwatch_inbox = false\nmax_retries = 0\n" + alertToml(nil, smtp)
	c := newTrial(t, m, toml, failingAgent, map[string]string{"broken": ""})
	out := c.start(1)
	if !strings.Contains(out, "FAILED") {
		t.Errorf("start does not say the mail failed:\n%s", out)
	}
	s := c.status()
	alertTimer := false
	for _, u := range s.Upcoming {
		alertTimer = alertTimer || u.Kind == "alert"
	}
	if s.Undelivered != 1 || !alertTimer || s.osTimer("alert") == nil {
		t.Fatalf("after the failed delivery: %d undelivered, alert timer %v (OS %v)", s.Undelivered, alertTimer, s.osTimer("alert"))
	}
	smtp.Start()
	fixture.WaitFor(t, 150*time.Second, "the mail arrives by the alert timer", func() bool { return len(smtp.Messages()) > 0 })
	fixture.WaitFor(t, 30*time.Second, "nothing is left to deliver and the alert timer is gone", func() bool {
		s := c.status()
		return s.Undelivered == 0 && s.osTimer("alert") == nil
	})
	// A command that takes the lock (and would redeliver what is pending) sends nothing more.
	c.must(0, "wake", "--dir", c.dir)
	mails := smtp.Messages()
	if len(mails) != 1 || !strings.Contains(mails[0].Body, "Invalid API key") {
		t.Fatalf("%d mails, want the one alert", len(mails))
	}
}

// TestSilent15BinaryRemoved: when the binary the timers run is removed (an upgrade, a
// cleanup), the dead-man runs the copy pinned at start, alerts, and re-arms the wake, which
// then runs (item 15: both units failed at exec, forever, and nobody was told).
func TestSilent15BinaryRemoved(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	hook := startAlertHook(t, false)
	installed := filepath.Join(t.TempDir(), "opt", "cryochamber")
	if err := os.MkdirAll(filepath.Dir(installed), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(fixture.Binary())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(installed, data, 0o755); err != nil {
		t.Fatal(err)
	}
	agent := `#!/bin/sh
echo "ran $CRYO_SESSION" >> runs.txt
echo "[CRYO:EXIT 0] session $CRYO_SESSION"
if [ "$CRYO_SESSION" = 1 ]; then
	` + wakeAt(20) + `
else
	echo "[CRYO:WAKE +1h]"
fi
`
	c := newTrial(t, m, "agent = \"./agent.sh\"\nwatch_inbox = false\nfallback_after = \"15s\"\nmin_interval = \"1s\"\n"+alertToml(hook, nil), agent, nil)
	c.bin = installed
	c.start(0)
	due := c.status().NextWake
	if due == nil {
		t.Fatal("no wake armed")
	}
	if err := os.Remove(installed); err != nil {
		t.Fatal(err)
	}
	c.bin = fixture.Binary() // the operator's shell now finds another build; the timers do not
	fixture.WaitFor(t, time.Until(due.Add(60*time.Second)), "the dead-man alerts that the wake did not run", func() bool {
		return len(hook.withReason("missed")) > 0
	})
	if msg := fmt.Sprint(hook.withReason("missed")[0]["message"]); !strings.Contains(msg, installed) || !strings.Contains(msg, "gone") {
		t.Errorf("the alert does not say the binary is gone:\n%s", msg)
	}
	fixture.WaitFor(t, 60*time.Second, "the re-armed wake runs session 2", func() bool {
		s := c.status()
		return s.Session == 2 && s.Phase == "armed"
	})
	if runs := c.file("runs.txt"); runs != "ran 1\nran 2\n" {
		t.Errorf("runs: %q", runs)
	}
}

// TestSilent06MessageDuringReload: a message sent while the user manager reloads (as it does
// whenever any chamber of the user arms, and here over and over) starts a session within
// seconds (found by these tests: the inbox watcher's event was lost in the reload, and the
// message waited for the next WAKE although `send` said "a session starts within seconds").
func TestSilent06MessageDuringReload(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	c := newTrial(t, m, "agent = \"./agent.sh\"\nwatch_inbox = true\n", okAgent, nil)
	c.start(0)
	stop := make(chan struct{})
	reloads := make(chan int, 2)
	var once sync.Once
	halt := func() int { once.Do(func() { close(stop) }); return <-reloads }
	t.Cleanup(func() { halt() })
	go func() {
		n := 0
		defer func() { reloads <- n; reloads <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			cmd := exec.Command("systemctl", "--user", "daemon-reload")
			cmd.Env = c.env
			if cmd.Run() == nil {
				n++
			}
		}
	}()
	const n = 10
	for i := 0; i < n; i++ {
		c.must(0, "send", "--dir", c.dir, fmt.Sprintf("question %d", i))
		fixture.WaitFor(t, 30*time.Second, fmt.Sprintf("question %d is answered", i), func() bool {
			names, _ := fixture.MailNames(c.dir, message.InboxDir)
			return len(names) == 0 && c.status().Phase == "armed"
		})
	}
	if k := halt(); k < n {
		t.Errorf("the manager reloaded only %d times", k)
	}
	if s := c.status(); s.Session != n+1 {
		t.Errorf("session %d after %d messages, want %d", s.Session, n, n+1)
	}
}

// TestSilent03ChamberMoved: a chamber moved or renamed while armed, and one on a file system
// that is not mounted yet when its timer fires, alerts from the private state alone, says what
// to do, and carries on when the directory is back (item 3: "not a chamber", 0 alerts).
func TestSilent03ChamberMoved(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	t.Run("moved", func(t *testing.T) {
		hook := startAlertHook(t, false)
		smtp := mailtest.StartSMTP(t)
		c := newTrial(t, m, "agent = \"./agent.sh\"\nwatch_inbox = false\n"+alertToml(hook, smtp), okAgent, nil)
		c.start(0)
		old := c.dir
		moved := old + "-moved"
		if err := os.Rename(old, moved); err != nil {
			t.Fatal(err)
		}
		// What the units, which name the old path, run.
		c.dir = filepath.Dir(old)
		code, out := c.run("wake", "--dir", old)
		if code == 0 || !strings.Contains(out, old) || !strings.Contains(out, "missing") {
			t.Errorf("wake --dir OLD: exit %d:\n%s", code, out)
		}
		code, out = c.run("fallback", "--dir", old)
		if code == 0 || !strings.Contains(out, "missing") {
			t.Errorf("fallback --dir OLD: exit %d:\n%s", code, out)
		}
		got := hook.withReason("missing")
		if len(got) != 1 {
			t.Fatalf("%d 'missing' alerts at the webhook, want 1: %s", len(got), hook)
		}
		msg := fmt.Sprint(got[0]["message"])
		for _, want := range []string{old + " is missing", "cryochamber cancel --dir " + old, "cryochamber start NEW/PATH/plan.md"} {
			if !strings.Contains(msg, want) {
				t.Errorf("the alert lacks %q:\n%s", want, msg)
			}
		}
		if mails := mailsWith(smtp, "cryochamber cancel --dir "+old); len(mails) != 1 {
			t.Errorf("%d mails say what to do, want 1", len(mails))
		}
		_, st := c.run("status", "--dir", old)
		if !strings.Contains(st, "missing") {
			t.Errorf("status --dir OLD does not say it is missing:\n%s", st)
		}
		_, ps := c.run("ps")
		if !strings.Contains(ps, old+": the chamber directory is missing") {
			t.Errorf("ps does not say it is missing:\n%s", ps)
		}
		// What the alert says to do works.
		c.must(0, "cancel", "--dir", old)
		c.dir = moved
		c.must(0, "start", filepath.Join(moved, "plan.md"))
		if s := c.status(); s.Phase != "armed" || s.osTimer("wake") == nil {
			t.Errorf("started at the new place: %+v", s)
		}
		units, _ := filepath.Glob(filepath.Join(m.UnitDir, timerIDGlob(old)))
		if len(units) != 0 {
			t.Errorf("units of the old path left: %v", units)
		}
	})
	t.Run("not-mounted-yet", func(t *testing.T) {
		hook := startAlertHook(t, false)
		agent := `#!/bin/sh
echo "ran $CRYO_SESSION" >> runs.txt
echo "[CRYO:EXIT 0] session $CRYO_SESSION"
` + wakeAt(15) + "\n"
		c := newTrial(t, m, "agent = \"./agent.sh\"\nwatch_inbox = false\nmin_interval = \"1s\"\n"+alertToml(hook, nil), agent, nil)
		c.start(0)
		away := c.dir + ".unmounted"
		if err := os.Rename(c.dir, away); err != nil {
			t.Fatal(err)
		}
		// The real wake timer fires while the directory is not there.
		fixture.WaitFor(t, 60*time.Second, "the wake timer fires and alerts that the chamber is missing", func() bool {
			return len(hook.withReason("missing")) == 1
		})
		if err := os.Rename(away, c.dir); err != nil {
			t.Fatal(err)
		}
		s := c.status()
		if s.Phase != "armed" || s.NextWake == nil || !s.NextWake.After(time.Now()) || s.osTimer("wake") == nil || !s.osTimer("wake").Equal(*s.NextWake) {
			t.Fatalf("after the mount came up: %+v; want the retry armed in the OS", s)
		}
		out := c.must(0, "wake", "--dir", c.dir) // as a stray timer would: not due yet
		if !strings.Contains(out, "the chamber directory is back") {
			t.Errorf("wake does not notice the directory is back:\n%s", out)
		}
		if s := c.status(); s.State == "missing" || len(s.Warnings) > 1 {
			t.Errorf("status after the directory came back: %+v", s)
		}
	})
}

// timerIDGlob matches the unit files of the chamber at dir.
func timerIDGlob(dir string) string {
	return timer.ID(dir) + "*"
}

// TestSilent04DotCryoIsAFile: `.cryo` replaced by a plain file stops nothing: the dead-man
// check runs, and the next session runs too, with the file moved aside and a warning (item 4:
// every lock attempt failed, the dead-man's included, before alerting; then every session
// failed writing its prompt file there).
func TestSilent04DotCryoIsAFile(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	hook := startAlertHook(t, false)
	c := newTrial(t, m, "agent = \"./agent.sh\"\nwatch_inbox = false\n"+alertToml(hook, nil), okAgent, nil)
	c.start(0)
	if err := os.RemoveAll(filepath.Join(c.dir, ".cryo")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.dir, ".cryo"), []byte("not a directory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := c.must(0, "fallback", "--dir", c.dir); strings.Contains(out, "alert") || len(hook.alerts()) != 0 {
		t.Errorf("the dead-man check alerted:\n%s", out)
	}
	out := c.must(0, "wake", "--dir", c.dir, "--now")
	if !strings.Contains(out, ".cryo was not a directory") {
		t.Errorf("wake does not warn that .cryo was moved aside:\n%s", out)
	}
	if s := c.status(); s.Session != 2 || s.Phase != "armed" || s.Last == nil || s.Last.Exit != 0 {
		t.Errorf("after the wake: %+v", s)
	}
	if fi, err := os.Lstat(filepath.Join(c.dir, ".cryo")); err != nil || !fi.IsDir() {
		t.Errorf(".cryo is not a directory again: %v %v", fi, err)
	}
	aside, _ := filepath.Glob(filepath.Join(c.dir, ".cryo.moved-aside-*"))
	if len(aside) != 1 {
		t.Errorf("the plain file was not kept aside: %v", aside)
	}
	if runs := c.file("runs.txt"); runs != "ran 1\nran 2\n" {
		t.Errorf("runs: %q", runs)
	}
}

// TestSilent12TransientBusErrors: a bus that drops the connection once while a session arms its
// timers, or installs its inbox watcher, neither refuses the session nor skips the watcher: the
// request is tried again on a new connection. A watcher removed behind cryochamber's back shows
// in status and is installed again by the next session, and so does one stopped (item 12).
func TestSilent12TransientBusErrors(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	hook := startAlertHook(t, false)
	// Each session asks for another time (+2h, +3h, ...), so each arming changes the timers.
	agent := strings.Replace(okAgent, "[CRYO:WAKE +1h]", "[CRYO:WAKE +${CRYO_SESSION}h]", 1)
	c := newTrial(t, m, "agent = \"./agent.sh\"\nwatch_inbox = true\n"+alertToml(hook, nil), agent, nil)
	c.start(0)
	proxy := fixture.StartBusProxy(t, m)
	pathUnit := timer.ID(c.dir) + "-inbox.path"
	for _, step := range []struct{ what, dropOn string }{
		{"installing the inbox watcher", "inbox"}, // in the unit's name or its escaped object path
		// Timers are transient (docs/DESIGN.md): arming one stops the armed one and creates it
		// again; a wake whose unit files did not change does not reload the manager.
		{"stopping the timer being re-armed", "StopUnit"},
		{"creating a timer", "StartTransientUnit"},
		{"reading a timer back", "NextElapseUSecRealtime"},
	} {
		before := c.status().Session
		drops := proxy.Drops()
		proxy.DropNext(step.dropOn)
		out := c.must(0, "wake", "--dir", c.dir, "--now")
		if proxy.Drops() == drops {
			t.Fatalf("%s: the proxy never saw %q", step.what, step.dropOn)
		}
		if strings.Contains(out, "cannot watch the inbox") || strings.Contains(out, "warning") {
			t.Errorf("%s: the dropped connection shows:\n%s", step.what, out)
		}
		s := c.status()
		if s.Session != before+1 || s.Phase != "armed" || s.osTimer("wake") == nil || !s.osTimer("wake").Equal(*s.NextWake) || s.Watcher != "on" {
			t.Errorf("%s: after a dropped connection: %+v", step.what, s)
		}
		if active := strings.TrimSpace(m.Systemctl(t, "is-active", pathUnit)); active != "active" {
			t.Errorf("%s: the inbox watcher is %s", step.what, active)
		}
	}
	if len(hook.alerts()) != 0 {
		t.Errorf("alerts: %s", hook)
	}
	// backAgain: status shows the watcher as want, with a warning, and the next session puts
	// it back.
	backAgain := func(what, want, warning string) {
		t.Helper()
		if s := c.status(); s.Watcher != want || !strings.Contains(strings.Join(s.Warnings, "\n"), warning) {
			t.Errorf("status with the watcher %s: watcher %q, warnings %q", what, s.Watcher, s.Warnings)
		}
		c.must(0, "wake", "--dir", c.dir, "--now")
		// status started the wake service too (chamber/watcher.go): let it end before the next step.
		m.WaitIdle(t, time.Minute, timer.ID(c.dir)+"-wake.service")
		if s := c.status(); s.Watcher != "on" {
			t.Errorf("the next session did not put the %s watcher back: %q", what, s.Watcher)
		}
		if active := strings.TrimSpace(m.Systemctl(t, "is-active", pathUnit)); active != "active" {
			t.Errorf("the watcher put back after it was %s is %s", what, active)
		}
	}
	// Stopped behind our back (by hand, or failed at its trigger limit): its unit file is
	// there but nothing watches.
	m.Systemctl(t, "stop", pathUnit)
	backAgain("stopped", "stopped", "inbox watcher is not running")
	// Removed behind our back.
	m.Systemctl(t, "disable", "--now", pathUnit)
	if err := os.Remove(filepath.Join(m.UnitDir, pathUnit)); err != nil {
		t.Fatal(err)
	}
	m.Systemctl(t, "daemon-reload")
	backAgain("removed", "missing", "inbox watcher is not installed")
}

// silentBus makes a runtime directory whose bus and systemd/private sockets accept a
// connection and never answer (a bus daemon that hangs), and returns it.
func silentBus(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "runtime")
	if err := os.MkdirAll(filepath.Join(dir, "systemd"), 0o700); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	for _, name := range []string{"bus", filepath.Join("systemd", "private")} {
		ln, err := net.Listen("unix", filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				held = append(held, c)
				mu.Unlock()
			}
		}()
		t.Cleanup(func() {
			ln.Close()
			<-done
			mu.Lock()
			for _, c := range held {
				c.Close()
			}
			held = nil
			mu.Unlock()
		})
	}
	return dir
}

// withEnv returns env with key set to value.
func withEnv(env []string, key, value string) []string {
	out := []string{}
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// TestSilent13SilentBus: when the user bus accepts a connection and never answers, status,
// validate and ps finish within seconds and name what did not answer (item 13: they hung
// forever).
func TestSilent13SilentBus(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	c := newTrial(t, m, "agent = \"./agent.sh\"\n", okAgent, nil)
	c.start(0)
	rt := silentBus(t)
	env := withEnv(c.env, "XDG_RUNTIME_DIR", rt)
	for _, args := range [][]string{
		{"status", "--dir", c.dir},
		{"status", "--dir", c.dir, "--json"},
		{"validate", "--dir", c.dir},
		{"ps"},
	} {
		began := time.Now()
		code, out, timedOut := runWithin(t, c.bin, env, c.dir, 60*time.Second, args...)
		if timedOut {
			t.Errorf("%s: still running after 60s:\n%s", strings.Join(args, " "), out)
			continue
		}
		t.Logf("%s: exit %d after %s", strings.Join(args, " "), code, time.Since(began).Round(100*time.Millisecond))
		if !strings.Contains(out, "did not answer") || !strings.Contains(out, filepath.Join(rt, "bus")) {
			t.Errorf("%s (exit %d) does not say what did not answer:\n%s", strings.Join(args, " "), code, out)
		}
	}
	// send asks the manager to start the wake as well as writing the message: a silent bus
	// does not hold it up, and the message is delivered.
	code, out, timedOut := runWithin(t, c.bin, env, c.dir, 30*time.Second, "send", "--dir", c.dir, "hello")
	if timedOut || code != 0 || !strings.Contains(out, "sent ") {
		t.Errorf("send against a silent bus: exit %d, timed out %v:\n%s", code, timedOut, out)
	}
}

// TestSilent19BusRedialled: the connection to the user manager, kept across the agent's run,
// is dialled again when it fails as dropped, so a session during which the manager (and its bus)
// restarted still hibernates,
// whether `start` or `wake` ran it; and dialling has a deadline, so `start` against a bus that
// never answers ends, saying so (item 19: arming failed on the dead connection and the chamber
// stopped; a start stalled).
func TestSilent19BusRedialled(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	agent := `#!/bin/sh
echo "ran $CRYO_SESSION" >> runs.txt
touch waiting-$CRYO_SESSION
i=0
while [ ! -e go-$CRYO_SESSION ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
echo "[CRYO:EXIT 0] session $CRYO_SESSION"
echo "[CRYO:WAKE +1h]"
`
	c := newTrial(t, m, "agent = \"./agent.sh\"\nwatch_inbox = true\n", agent, nil)
	for _, step := range []struct {
		n    int
		args []string
	}{{1, []string{"start", filepath.Join(c.dir, "plan.md")}}, {2, []string{"wake", "--dir", c.dir, "--now"}}} {
		type result struct {
			code int
			out  string
		}
		done := make(chan result, 1)
		go func() {
			code, out, _ := runWithin(t, c.bin, c.env, c.dir, 3*time.Minute, step.args...)
			done <- result{code, out}
		}()
		fixture.WaitFor(t, 30*time.Second, fmt.Sprintf("session %d is running", step.n), func() bool {
			return fixture.Exists(filepath.Join(c.dir, fmt.Sprintf("waiting-%d", step.n)))
		})
		m.Restart(t) // the manager and its bus go away and come back while the agent works
		if err := os.WriteFile(filepath.Join(c.dir, fmt.Sprintf("go-%d", step.n)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		var r result
		select {
		case r = <-done:
		case <-time.After(3 * time.Minute):
			t.Fatalf("%s did not finish", step.args[0])
		}
		if r.code != 0 {
			t.Fatalf("%s, during which the manager restarted: exit %d\n%s", step.args[0], r.code, r.out)
		}
		s := c.status()
		if s.Phase != "armed" || s.Session != step.n || s.NextWake == nil || s.osTimer("wake") == nil || !s.osTimer("wake").Equal(*s.NextWake) || s.Watcher != "on" {
			t.Errorf("after %s and the restart: %+v", step.args[0], s)
		}
	}
	// A bus that accepts and never answers: start ends, and says what did not answer.
	d := newTrial(t, m, "agent = \"./agent.sh\"\n", okAgent, nil)
	env := withEnv(d.env, "XDG_RUNTIME_DIR", silentBus(t))
	began := time.Now()
	code, out, timedOut := runWithin(t, d.bin, env, d.dir, 4*time.Minute, "start", filepath.Join(d.dir, "plan.md"))
	if timedOut {
		t.Fatalf("start against a silent bus still running after 4m:\n%s", out)
	}
	t.Logf("start against a silent bus: exit %d after %s", code, time.Since(began).Round(time.Second))
	if code == 0 || !strings.Contains(out, "did not answer") {
		t.Errorf("start against a silent bus: exit %d:\n%s", code, out)
	}
}

// TestSilent02StateStaysReadable: what sessions add to the state never grows it past what its
// reader accepts: 100 PLAN notes of 60 kB each (within the marker limits) in one session, and
// over 21,000 TODOs done, 100 a session (what 2.4 years of one an hour leave); the next wake,
// the dead-man and status still read it, and todo.json keeps only the last done items (item 2:
// a 6 MB state the loader refused; a todo.json of done items that refused every session that
// added a TODO past about 20,800).
func TestSilent02StateStaysReadable(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	hook := startAlertHook(t, false)
	agent := `#!/bin/sh
echo "ran $CRYO_SESSION" >> runs.txt
if [ "$CRYO_SESSION" = 1 ]; then
	big=$(head -c 60000 /dev/zero | tr '\0' p)
	i=0
	while [ $i -lt 100 ]; do echo "[CRYO:PLAN note $i $big]"; i=$((i+1)); done
else
	awk -v s=$CRYO_SESSION 'BEGIN { for (i = 0; i < 100; i++) printf "[CRYO:TODO +1s \"todo %d of session %d\"]\n", i, s }'
fi
echo "[CRYO:EXIT 0] session $CRYO_SESSION"
echo "[CRYO:WAKE +1h]"
`
	// 230 sessions in a few minutes, TODOs due at once: the guardrails' limits opened wide (they
	// would move the wakes, and tell the operator).
	c := newTrial(t, m, "agent = \"./agent.sh\"\nwatch_inbox = false\nmin_interval = \"1s\"\nmax_sessions_per_day = 10000\n"+alertToml(hook, nil), agent, nil)
	c.start(0)
	if s := c.status(); s.Phase != "armed" || s.Session != 1 {
		t.Fatalf("after 100 large PLAN notes: %+v", s)
	}
	if out := c.must(0, "fallback", "--dir", c.dir); strings.Contains(out, "alert") {
		t.Errorf("the dead-man after 100 large PLAN notes:\n%s", out)
	}
	// Each session adds 100 TODOs, due at once; each later session does those that are due
	// (the wake timer, armed for them, runs some sessions too).
	const sessions = 230
	for i := 0; i < sessions; i++ {
		c.must(0, "wake", "--dir", c.dir, "--now")
	}
	s := c.status()
	if s.Phase != "armed" || s.Session < sessions {
		t.Fatalf("after %d sessions of TODOs: %+v", sessions, s)
	}
	if out := c.must(0, "fallback", "--dir", c.dir); strings.Contains(out, "alert") {
		t.Errorf("the dead-man after the TODOs:\n%s", out)
	}
	// What a wake reads stays small: the done items went to the archive.
	priv := filepath.Join(fixture.StateDir(m), "chambers", timer.ID(c.dir))
	data, err := os.ReadFile(filepath.Join(priv, "todo.json"))
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Items []struct {
			Status string `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, it := range list.Items {
		count[it.Status]++
	}
	archived := 0
	if files, _ := filepath.Glob(filepath.Join(priv, "todo-archive-*.jsonl")); len(files) > 0 {
		for _, f := range files {
			b, _ := os.ReadFile(f)
			archived += bytes.Count(b, []byte("\n"))
		}
	}
	if count["done"] > 100 || archived+count["done"] < 20_800 {
		t.Errorf("todo.json (%d bytes) holds %v; %d archived", len(data), count, archived)
	}
	if len(hook.alerts()) != 0 {
		t.Errorf("alerts: %s", hook)
	}
}

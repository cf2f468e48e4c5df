package main

// Issue 23, "Nothing stops silently, round 2": the stops found after the first round, each tried
// end to end with the built binary against a private systemd user manager (timer/systemdtest)
// and, where named, a real Dovecot and SMTP server (internal/mailtest). Each test is named after
// the item (TestSilent2_02...); docs/RELIABILITY.md's table "Ways a plan can stop" names
// them.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/mailtest"
	"github.com/cryochamber/cryochamber/message"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// strayTwin leaves what a writer killed between its link(2) and the removal of its temporary
// name leaves: the message under its name and under the hidden temporary name
// (internal/confined's ".<name>.tmp-<12 hex>"), one file with two names. It returns the temporary
// name.
func strayTwin(t *testing.T, dir, name string) string {
	t.Helper()
	tmp := "." + name + ".tmp-0123456789ab"
	if err := os.Link(filepath.Join(dir, name), filepath.Join(dir, tmp)); err != nil {
		t.Fatal(err)
	}
	return tmp
}

// onlyName fails unless dir holds exactly one message name, and returns it.
func onlyName(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		if message.ValidName(e.Name()) {
			got = append(got, e.Name())
		}
	}
	if len(got) != 1 {
		t.Fatalf("%s holds %v, want one message", dir, got)
	}
	return got[0]
}

// TestSilent2_02StrayTempAfterKilledWriter: a writer of the mailbox killed between its link(2)
// and the removal of its temporary name (a sync pulling a mail, a `send`, a session filing a
// reply in the outbox) leaves the message with two names. Before the fix every later sync
// refused it ("... is a hard link ... refused (remove it)", naming the message, not the stray)
// and exited 1, pulling nothing more; the wake said "nothing to do" and the message never reached
// the agent; a reply under two names was never published. Now the reader knows the stray for
// what it is (our temporary name, the same file, no third name), removes it and goes on.
func TestSilent2_02StrayTempAfterKilledWriter(t *testing.T) {
	m := systemdtest.Start(t)
	imap := mailtest.StartIMAP(t)
	smtp := mailtest.StartSMTP(t)
	dir := filepath.Join(t.TempDir(), "garden")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	toml := "watch_inbox = false\n" + strings.Replace(fmt.Sprintf(syncToml, smtp.Port, imap.Port), "summaries = true\n", "", 1)
	for name, data := range map[string]string{"plan.md": "Tend the garden.\n", "agent.sh": syncAgent, "cryo.toml": toml} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	id := timer.ID(dir)
	env := managerEnv(m, "CRYO_IMAP_PW="+imap.Password)
	expect := func(env []string, want int, re string, args ...string) string {
		t.Helper()
		code, out := bin(t, env, dir, args...)
		if code != want || !regexp.MustCompile(re).MatchString(out) {
			t.Fatalf("cryochamber %s: exit %d, want %d; output does not match %q:\n%s", strings.Join(args, " "), code, want, re, out)
		}
		return out
	}
	expect(env, 0, `session 1`, "start", filepath.Join(dir, "plan.md"))
	inbox := filepath.Join(dir, message.InboxDir)

	// A sync killed after its link: the mail is in the inbox under two names, not recorded.
	imap.Deliver([]byte("From: alice@example.com\nSubject: ["+id+"] water\nMessage-ID: <a-1@mail.example.com>\n\nWater the ferns.\n"), time.Now())
	expect(append(env, "CRYOCHAMBER_CRASH_AT=sync-pulled"), -9, ``, "sync")
	pulled := onlyName(t, inbox)
	tmp := strayTwin(t, inbox, pulled)
	out := expect(env, 0, `email: pulled 0, published 0`, "sync")
	if strings.Contains(out, "hard link") {
		t.Errorf("sync still speaks of a hard link:\n%s", out)
	}
	if _, err := os.Lstat(filepath.Join(inbox, tmp)); !os.IsNotExist(err) {
		t.Errorf("the stray %s is still there (%v)", tmp, err)
	}
	// The next mail is pulled as ever.
	imap.Deliver([]byte("From: alice@example.com\nSubject: ["+id+"] roses\nMessage-ID: <a-2@mail.example.com>\n\nPrune the roses.\n"), time.Now())
	expect(env, 0, `email: pulled 1, published 0`, "sync")

	// A send killed after its link.
	expect(env, 0, ``, "send", "--dir", dir, "Mow the lawn.")
	var sent string
	ents, _ := os.ReadDir(inbox)
	for _, e := range ents {
		if b, _ := os.ReadFile(filepath.Join(inbox, e.Name())); strings.Contains(string(b), "Mow the lawn.") {
			sent = e.Name()
		}
	}
	if sent == "" {
		t.Fatal("send wrote nothing")
	}
	sentTmp := strayTwin(t, inbox, sent)

	// The wake shows the agent all three messages.
	expect(env, 0, ``, "wake", "--dir", dir, "--now")
	prompt, _ := os.ReadFile(filepath.Join(dir, "prompt-2.txt"))
	for _, want := range []string{"Water the ferns.", "Prune the roses.", "Mow the lawn."} {
		if !strings.Contains(string(prompt), want) {
			t.Errorf("session 2 was not shown %q:\n%s", want, prompt)
		}
	}
	if _, err := os.Lstat(filepath.Join(inbox, sentTmp)); !os.IsNotExist(err) {
		t.Errorf("the stray %s is still there (%v)", sentTmp, err)
	}

	// A reply filed in the outbox by a writer killed after its link is still published.
	outbox := filepath.Join(dir, message.OutboxDir)
	before := len(smtp.Messages())
	expect(env, 0, `email: pulled 0, published 1`, "sync") // the agent's reply to session 2
	writeOutbox(t, dir, "agent", "the hedge is trimmed")
	var reply string
	ents, _ = os.ReadDir(outbox)
	for _, e := range ents {
		if b, _ := os.ReadFile(filepath.Join(outbox, e.Name())); strings.Contains(string(b), "the hedge is trimmed") {
			reply = e.Name()
		}
	}
	strayTwin(t, outbox, reply)
	expect(env, 0, `email: pulled 0, published 1`, "sync")
	if n := len(mailsWith(smtp, "the hedge is trimmed")); n != 1 || len(smtp.Messages()) != before+2 {
		t.Errorf("the reply under two names was mailed %d times (%d mails in all, want %d)", n, len(smtp.Messages()), before+2)
	}
	expect(env, 0, ``, "cancel")
}

// pendingTodos reads the chamber's view of its TODOs (todo.json, rewritten at every save) and
// returns the texts of the pending ones.
func pendingTodos(t *testing.T, c *trial) []string {
	t.Helper()
	var l struct {
		Items []struct {
			Text   string    `json:"text"`
			At     time.Time `json:"at"`
			Status string    `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(c.file("todo.json")), &l); err != nil {
		t.Fatalf("todo.json: %v\n%s", err, c.file("todo.json"))
	}
	var out []string
	for _, it := range l.Items {
		if it.Status == "pending" {
			out = append(out, it.Text)
		}
	}
	return out
}

// TestSilent2_04CancelStartKeepsOneTodo: a session that prints a relative TODO on every run
// (`[CRYO:TODO +1d "prune the roses"]`), a plan cancelled and started again: one pending item,
// not two (issue 23, item 4: a TODO was a repeat only when text and time matched exactly, and a
// relative time never matches twice).
func TestSilent2_04CancelStartKeepsOneTodo(t *testing.T) {
	m := systemdtest.Start(t)
	agent := `#!/bin/sh
echo "[CRYO:EXIT 0] session $CRYO_SESSION"
echo "[CRYO:WAKE +1h]"
echo '[CRYO:TODO +1d "prune the roses"]'
`
	c := newTrial(t, m, "agent = \"./agent.sh\"\n", agent, nil)
	c.start(0)
	if got := pendingTodos(t, c); len(got) != 1 {
		t.Fatalf("after start: pending %v", got)
	}
	c.must(0, "cancel", "--dir", c.dir)
	time.Sleep(1100 * time.Millisecond) // the restarted session's +1d is a later second
	c.start(0)
	if got := pendingTodos(t, c); len(got) != 1 || got[0] != "prune the roses" {
		t.Errorf("after cancel and start: pending %q, want one \"prune the roses\"", got)
	}
	c.must(0, "cancel", "--dir", c.dir)
}

package binary

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/message"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// The mailbox stays small however old the chamber: a session moves the outbox items and the
// claimed messages of every month that ended more than 35 days ago into a directory per
// month. `receive` prints what is new in the live outbox; `receive --all` prints the months too.
func TestMailboxRotatesByMonth(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	dir := filepath.Join(t.TempDir(), "old")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fixture.WriteFiles(t, dir, fixture.Files{
		"plan.md":   "x\n",
		"cryo.toml": "agent = \"./agent.sh\"\nwatch_inbox = false\nsummaries = \"off\"\n", // the live outbox then holds exactly what this test put there
		"agent.sh":  "#!/bin/sh\necho \"[CRYO:EXIT 0] ok\"\necho \"[CRYO:WAKE +1h]\"\n",
	})
	now := time.Now().UTC()
	monthOf := func(t time.Time) string { return t.Format("2006-01") }
	old := now.AddDate(0, 0, -100)
	older := now.AddDate(0, 0, -200)
	recent := now.AddDate(0, 0, -2)
	put := func(sub string, at time.Time, id, body string) string {
		t.Helper()
		name, err := fixture.MailWrite(dir, sub, &message.Message{ID: at.Format("20060102T150405.000000000Z") + "-" + id, From: "x", Time: at, Kind: message.KindReply, Body: body})
		if err != nil {
			t.Fatal(err)
		}
		return name
	}
	oldReply := put(message.OutboxDir, old, "session1-reply0", "an old reply\n")
	olderReply := put(message.OutboxDir, older, "session1-reply1", "an older reply\n")
	recentReply := put(message.OutboxDir, recent, "session2-reply0", "a recent reply\n")
	oldClaimed := put(message.ArchiveDir, old, "alice-00000001", "an old question\n")
	recentClaimed := put(message.ArchiveDir, recent, "alice-00000002", "a recent question\n")

	env := fixture.Env(m)
	if code, out := bin(t, env, dir, "start", filepath.Join(dir, "plan.md")); code != 0 {
		t.Fatalf("start: %d\n%s", code, out)
	}
	for _, c := range []struct {
		sub  string
		want []string
	}{
		{message.OutboxDir, []string{recentReply}},
		{message.OutboxDir + "/" + monthOf(old), []string{oldReply}},
		{message.OutboxDir + "/" + monthOf(older), []string{olderReply}},
		{message.ArchiveDir, []string{recentClaimed}},
		{message.ArchiveDir + "/" + monthOf(old), []string{oldClaimed}},
	} {
		got, err := fixture.MailNames(dir, c.sub)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s holds %q (%v), want %q", c.sub, got, err, c.want)
		}
	}
	st, err := fixture.State(m, dir)
	if err != nil {
		t.Fatal(err)
	}
	c := now.Add(-35 * 24 * time.Hour)
	if want := time.Date(c.Year(), c.Month(), 1, 0, 0, 0, 0, time.UTC).Format("2006-01"); st.Rotated != want {
		t.Errorf("state rotated = %q, want %q", st.Rotated, want)
	}

	code, out := bin(t, env, dir, "receive")
	if code != 0 || !strings.Contains(out, "a recent reply") || strings.Contains(out, "an old reply") {
		t.Errorf("receive (%d):\n%s", code, out)
	}
	code, out = bin(t, env, dir, "receive", "--all")
	if code != 0 || !strings.Contains(out, "an older reply") || !strings.Contains(out, "an old reply") || !strings.Contains(out, "a recent reply") ||
		strings.Index(out, "an older reply") > strings.Index(out, "an old reply") || strings.Index(out, "an old reply") > strings.Index(out, "a recent reply") {
		t.Errorf("receive --all (%d), want every reply, oldest first:\n%s", code, out)
	}
	if code, out := bin(t, env, dir, "receive"); code != 0 || !strings.Contains(out, "no new messages") {
		t.Errorf("receive after receive --all (%d):\n%s", code, out)
	}
}

package binary

// Issue 26, digests: `digest = "daily HH:MM"` puts the chamber's time on the user's one digest
// timer (a real user manager); at that time the timer runs `digest --all --due --send`, and the
// digest arrives through a real SMTP server (aiosmtpd) with the period's counts. cancel takes
// the chamber off the timer.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/internal/mailtest"
	"github.com/cryochamber/cryochamber/message"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

func TestDigestArrivesAtItsTime(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	smtp := mailtest.StartSMTP(t)
	now := time.Now().UTC()
	at := now.Truncate(time.Minute).Add(time.Minute)
	if at.Sub(now) < 25*time.Second {
		at = at.Add(time.Minute)
	}
	agent := `#!/bin/sh
if [ -e crash ]; then echo "the hose burst" >&2; exit 1; fi
echo "[CRYO:EXIT 0] watered the garden"
echo "[CRYO:WAKE +2h]"
`
	toml := "agent = \"./agent.sh\"\ntimezone = \"UTC\"\ndigest = \"daily " + at.Format("15:04") + "\"\n" + alertToml(nil, smtp)
	c := newTrial(t, m, toml, agent, nil)
	out := c.start(0)
	if !strings.Contains(out, "digest timer armed") {
		t.Fatalf("start does not say the digest timer is armed:\n%s", out)
	}
	unit := filepath.Join(m.ConfigHome, "systemd", "user", timer.DigestTimerUnit)
	data, err := os.ReadFile(unit)
	if err != nil || !strings.Contains(string(data), "OnCalendar=*-*-* "+at.Format("15:04")+":00 UTC") || !strings.Contains(string(data), "Persistent=true") {
		t.Fatalf("the digest timer unit (%v):\n%s", err, data)
	}
	// A second session that fails: the digest counts two sessions and one failure.
	if err := os.WriteFile(filepath.Join(c.dir, "crash"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c.run("wake", "--dir", c.dir, "--now")
	if printed := c.must(0, "digest", "--dir", c.dir); !strings.Contains(printed, "Sessions run: 2") || !strings.Contains(printed, "Failures: 1") {
		hist, _ := filepath.Glob(filepath.Join(fixture.StateDir(m), "chambers", timer.ID(c.dir), "*"))
		var dump string
		for _, h := range hist {
			if strings.Contains(h, "history") || strings.Contains(h, "digest") {
				b, _ := os.ReadFile(h)
				dump += h + ":\n" + string(b)
			}
		}
		t.Fatalf("digest --dir prints:\n%s\n%s", printed, dump)
	}
	if got := mailsWith(smtp, "digest,"); len(got) != 0 {
		t.Fatalf("a digest was mailed before its time: %d", len(got))
	}

	m.WaitFor(t, time.Until(at)+2*time.Minute, "the digest mail", func() bool { return len(mailsWith(smtp, "digest,")) > 0 })
	mails := mailsWith(smtp, "digest,")
	body := mails[0].Body
	if !strings.Contains(body, "2 session(s), 1 failure(s)") {
		t.Fatalf("digest mail (subject %q):\n%s", mails[0].Header.Get("Subject"), body)
	}
	for _, want := range []string{"Sessions run: 2", "Failures: 1", "Alerts: 0", "State: retrying", "Upcoming:"} {
		if !strings.Contains(body, want) && !(want == "State: retrying" && strings.Contains(body, "State: armed")) {
			t.Fatalf("the digest lacks %q:\n%s", want, body)
		}
	}
	if arrived := time.Now(); arrived.Before(at) {
		t.Fatalf("the digest arrived at %s, before its time %s", arrived, at)
	}
	// ...and it is in the outbox, sealed, for the channels (the copy is written after the
	// delivery: once the digest service has finished).
	m.WaitIdle(t, time.Minute, "cryochamber-digest.service")
	var notice *message.Message
	for _, it := range c.outbox() {
		if it.Kind == message.KindNotice && strings.Contains(it.Body, "Sessions run: 2") {
			notice = it
		}
	}
	key, _ := message.LoadSealKey(filepath.Join(fixture.StateDir(m), "chambers", timer.ID(c.dir), message.SealKeyFile))
	if notice == nil || !notice.SealedBy(key) {
		t.Fatalf("no sealed digest notice in the outbox: %+v", c.outbox())
	}
	// One per period: running the timer's command again sends nothing.
	c.must(0, "digest", "--all", "--due", "--send")
	if n := len(mailsWith(smtp, "digest,")); n != 1 {
		t.Fatalf("%d digest mails after a second --due run, want 1", n)
	}

	c.must(0, "cancel", "--dir", c.dir)
	if _, err := os.Stat(unit); !os.IsNotExist(err) {
		t.Fatalf("the digest timer is still installed after the only chamber that wanted it was cancelled (%v)", err)
	}
}

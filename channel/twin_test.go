package channel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/message"
)

// A sync killed between the link(2) that publishes a pulled message and the removal of its
// temporary name (issue 23, item 2) leaves the message under two names. Before the fix every
// later GitHub sync stopped at it ("... is a hard link ... refused (remove it)"), and a reply
// under two names in the outbox was never posted. Now the stray temporary name is removed and
// the sync goes on: the message counts as pulled, the reply is posted.
func TestGitHubStrayTempAfterKilledWrite(t *testing.T) {
	// A first chamber learns what the pull files under which names.
	c0 := newChamber(t)
	s0, ch0 := newGitHub(t)
	s0.expect(listFirst("2026-11-22T10:00:00Z"), listPage2)
	r0 := c0.run1(t, ch0)
	noErr(t, r0)
	if len(r0.Pulled) != 2 {
		t.Fatalf("first sync = %+v", r0)
	}

	// The chamber under test: the first pulled message is in its inbox under two names, not
	// recorded (the sync was killed after its link), and a reply under two names in the outbox.
	c := newChamber(t)
	inbox := filepath.Join(c.dir, message.InboxDir)
	name := r0.Pulled[0] + ".md"
	data, err := os.ReadFile(filepath.Join(c0.dir, message.InboxDir, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(inbox, name), data, 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := "." + name + ".tmp-0123456789ab"
	if err := os.Link(filepath.Join(inbox, name), filepath.Join(inbox, tmp)); err != nil {
		t.Fatal(err)
	}
	item := c.outbox(t, t0.Add(-time.Hour), message.KindReply, "agent", "The ferns are watered.\n")
	outTmp := "." + item + ".md.tmp-abcdef012345"
	if err := os.Link(filepath.Join(c.dir, message.OutboxDir, item+".md"), filepath.Join(c.dir, message.OutboxDir, outTmp)); err != nil {
		t.Fatal(err)
	}

	s, ch := newGitHub(t)
	s.expect(listFirst("2026-11-22T10:00:00Z"), listPage2,
		postComment("201", func(t *testing.T, body string) {
			if !strings.Contains(body, "The ferns are watered.") {
				t.Errorf("comment body %q", body)
			}
		}))
	r := c.run1(t, ch)
	noErr(t, r)
	if len(r.Pulled) != 1 || r.Pulled[0] != r0.Pulled[1] || len(r.Pushed) != 1 || r.Pushed[0] != item {
		t.Fatalf("sync = %+v", r)
	}
	for _, p := range []string{filepath.Join(inbox, tmp), filepath.Join(c.dir, message.OutboxDir, outTmp)} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("the stray %s is still there (%v)", p, err)
		}
	}
	if got := c.inbox(t); len(got) != 2 {
		t.Errorf("inbox holds %d messages, want 2", len(got))
	}
}

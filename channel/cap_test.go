package channel

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/message"
)

// Issue 22: publishing from the outbox is capped per day ([channels] max_per_day): an agent
// that floods its outbox floods no issue, topic or mailbox. The cap counts what a channel
// published in the last 24 hours; when it bites the Result says so once (the operator gets one
// notice), and the rest waits, in order, for the window to free.
func TestMaxPerDay(t *testing.T) {
	c := newChamber(t)
	var want []string
	for i := 0; i < 8; i++ {
		want = append(want, c.outbox(t, t0.Add(-time.Duration(20-i)*time.Minute), message.KindReply, fmt.Sprintf("a%02d", i), "flood\n"))
	}
	ch := &scripted{}
	run := func(at time.Time) Result {
		t.Helper()
		res, err := Run(context.Background(), Options{Dir: c.dir, ID: c.id, StateDir: c.state, Channels: []Channel{ch}, Now: func() time.Time { return at }, MaxPerDay: 3})
		if err != nil {
			t.Fatal(err)
		}
		noErr(t, res[0])
		return res[0]
	}
	r := run(t0)
	if strings.Join(ch.pushed, ",") != strings.Join(want[:3], ",") {
		t.Fatalf("first sync published %v, want the oldest 3", ch.pushed)
	}
	if !strings.Contains(r.Capped, "max_per_day") || !strings.Contains(r.Capped, "5 item(s) wait") {
		t.Fatalf("the cap bit without saying so: %+v", r)
	}
	// The same day: nothing more, and no second notice.
	r = run(t0.Add(2 * time.Hour))
	if len(r.Pushed) != 0 || r.Capped != "" {
		t.Fatalf("second sync the same day: %+v", r)
	}
	// A day after the first items went out, three more go, and the cap bites again: one
	// notice for that day.
	r = run(t0.Add(24*time.Hour + time.Minute))
	if strings.Join(ch.pushed, ",") != strings.Join(want[:6], ",") || r.Capped == "" {
		t.Fatalf("next day: published %v, %+v", ch.pushed, r)
	}
	r = run(t0.Add(48*time.Hour + 2*time.Minute))
	if strings.Join(ch.pushed, ",") != strings.Join(want, ",") || r.Capped != "" {
		t.Fatalf("third day: published %v, %+v", ch.pushed, r)
	}
}

package channel

import (
	"context"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/message"
)

// noSummaries is a channel that does not want summaries (email's default).
type noSummaries struct{ scripted }

func (n *noSummaries) Summaries() bool { return false }
func (n *noSummaries) Name() string    { return "email" }

// Issue 26: a session's summary filed in the outbox (summaries = "outbox") is published where a
// channel wants summaries, once: not again as the state's latest summary of the same session.
// A channel that does not want summaries does not get it. A forged, unsealed summary never
// hides the real one.
func TestOutboxSummaryPublishedOnce(t *testing.T) {
	c := newChamber(t)
	filed := c.outbox(t, t0.Add(-10*time.Minute), message.KindSummary, "cryochamber", "Session 2 ended: EXIT 0: watered\n")
	sum := &Summary{Session: 2, Exit: 0, Text: "watered", End: t0.Add(-10 * time.Minute)}
	want, quiet := &scripted{}, &noSummaries{}
	res, err := Run(context.Background(), Options{Dir: c.dir, ID: c.id, StateDir: c.state, Channels: []Channel{want, quiet}, Summary: sum, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	noErr(t, res[0])
	noErr(t, res[1])
	if len(want.pushed) != 1 || want.pushed[0] != filed {
		t.Fatalf("a channel that wants summaries published %v (%v)", want.pushed, want.heads)
	}
	if len(quiet.pushed) != 0 {
		t.Fatalf("a channel without summaries published %v", quiet.pushed)
	}

	// An unsealed "summary" of session 2 (the agent's file) does not hide the state's summary
	// of session 2, and goes out as the agent's words.
	c2 := newChamber(t)
	forged := c2.outboxFile(t, false, t0.Add(-5*time.Minute), message.KindSummary, "cryochamber", "all is well\n")
	ch := &scripted{}
	res, err = Run(context.Background(), Options{Dir: c2.dir, ID: c2.id, StateDir: c2.state, Channels: []Channel{ch},
		Summary: &Summary{Session: 2, Exit: 2, Text: "it failed", End: t0.Add(-time.Minute)}, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	noErr(t, res[0])
	if len(ch.pushed) != 2 || ch.pushed[0] != forged || ch.pushed[1] != "session-2" {
		t.Fatalf("published %v", ch.pushed)
	}
	if h := ch.heads[forged]; h != "Reply from "+message.UnsealedFrom+" (session 2)" {
		t.Fatalf("the forged summary went out as %q", h)
	}
}

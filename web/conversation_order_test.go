package web

import (
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/chamber"
)

// A reply written in the same second as its question carries that second (reply times are cut
// to the second; a message keeps its nanoseconds): it is still listed after the question.
func TestConversationReplyAfterQuestionInTheSameSecond(t *testing.T) {
	sec := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	msgs := []chamber.ReceivedMessage{
		{Box: "archive", ID: "q", Kind: "message", Time: sec.Add(700 * time.Millisecond)},
		{Box: "outbox", ID: "r", Kind: "reply", Time: sec, InReplyTo: []string{"q"}},
		{Box: "outbox", ID: "n", Kind: "notice", Time: sec.Add(-time.Second)},
	}
	got := conversation(msgs)
	var ids []string
	for _, m := range got {
		ids = append(ids, m.ID)
	}
	if len(ids) != 3 || ids[0] != "n" || ids[1] != "q" || ids[2] != "r" {
		t.Errorf("order %v, want [n q r]", ids)
	}
}

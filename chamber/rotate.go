package chamber

import (
	"time"

	"github.com/cryochamber/cryochamber/message"
)

// mailboxKeep is how long outbox items and claimed messages stay in the live directories
// (messages/outbox/, messages/inbox/archive/) before rotateMailbox moves them into a directory
// per month. It is longer than the 30 days in which a sync channel still publishes an outbox
// item (channel's keepSent), so a channel never misses one; `receive --all` reads the months.
const mailboxKeep = 35 * 24 * time.Hour

// rotateMailbox moves the outbox items and claimed messages of every month that ended more
// than mailboxKeep ago into messages/outbox/YYYY-MM/ and messages/inbox/archive/YYYY-MM/, so
// the live directories hold one to two months whatever the age of the chamber. It does the
// work once per month (the state records the month it rotated up to); a failure is a warning
// and is tried again at the next session. The caller holds the lock and saves the state.
func (r *runner) rotateMailbox() {
	if r.fs == nil || r.unlocked {
		return
	}
	c := r.now().UTC().Add(-mailboxKeep)
	cutoff := time.Date(c.Year(), c.Month(), 1, 0, 0, 0, 0, time.UTC)
	keep := cutoff.Format(message.MonthLayout)
	if r.st.Rotated >= keep {
		return
	}
	for _, dir := range []string{outboxDir, archiveDir} {
		if _, err := message.Rotate(r.fs, dir, cutoff); err != nil {
			r.warnf("cannot move the messages older than %s out of %s (tried again at the next session): %v", keep, dir, err)
			return
		}
	}
	r.st.Rotated = keep
}

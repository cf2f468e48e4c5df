package chamber

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cryochamber/cryochamber/message"
)

// fileSummary files the summary of session n, which answered, as a sealed outbox item
// (summaries = "outbox", the default): every wake then leaves something the operator sees in
// `receive`, the dashboard and the channels that want summaries, not only a log block and a
// history row. A session that failed leaves a notice or an alert instead (hibernate.go).
//
// The name comes from the session's end (whole seconds) and its number, so a recovery that
// finishes the same hibernation again finds the item there and files nothing twice.
func (r *runner) fileSummary(f *finishing, next *time.Time) {
	n, o, m := f.n, f.o, f.m
	if r.cfg.Summaries == SummariesOff || r.fs == nil {
		return
	}
	t := o.end.UTC()
	body := fmt.Sprintf("Session %d ended: EXIT %d: %s\n", n, o.exit, exitSummary(m))
	if next != nil {
		body += fmt.Sprintf("Next wake: %s\n", next.In(r.cfg.Location).Format(time.RFC3339))
	} else {
		body += "The plan is complete: no wake is armed.\n"
	}
	msg := &message.Message{
		ID:      fmt.Sprintf("%s-session%d-summary", t.Format("20060102T150405.000000000Z"), n),
		From:    "cryochamber",
		Subject: fmt.Sprintf("%s: session %d ended (EXIT %d)", filepath.Base(r.dir), n, o.exit),
		Time:    t,
		Kind:    message.KindSummary,
		Session: n,
		Body:    body,
	}
	if _, err := r.writeOutbox(msg); err != nil && !errors.Is(err, os.ErrExist) {
		r.warnf("cannot file the session's summary in the outbox: %v", err)
	}
}

package chamber

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/cryochamber/cryochamber/internal/confined"
	"github.com/cryochamber/cryochamber/message"
	"github.com/cryochamber/cryochamber/timer"
)

// Conversation is a chamber's messages in both directions, for the dashboard: what was sent to
// the agent (waiting in the inbox, or claimed into the archive), and what came back (the
// outbox: replies, notices, alerts). It reads only, and marks nothing read.
func Conversation(ctx context.Context, env *Env, dir string, perBox int) ([]ReceivedMessage, error) {
	r, _, err := open(ctx, env, dir, openOptions{unlocked: true})
	if err != nil {
		return nil, err
	}
	defer r.close()
	if r.fs == nil {
		return nil, &Error{Msg: r.chamberMissing()}
	}
	list := []ReceivedMessage{}
	key := r.sealKey()
	for _, box := range []struct{ name, dir string }{{"inbox", inboxDir}, {"archive", archiveDir}, {"outbox", outboxDir}} {
		var names []string
		if perBox > 0 {
			names, err = message.LatestNames(r.fs, box.dir, perBox) // names sort by time: the latest
		} else {
			names, err = message.Names(r.fs, box.dir)
		}
		if err != nil {
			return nil, &Error{Msg: "cannot list " + box.dir, Err: err}
		}
		for _, name := range names {
			m, err := message.Read(r.fs, box.dir, name)
			if err != nil {
				continue
			}
			if box.dir == outboxDir {
				message.Vouch(m, key) // an alert the agent wrote is shown as the agent's words
			}
			list = append(list, ReceivedMessage{Box: box.name, ID: m.ID, From: m.From, Subject: m.Subject, Time: m.Time, Kind: m.Kind,
				Session: m.Session, InReplyTo: m.InReplyTo, Delivery: m.Delivery, Body: m.Body})
		}
	}
	SortConversation(list)
	return list, nil
}

// Documents are the plan and the agent's notes, read-only and bounded.
type Documents struct {
	Plan      string `json:"plan"`
	Notes     string `json:"notes"`
	Truncated bool   `json:"truncated,omitempty"`
}

// maxDocument bounds what Read shows of plan.md and NOTES.md.
const maxDocument = 256 << 10

// ReadDocuments reads the chamber's plan and NOTES.md through the confined opener (a symlink
// or a FIFO there is shown as an error, never followed or waited on).
func ReadDocuments(ctx context.Context, env *Env, dir string) (*Documents, error) {
	r, _, err := open(ctx, env, dir, openOptions{unlocked: true})
	if err != nil {
		return nil, err
	}
	defer r.close()
	if r.fs == nil {
		return nil, &Error{Msg: r.chamberMissing()}
	}
	d := &Documents{}
	for _, f := range []struct {
		name string
		to   *string
	}{{r.planName(), &d.Plan}, {NotesFile, &d.Notes}} {
		text, cut, err := readHead(r.fs, f.name, maxDocument)
		if err != nil {
			text = fmt.Sprintf("(%s cannot be shown: %v)", f.name, err)
		}
		*f.to, d.Truncated = text, d.Truncated || cut
	}
	return d, nil
}

// readHead reads at most limit bytes of name.
func readHead(fs *confined.Dir, name string, limit int64) (string, bool, error) {
	f, err := fs.Open(name)
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	buf := make([]byte, limit+1)
	n, _ := f.ReadAt(buf, 0)
	if int64(n) > limit {
		return string(buf[:limit]), true, nil
	}
	return string(buf[:n]), false, nil
}

// RequestWake starts the chamber's wake service now (`send --wake` without a message): the
// session runs under the OS timer manager, not in the caller.
func RequestWake(ctx context.Context, env *Env, dir string) error {
	r, _, err := open(ctx, env, dir, openOptions{unlocked: true})
	if err != nil {
		return err
	}
	defer r.close()
	if !r.st.Phase.Active() {
		return failErr("cryochamber start "+filepath.Join(r.dir, r.planName()), "cannot wake a chamber that is %s", r.st.Phase)
	}
	return r.requestWake(ctx)
}

// requestWake records a wake request (a wake that is running now sees it last) and starts the
// wake service.
func (r *runner) requestWake(ctx context.Context) error {
	if err := r.store.setFlag(requestName, r.now()); err != nil {
		return &Error{Msg: "the wake request could not be recorded", Err: err}
	}
	if err := r.withBackend(ctx, func(be timer.Backend) error { return be.RunNow(ctx, r.id) }); err != nil {
		return &Error{Msg: "the chamber cannot be woken", Err: err, Hint: "it runs at its next wake; `cryochamber status --dir " + r.dir + "` shows when"}
	}
	return nil
}

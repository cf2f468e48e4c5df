package chamber

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/agent"
	"github.com/cryochamber/cryochamber/marker"
	"github.com/cryochamber/cryochamber/message"
)

const (
	inboxDir   = message.InboxDir
	archiveDir = message.ArchiveDir
	outboxDir  = message.OutboxDir
)

// validMessageName reports whether a claimed name can be used as a path in the mailbox.
func validMessageName(name string) bool { return message.ValidName(name) }

// inboxCount is the number of messages waiting in the inbox.
func (r *runner) inboxCount() int {
	if r.fs == nil {
		return 0
	}
	names, _ := message.Names(r.fs, inboxDir)
	return len(names)
}

// claimBatch is the work a session claimed at its start.
type claimBatch struct {
	msgs  []*message.Message
	todos []Todo
}

func (b *claimBatch) fill(d *agent.PromptData) {
	if b == nil {
		return
	}
	for _, m := range b.msgs {
		d.Messages = append(d.Messages, agent.Message{ID: m.ID, From: m.From, Subject: m.Subject, Time: m.Time, Body: m.Body})
	}
	for _, t := range b.todos {
		d.Todos = append(d.Todos, agent.Todo{Text: t.Text, Due: t.At, Attempt: t.Attempt})
	}
}

// claimNames records in the state which messages the session about to start claims: the inbox
// batch (at most maxBatch, oldest first; the rest wait for the next session), or, for a session
// re-run after its process died before it started, the batch it had already claimed. The
// caller saves the state before claim moves anything.
func (r *runner) claimNames() ([]string, error) {
	if len(r.st.Claimed) > 0 {
		return r.st.Claimed, nil
	}
	if r.fs == nil {
		return nil, nil
	}
	names, err := message.Names(r.fs, inboxDir)
	if err != nil {
		return nil, &Error{Msg: "cannot read the inbox", Err: err}
	}
	r.warnStrays(inboxDir)
	if len(names) > maxBatch {
		names = names[:maxBatch]
	}
	r.st.Claimed = names
	return names, nil
}

// claim moves the claimed batch to the archive and claims the due TODOs. Claims are terminal:
// once archived, a message is never shown to another session, even if this one crashes.
// Moving is idempotent: a name already in the archive stays there. Every name was checked when
// the state was loaded; every file is read through the confined opener (a symlink planted in the
// inbox is answered as unreadable, never followed).
func (r *runner) claim(now time.Time, names []string) (*claimBatch, error) {
	b := &claimBatch{}
	if len(names) > 0 && r.fs != nil {
		if err := r.fs.MkdirAll(archiveDir, message.DirMode); err != nil {
			return b, &Error{Msg: "cannot claim the inbox", Err: err}
		}
		moved := false
		for _, name := range names {
			if !validMessageName(name) {
				continue
			}
			err := r.fs.Rename(path.Join(inboxDir, name), path.Join(archiveDir, name))
			if err == nil {
				moved = true
			} else if !errors.Is(err, os.ErrNotExist) {
				return b, &Error{Msg: "cannot claim " + name, Err: err}
			}
			m, err := message.Read(r.fs, archiveDir, name)
			if errors.Is(err, os.ErrNotExist) {
				continue // the sender took it back before the claim
			}
			if err != nil {
				// An unreadable message is still answered: the reply says why it was not shown.
				m = &message.Message{ID: strings.TrimSuffix(name, ".md"), From: "unknown", Body: fmt.Sprintf("(this message could not be read: %v)", err)}
			}
			b.msgs = append(b.msgs, m)
		}
		if moved {
			_ = r.fs.SyncDir(inboxDir)
			_ = r.fs.SyncDir(archiveDir)
		}
	}
	todos, err := r.claimTodos(now)
	if err != nil {
		return b, err
	}
	b.todos = todos
	return b, nil
}

// maxReplyIDs is how many message IDs one reply's in-reply-to header lists: a batch larger than
// that is answered by several reply files with the same text, so that no reply is ever lost to
// the size of its own header.
const maxReplyIDs = 40

// finishClaims answers every claimed message: with the agent's REPLY markers, or with a reply
// from cryochamber saying what happened. Reply names are derived from the session, so a
// recovery that runs this twice writes each reply once. It also finishes the claimed TODOs.
// m holds the REPLY markers that answer (nil: cryochamber answers).
func (r *runner) finishClaims(f *finishing, m *marker.Result) error {
	n, o := f.n, f.o
	ids := make([]string, 0, len(r.st.Claimed))
	for _, name := range r.st.Claimed {
		ids = append(ids, strings.TrimSuffix(name, ".md"))
	}
	f.answered = len(ids)
	var errs []error
	t := o.end.UTC()
	if t.IsZero() {
		t = r.now().UTC()
	}
	write := func(k int, from, body string) {
		if r.fs == nil {
			errs = append(errs, fmt.Errorf("cannot write the reply of session %d: %s", n, r.chamberMissing()))
			return
		}
		parts := chunk(ids, maxReplyIDs)
		for p, part := range parts {
			id := replyID(t, n, k)
			if len(parts) > 1 {
				id = fmt.Sprintf("%s-part%d", id, p+1)
			}
			msg := &message.Message{ID: id, From: from, Subject: replySubject(r, n), Time: t, Kind: message.KindReply, Session: n, InReplyTo: part, Body: body}
			if _, err := r.writeOutbox(msg); err != nil && !errors.Is(err, os.ErrExist) {
				errs = append(errs, err)
			}
		}
	}
	if m != nil && len(m.Replies) > 0 {
		for k, rep := range m.Replies {
			write(k, "agent", rep.Text)
		}
	} else if len(ids) > 0 {
		write(0, "cryochamber", fallbackReply(f, m))
	}
	if err := r.finishTodos(f); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// chunk splits ids into pieces of at most n (one empty piece for no ids).
func chunk(ids []string, n int) [][]string {
	if len(ids) <= n {
		return [][]string{ids}
	}
	var out [][]string
	for len(ids) > n {
		out = append(out, ids[:n])
		ids = ids[n:]
	}
	return append(out, ids)
}

func replyID(t time.Time, n, k int) string {
	return fmt.Sprintf("%s-session%d-reply%d", t.Format("20060102T150405.000000000Z"), n, k)
}

func replySubject(r *runner, n int) string {
	return fmt.Sprintf("session %d of %s", n, filepath.Base(r.dir))
}

// fallbackReply is cryochamber's answer when the agent did not REPLY (m: the markers judged).
func fallbackReply(f *finishing, m *marker.Result) string {
	n, o := f.n, f.o
	switch {
	case o.reason == EndInvalid:
		return fmt.Sprintf("Session %d read your message, but its answer could not be used (invalid markers), so the chamber stopped. The operator has been alerted.\n", n)
	case o.failed():
		return fmt.Sprintf("Session %d received your message but failed before replying (%s: %s). It will not be shown again; the failure is in cryo.log.\n", n, o.reason, o.detail)
	case m != nil && m.Exit != nil:
		return fmt.Sprintf("Session %d read your message and finished (EXIT %d: %s) without writing a reply.\n", n, m.Exit.Code, m.Exit.Summary)
	}
	return fmt.Sprintf("Session %d received your message; it ended without a reply.\n", n)
}

// writeNotice writes a message to the outbox that is not delivered anywhere: a failure that will
// be retried is visible (`receive`, sync channels) without paging anyone. Its name derives from
// the session, so a recovery that repeats the step writes it once.
func (r *runner) writeNotice(n int, at time.Time, reason, text string) {
	if r.fs == nil {
		return
	}
	t := at.UTC()
	msg := &message.Message{
		ID:      fmt.Sprintf("%s-session%d-notice", t.Format("20060102T150405.000000000Z"), n),
		From:    "cryochamber",
		Subject: fmt.Sprintf("%s: session %d %s", filepath.Base(r.dir), n, reason),
		Time:    t,
		Kind:    message.KindNotice,
		Session: n,
		Body:    text,
	}
	if _, err := r.writeOutbox(msg); err != nil && !errors.Is(err, os.ErrExist) {
		r.warnf("cannot write a notice to the outbox: %v", err)
	}
}

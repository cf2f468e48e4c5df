package chamber

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/agent"
	"github.com/cryochamber/cryochamber/internal/atomicfile"
	"github.com/cryochamber/cryochamber/marker"
	"github.com/cryochamber/cryochamber/message"
)

const (
	inboxDir   = message.InboxDir
	archiveDir = message.ArchiveDir
	outboxDir  = message.OutboxDir
)

func atomicWrite(path string, data []byte, perm os.FileMode) error {
	return atomicfile.Write(path, data, perm)
}

// inboxCount is the number of messages waiting in the inbox.
func inboxCount(dir string) int {
	names, _ := message.Names(filepath.Join(dir, inboxDir))
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

// claimNames records in the state which messages the session about to start claims: the whole
// inbox batch, or, for a session re-run after its process died before it started, the batch it
// had already claimed. The caller saves the state before claim moves anything.
func (r *runner) claimNames() ([]string, error) {
	if len(r.st.Claimed) > 0 {
		return r.st.Claimed, nil
	}
	names, err := message.Names(r.path(inboxDir))
	if err != nil {
		return nil, &Error{Status: 1, Msg: "cannot read the inbox", Err: err}
	}
	r.st.Claimed = names
	return names, nil
}

// claim moves the claimed batch to the archive and claims the due TODOs. Claims are terminal:
// once archived, a message is never shown to another session, even if this one crashes.
// Moving is idempotent: a name already in the archive stays there.
func (r *runner) claim(now time.Time, names []string) (*claimBatch, error) {
	b := &claimBatch{}
	if len(names) > 0 {
		if err := os.MkdirAll(r.path(archiveDir), 0o755); err != nil {
			return nil, &Error{Status: 1, Err: err}
		}
	}
	moved := false
	for _, name := range names {
		src := filepath.Join(r.path(inboxDir), name)
		dst := filepath.Join(r.path(archiveDir), name)
		if err := os.Rename(src, dst); err == nil {
			moved = true
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, &Error{Status: 1, Msg: "cannot claim " + name, Err: err}
		}
		m, err := message.Read(r.path(archiveDir), name)
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
		_ = atomicfile.SyncDir(r.path(inboxDir))
		_ = atomicfile.SyncDir(r.path(archiveDir))
	}
	todos, err := r.claimTodos(now)
	if err != nil {
		return nil, err
	}
	b.todos = todos
	return b, nil
}

// finishClaims answers every claimed message: with the agent's REPLY markers, or with a reply
// from cryochamber saying what happened. Reply names are derived from the session, so a
// recovery that runs this twice writes each reply once.
func (r *runner) finishClaims(ctx context.Context, n int, m *marker.Result, o outcome) error {
	ids := make([]string, 0, len(r.st.Claimed))
	for _, name := range r.st.Claimed {
		ids = append(ids, strings.TrimSuffix(name, ".md"))
	}
	var errs []error
	out := r.path(outboxDir)
	t := o.end.UTC()
	if t.IsZero() {
		t = r.now().UTC()
	}
	if m != nil && len(m.Replies) > 0 {
		for k, rep := range m.Replies {
			msg := &message.Message{
				ID:        replyID(t, n, k),
				From:      "agent",
				Subject:   replySubject(r, n),
				Time:      t,
				Kind:      message.KindReply,
				Session:   n,
				InReplyTo: ids,
				Body:      rep.Text,
			}
			if _, err := message.Write(out, msg); err != nil && !errors.Is(err, os.ErrExist) {
				errs = append(errs, err)
			}
		}
	} else if len(ids) > 0 {
		msg := &message.Message{
			ID:        replyID(t, n, 0),
			From:      "cryochamber",
			Subject:   replySubject(r, n),
			Time:      t,
			Kind:      message.KindReply,
			Session:   n,
			InReplyTo: ids,
			Body:      fallbackReply(n, m, o),
		}
		if _, err := message.Write(out, msg); err != nil && !errors.Is(err, os.ErrExist) {
			errs = append(errs, err)
		}
	}
	if err := r.finishTodos(n, o); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func replyID(t time.Time, n, k int) string {
	return fmt.Sprintf("%s-session%d-reply%d", t.Format("20060102T150405.000000000Z"), n, k)
}

func replySubject(r *runner, n int) string {
	return fmt.Sprintf("session %d of %s", n, filepath.Base(r.dir))
}

// fallbackReply is cryochamber's answer when the agent did not REPLY.
func fallbackReply(n int, m *marker.Result, o outcome) string {
	switch {
	case o.reason == "invalid":
		return fmt.Sprintf("Session %d read your message, but its answer could not be used (invalid markers), so the chamber stopped. The operator has been alerted.\n", n)
	case o.failed():
		return fmt.Sprintf("Session %d received your message but failed before replying (%s: %s). It will not be shown again; the failure is in cryo.log.\n", n, o.reason, o.detail)
	case m != nil && m.Exit != nil:
		return fmt.Sprintf("Session %d read your message and finished (EXIT %d: %s) without writing a reply.\n", n, m.Exit.Code, m.Exit.Summary)
	}
	return fmt.Sprintf("Session %d received your message; it ended without a reply.\n", n)
}

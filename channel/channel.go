// Package channel carries a chamber's mailbox to the places where its people read and write:
// email (IMAP in, SMTP out), one GitHub issue per chamber, one Zulip topic per chamber.
// `cryochamber sync` runs it once per poll, from an OS timer: nothing of ours runs between polls.
//
// A sync pulls what allowed people wrote since the last poll into messages/inbox/ (the inbox
// watcher then wakes the chamber) and pushes what the outbox has not yet published: the agent's
// replies, cryochamber's replies and notices, alerts, and the latest session's summary. What
// was synced is recorded per channel in the chamber's private state directory (sync/, 0700,
// files 0600, written atomically), so that
//   - a remote message enters the inbox at most once: its inbox name is derived from its
//     remote identity, and a message already in the inbox or the archive is not written again,
//     even when a sync was killed between writing and recording it;
//   - an outbox item is published at least once, and found rather than published again after a
//     sync killed between publishing and recording it (a marker derived from the item: a hidden
//     marker in a GitHub comment, a footer on Zulip, the Message-ID of a mail).
//
// What arrives is untrusted data. Only the configured senders and users are accepted; the text
// is cleaned (valid UTF-8, no control characters, quoted email history stripped) and bounded;
// it becomes an ordinary inbox message of kind "message" whose From names the channel, which
// is exactly what `cryochamber send` could have written. Nothing a remote person writes is ever
// run, or changes where anything is sent.
//
// This package never runs a session or wakes a chamber, never reads the clock, the
// environment or $HOME (Options carries them in), and never writes a secret anywhere.
package channel

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Incoming is one remote message, ready to become an inbox message.
type Incoming struct {
	// Key is the message's identity on its service ("comment:123@<hash>", "msgid:<id>"): two
	// pulls of the same message give the same key.
	Key     string
	From    string    // who wrote it, prefixed with the channel: "github:alice"
	Subject string    // one line
	Time    time.Time // when the service received it (never a date the sender wrote)
	Body    string
	// Thread is what a reply to this message needs to be threaded on its channel (an email's
	// Message-ID and References); it is kept with the sync state, never in the chamber.
	Thread []string
}

// Ignored is a remote message that was not accepted, and why (for the report, never the inbox).
type Ignored struct {
	Key    string
	Reason string
}

// Pulled is what one pull found.
type Pulled struct {
	Messages []Incoming
	Ignored  []Ignored
	// Cursor is where the next pull starts. It is recorded only after every message above is
	// in the inbox.
	Cursor Cursor
	// Warnings are things the operator should know that are not failures.
	Warnings []string
}

// Outgoing is one item to publish: an outbox message or a session summary.
type Outgoing struct {
	ID      string // the outbox message's ID, or "session-<n>" for a summary
	Ref     string // Ref(chamber ID, ID): the marker found again after a crash
	Kind    string // reply, notice, alert, summary
	From    string
	Subject string
	Session int
	Time    time.Time
	Body    string
	// InReplyTo names the inbox messages a reply answers: a channel threads the reply under
	// the ones that came from it.
	InReplyTo []string
}

// Channel is one remote place. Its methods get the channel's own state, which they may update
// (threading, pinned user IDs); the caller saves it.
type Channel interface {
	// Name is "email", "github" or "zulip".
	Name() string
	// Summaries reports whether the latest session's summary is published here.
	Summaries() bool
	// Pull reads what arrived after st's cursor. It changes nothing on the service.
	Pull(ctx context.Context, st *State, now time.Time) (*Pulled, error)
	// Push publishes one item and returns its identity on the service.
	Push(ctx context.Context, st *State, out Outgoing, now time.Time) (string, error)
	// Find looks for an item a killed sync may have published already. A channel that cannot
	// look (SMTP) says not found: the item is sent again with the same Message-ID, which mail
	// clients show once.
	Find(ctx context.Context, st *State, out Outgoing, now time.Time) (remote string, found bool, err error)
}

// RateLimited is a service asking us to wait: nothing more is asked of it before Until.
type RateLimited struct {
	Service string
	Until   time.Time
	Why     string // the header that said so
}

func (e *RateLimited) refused() {}

func (e *RateLimited) Error() string {
	return fmt.Sprintf("%s rate limit: waiting until %s (%s)", e.Service, e.Until.UTC().Format(time.RFC3339), e.Why)
}

// ErrBusy is another sync of the same chamber running.
var ErrBusy = errors.New("another sync of this chamber is running")

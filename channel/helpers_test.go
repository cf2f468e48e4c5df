package channel

import (
	"context"
	"github.com/cryochamber/cryochamber/internal/confined"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/message"
)

// t0 is the fixed clock of these tests.
var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

// chamber is a chamber directory with its mailbox and a private state directory.
type chamber struct {
	dir   string
	id    string
	state string
	now   time.Time
}

func newChamber(t *testing.T) *chamber {
	t.Helper()
	root := t.TempDir()
	c := &chamber{dir: filepath.Join(root, "garden"), id: "cryo-garden-1234abcd", state: filepath.Join(root, "state", "chambers", "cryo-garden-1234abcd"), now: t0}
	for _, d := range []string{message.InboxDir, message.ArchiveDir, message.OutboxDir} {
		if err := os.MkdirAll(filepath.Join(c.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// outbox writes an outbox message as cryochamber files it (sealed with the chamber's key) and
// returns its ID.
func (c *chamber) outbox(t *testing.T, at time.Time, kind, from, body string, inReplyTo ...string) string {
	t.Helper()
	return c.outboxFile(t, true, at, kind, from, body, inReplyTo...)
}

// outboxFile writes an outbox message, sealed or not (as the agent could write one).
func (c *chamber) outboxFile(t *testing.T, sealed bool, at time.Time, kind, from, body string, inReplyTo ...string) string {
	t.Helper()
	m := &message.Message{ID: at.UTC().Format("20060102T150405.000000000Z") + "-" + from + "-0000", From: from, Time: at, Kind: kind, Session: 2, InReplyTo: inReplyTo, Body: body}
	if kind == message.KindNotice || kind == message.KindAlert {
		m.Subject = "garden: session 2 retrying"
	}
	if sealed {
		if err := os.MkdirAll(c.state, 0o700); err != nil {
			t.Fatal(err)
		}
		key, err := message.SealKey(filepath.Join(c.state, message.SealKeyFile))
		if err != nil {
			t.Fatal(err)
		}
		if err := m.SealWith(key); err != nil {
			t.Fatal(err)
		}
	}
	fs, sub := openMailbox(t, filepath.Join(c.dir, message.OutboxDir))
	if _, err := message.Write(fs, sub, m); err != nil {
		t.Fatal(err)
	}
	return m.ID
}

func (c *chamber) run(t *testing.T, chans ...Channel) []Result {
	t.Helper()
	res, err := Run(context.Background(), Options{Dir: c.dir, ID: c.id, StateDir: c.state, Channels: chans, Now: func() time.Time { return c.now }})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// run1 runs one channel and returns its result.
func (c *chamber) run1(t *testing.T, ch Channel) Result {
	t.Helper()
	return c.run(t, ch)[0]
}

// inbox reads every message in the inbox (not the archive), by name.
func (c *chamber) inbox(t *testing.T) map[string]*message.Message {
	t.Helper()
	return readDir(t, filepath.Join(c.dir, message.InboxDir))
}

func readDir(t *testing.T, dir string) map[string]*message.Message {
	t.Helper()
	fs, sub := openMailbox(t, dir)
	names, err := message.Names(fs, sub)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*message.Message{}
	for _, n := range names {
		m, err := message.Read(fs, sub, n)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		out[strings.TrimSuffix(n, ".md")] = m
	}
	return out
}

// state reads a channel's recorded state.
func (c *chamber) stateOf(t *testing.T, name string) *State {
	t.Helper()
	st, err := loadState(filepath.Join(c.state, SyncDir), name)
	if err != nil || st == nil {
		t.Fatalf("state of %s: %v, %v", name, st, err)
	}
	return st
}

func secret(s string) func(context.Context) (string, error) {
	return func(context.Context) (string, error) { return s, nil }
}

func noErr(t *testing.T, r Result) {
	t.Helper()
	if r.Err != nil {
		t.Fatalf("%s: %v", r.Channel, r.Err)
	}
}

// openMailbox opens the chamber that holds the mailbox directory p (".../messages/inbox") and
// returns it with p relative to it: the message API reads a chamber only confined.
func openMailbox(t *testing.T, p string) (*confined.Dir, string) {
	t.Helper()
	i := strings.LastIndex(p, "/messages/")
	if i < 0 {
		t.Fatalf("%s is not a mailbox directory", p)
	}
	fs, err := confined.Open(p[:i])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	return fs, p[i+1:]
}

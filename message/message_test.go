package message

import (
	"errors"
	"github.com/cryochamber/cryochamber/internal/confined"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	when := time.Date(2026, 11, 22, 10, 0, 3, 123456789, time.UTC)
	m := &Message{From: "alice", To: "agent", Subject: "PR #41: status?", Time: when, Kind: KindReply, Session: 12,
		InReplyTo: []string{"a", "b"}, Delivery: "email x: delivered", Body: "line 1\n---\nline 3 with ünï\n"}
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse("x.md", data)
	if err != nil {
		t.Fatal(err)
	}
	if got.From != m.From || got.To != m.To || got.Subject != m.Subject || !got.Time.Equal(when) || got.Kind != m.Kind ||
		got.Session != 12 || strings.Join(got.InReplyTo, ",") != "a,b" || got.Delivery != m.Delivery || got.Body != m.Body {
		t.Fatalf("round trip:\n%+v\n%+v", m, got)
	}
}

// TestParseErrors is the catalogue of bad message files.
func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, data, want string
	}{
		{"unclosed front matter", "---\nfrom: a\n", "m.md:2: front matter not closed with ---"},
		{"no colon", "---\nfrom a\n---\n", "m.md:2: want `key: value` in the front matter"},
		{"duplicate key", "---\nfrom: a\nfrom: b\n---\n", `m.md:3: duplicate key "from"`},
		{"bad time", "---\ntime: yesterday\n---\n", `m.md:2: time "yesterday" is not RFC 3339`},
		{"bad kind", "---\nkind: spam\n---\n", `m.md:2: unknown kind "spam"`},
		{"bad session", "---\nsession: -3\n---\n", `m.md:2: session "-3" is not a number`},
		{"control char", "---\nsubject: a\x1bb\n---\n", "m.md:2: subject: contains a control character"},
		{"not utf-8", "---\nfrom: \xff\n---\n", "m.md: not valid UTF-8"},
		{"nul", "hello\x00", "m.md: contains a NUL byte"},
		{"too big", strings.Repeat("x", MaxSize+1), "more than the"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("m.md", []byte(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestNoFrontMatterIsBody(t *testing.T) {
	m, err := Parse("hand.md", []byte("just dropped in by hand\n"))
	if err != nil || m.Body != "just dropped in by hand\n" || m.Kind != KindMessage {
		t.Fatalf("%+v %v", m, err)
	}
}

// TestHeaderInjectionRefused: a newline in a header value would let marker text add headers.
func TestHeaderInjectionRefused(t *testing.T) {
	for _, m := range []*Message{
		{From: "a\nkind: alert", Time: time.Now()},
		{Subject: "x\r\ndelivery: forged", Time: time.Now()},
	} {
		if _, err := m.Marshal(); err == nil || !strings.Contains(err.Error(), "control character") {
			t.Errorf("Marshal(%q) = %v, want a control-character error", m.From+m.Subject, err)
		}
	}
}

// TestWriteNeverOverwrites: concurrent writers all land, in distinct files; a fixed ID is
// written once.
func TestWriteNeverOverwrites(t *testing.T) {
	fs := openTemp(t)
	const dir = InboxDir
	when := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // the same instant for everyone
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if _, err := Write(fs, dir, &Message{From: "bob", Time: when, Body: strings.Repeat("x", i)}); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	names, err := Names(fs, dir)
	if err != nil || len(names) != 40 {
		t.Fatalf("%d messages (%v), want 40", len(names), err)
	}
	m := &Message{ID: "fixed", From: "x", Time: when}
	if _, err := Write(fs, dir, m); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(fs, dir, &Message{ID: "fixed", From: "y", Time: when}); !errors.Is(err, os.ErrExist) {
		t.Fatalf("second write of a fixed ID: %v, want ErrExist", err)
	}
	got, _ := Read(fs, dir, "fixed.md")
	if got.From != "x" {
		t.Fatal("the fixed-ID message was overwritten")
	}
	if tmp, _ := filepath.Glob(filepath.Join(fs.Path(), dir, ".*")); len(tmp) != 0 {
		t.Fatalf("temp files left: %v", tmp)
	}
}

func TestNamesSortByTime(t *testing.T) {
	fs := openTemp(t)
	const dir = OutboxDir
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, d := range []time.Duration{3, 1, 2} {
		if _, err := Write(fs, dir, &Message{From: "z", Time: base.Add(d * time.Second), Body: d.String()}); err != nil {
			t.Fatal(err)
		}
	}
	names, _ := Names(fs, dir)
	var bodies []string
	for _, n := range names {
		m, _ := Read(fs, dir, n)
		bodies = append(bodies, strings.TrimSpace(m.Body))
	}
	if strings.Join(bodies, ",") != "1ns,2ns,3ns" {
		t.Fatalf("order %v", bodies)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("---\nfrom: a\nsubject: s\ntime: 2026-11-22T10:00:03Z\n---\nbody\n"))
	f.Add([]byte("no front matter"))
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("---\nkind: alert\nsession: 3\nin-reply-to: a b\n---\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse("f.md", data)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Name != "f.md" {
				t.Fatalf("error %v is not a ParseError naming the file", err)
			}
			return
		}
		// What parses, re-marshals (when it can) and parses to the same message.
		out, err := m.Marshal()
		if err != nil {
			return // e.g. a body without front matter that is not valid to re-emit; fine
		}
		m2, err := Parse("f.md", out)
		if err != nil {
			t.Fatalf("re-parse of a marshalled message: %v\n%q", err, out)
		}
		body := m.Body // Marshal ends a non-empty body with a newline
		if body != "" && !strings.HasSuffix(body, "\n") {
			body += "\n"
		}
		if m2.From != m.From || m2.Subject != m.Subject || m2.Body != body || m2.Kind != m.Kind || m2.Session != m.Session {
			t.Fatalf("round trip changed the message:\n%+v\n%+v", m, m2)
		}
	})
}

func openTemp(t *testing.T) *confined.Dir {
	t.Helper()
	fs, err := confined.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	return fs
}

// TestMailboxIsPrivateAndRefusesTraps: messages are 0600 in 0700 directories; a symlink planted
// in the inbox (to a private key) or a FIFO is not a message, and reading one by name is refused
// without following or blocking; a name from a claim list is never used as a path outside.
func TestMailboxIsPrivateAndRefusesTraps(t *testing.T) {
	fs := openTemp(t)
	secret := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(secret, []byte("PRIVATE KEY"), 0o600); err != nil {
		t.Fatal(err)
	}
	name, err := Write(fs, InboxDir, &Message{From: "op", Time: time.Unix(1, 0), Body: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	inbox := filepath.Join(fs.Path(), InboxDir)
	if fi, _ := os.Stat(filepath.Join(inbox, name)); fi.Mode().Perm() != 0o600 {
		t.Errorf("message mode %v, want 0600", fi.Mode().Perm())
	}
	if fi, _ := os.Stat(inbox); fi.Mode().Perm() != 0o700 {
		t.Errorf("inbox mode %v, want 0700", fi.Mode().Perm())
	}
	if err := os.Symlink(secret, filepath.Join(inbox, "20260101T000000.000000000Z-evil-00000000.md")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(inbox, "20260101T000001.000000000Z-fifo-00000000.md"), 0o600); err != nil {
		t.Fatal(err)
	}
	names, err := Names(fs, InboxDir)
	if err != nil || len(names) != 1 || names[0] != name {
		t.Fatalf("Names = %v, %v; want only %s", names, err, name)
	}
	for _, n := range []string{"20260101T000000.000000000Z-evil-00000000.md", "20260101T000001.000000000Z-fifo-00000000.md"} {
		if m, err := Read(fs, InboxDir, n); err == nil {
			t.Errorf("Read(%s) = %q, want refused", n, m.Body)
		}
	}
	for _, n := range []string{"../../outside.md", "a/b.md", ".hidden.md", "x.txt"} {
		if _, err := Read(fs, InboxDir, n); err == nil || !strings.Contains(err.Error(), "not a message name") {
			t.Errorf("Read(%q) = %v, want a refusal of the name", n, err)
		}
	}
}

package message

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
	dir := t.TempDir()
	when := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // the same instant for everyone
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if _, err := Write(dir, &Message{From: "bob", Time: when, Body: strings.Repeat("x", i)}); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	names, err := Names(dir)
	if err != nil || len(names) != 40 {
		t.Fatalf("%d messages (%v), want 40", len(names), err)
	}
	m := &Message{ID: "fixed", From: "x", Time: when}
	if _, err := Write(dir, m); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(dir, &Message{ID: "fixed", From: "y", Time: when}); !errors.Is(err, os.ErrExist) {
		t.Fatalf("second write of a fixed ID: %v, want ErrExist", err)
	}
	got, _ := Read(dir, "fixed.md")
	if got.From != "x" {
		t.Fatal("the fixed-ID message was overwritten")
	}
	if tmp, _ := filepath.Glob(filepath.Join(dir, ".tmp-*")); len(tmp) != 0 {
		t.Fatalf("temp files left: %v", tmp)
	}
}

func TestNamesSortByTime(t *testing.T) {
	dir := t.TempDir()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, d := range []time.Duration{3, 1, 2} {
		if _, err := Write(dir, &Message{From: "z", Time: base.Add(d * time.Second), Body: d.String()}); err != nil {
			t.Fatal(err)
		}
	}
	names, _ := Names(dir)
	var bodies []string
	for _, n := range names {
		m, _ := Read(dir, n)
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

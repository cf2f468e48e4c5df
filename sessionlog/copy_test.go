package sessionlog

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCopy(t *testing.T) {
	log := "# note\n" + block(1, "| a") + block(2, "# task: x", "| b", "! c") + "# event\n" + hdr(3) + "| torn \xe2\x82"
	p := writeLog(t, log)
	for _, tc := range []struct {
		name string
		opt  CopyOptions
		want string
	}{
		{"whole", CopyOptions{}, "# note\n" + block(1, "| a") + block(2, "# task: x", "| b", "! c") + "# event\n" + hdr(3) + "| torn \uFFFD\n"},
		{"session", CopyOptions{Session: 2}, block(2, "# task: x", "| b", "! c")},
		{"session numbered", CopyOptions{Session: 2, Numbers: true},
			"     1\t" + hdr(2) + "     2\t# task: x\n     3\t| b\n     4\t! c\n     5\t" + endl(2, 0, "")},
		{"torn session", CopyOptions{Session: 3, Numbers: true}, "     1\t" + hdr(3) + "     2\t| torn \uFFFD\n"},
		{"whole numbered", CopyOptions{Numbers: true},
			"      \t# note\n     1\t" + hdr(1) + "     2\t| a\n     3\t" + endl(1, 0, "") +
				"     1\t" + hdr(2) + "     2\t# task: x\n     3\t| b\n     4\t! c\n     5\t" + endl(2, 0, "") +
				"      \t# event\n     1\t" + hdr(3) + "     2\t| torn \uFFFD\n"},
		{"closed session with follow returns", CopyOptions{Session: 1, Follow: true}, block(1, "| a")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Copy(context.Background(), p, &buf, tc.opt); err != nil {
				t.Fatal(err)
			}
			if buf.String() != tc.want {
				t.Errorf("got\n%q\nwant\n%q", buf.String(), tc.want)
			}
		})
	}
	err := Copy(context.Background(), p, io.Discard, CopyOptions{Session: 9})
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("Copy of a missing session: %v", err)
	}
	err = Copy(context.Background(), filepath.Join(t.TempDir(), "none"), io.Discard, CopyOptions{})
	wantErr(t, err, "no such file or directory")

	// A corrupt log is printed without its control characters.
	p = writeLog(t, "\x1b]0;pwned\x07\n\x00\xff")
	var buf bytes.Buffer
	if err := Copy(context.Background(), p, &buf, CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	if buf.String() != "\uFFFD]0;pwned\uFFFD\n\uFFFD\uFFFD\n" {
		t.Errorf("corrupt log printed as %q", buf.String())
	}
}

// syncBuf is a bytes.Buffer safe for a writer and a polling reader.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls until the buffer contains want (bounded: a deadlock guard, not a timing check).
func waitFor(t *testing.T, b *syncBuf, want string) {
	t.Helper()
	for i := 0; i < 2000; i++ {
		if strings.Contains(b.String(), want) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("output never contained %q; got:\n%s", want, b.String())
}

func TestCopyFollow(t *testing.T) {
	p := writeLog(t, block(1, "| old")+block(2, "| latest"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuf
	done := make(chan error, 1)
	go func() { done <- Copy(ctx, p, &out, CopyOptions{Follow: true, Poll: 5 * time.Millisecond}) }()
	waitFor(t, &out, endl(2, 0, ""))

	b, err := Begin(p, 3, at(3), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(b.Stdout(), "live line\n")
	waitFor(t, &out, "| live line\n")
	b.End(at(3), 0, "")
	waitFor(t, &out, endl(3, 0, "")[:30])

	// The log is moved aside and a fresh one started: follow goes on with the new file.
	if _, err := MoveAside(p, at(4)); err != nil {
		t.Fatal(err)
	}
	b, err = Begin(p, 4, at(4), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(b.Stdout(), "in the fresh log\n")
	waitFor(t, &out, "| in the fresh log\n")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Copy did not return after its context was cancelled")
	}
	if got := out.String(); strings.Contains(got, "old") || !strings.HasPrefix(got, hdr(2)) {
		t.Errorf("follow did not start at the latest block:\n%s", got)
	}
}

func TestCopyFollowSession(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cryo.log")
	b, err := Begin(p, 5, at(5), []string{"task: x"})
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuf
	done := make(chan error, 1)
	go func() {
		done <- Copy(context.Background(), p, &out, CopyOptions{Session: 5, Follow: true, Numbers: true, Poll: 5 * time.Millisecond})
	}()
	waitFor(t, &out, "     2\t# task: x\n")
	io.WriteString(b.Stdout(), "--- CRYO END 5 2026-11-22T10:04:51Z exit=0 ---\n")
	waitFor(t, &out, "     3\t| --- CRYO END 5")
	b.End(at(5).Add(time.Minute), 0, "")
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("following a session did not stop at its END line")
	}
	if !strings.HasSuffix(out.String(), "     4\t--- CRYO END 5 2026-11-22T15:01:03Z exit=0 ---\n") {
		t.Errorf("output:\n%s", out.String())
	}
}

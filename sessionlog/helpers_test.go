package sessionlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 3, 0, time.UTC)

// at is the start time used for session n in hand-made logs.
func at(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }

func hdr(n int) string {
	return fmt.Sprintf("--- CRYO SESSION %d %s ---\n", n, at(n).Format(timeLayout))
}

func endl(n, exit int, reason string) string {
	s := fmt.Sprintf("--- CRYO END %d %s exit=%d", n, at(n).Add(5*time.Minute).Format(timeLayout), exit)
	if reason != "" {
		s += " reason=" + reason
	}
	return s + " ---\n"
}

// block is a closed block of session n with the given body lines (each gets a newline).
func block(n int, body ...string) string {
	var b strings.Builder
	b.WriteString(hdr(n))
	for _, l := range body {
		b.WriteString(l + "\n")
	}
	b.WriteString(endl(n, 0, ""))
	return b.String()
}

func writeLog(t testing.TB, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cryo.log")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func readAll(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// lines reads a block with Each.
func lines(t testing.TB, p string, info *Info) []Line {
	t.Helper()
	var out []Line
	if err := Each(p, info, func(l Line) error { out = append(out, l); return nil }); err != nil {
		t.Fatalf("Each(session %d): %v", info.Session, err)
	}
	return out
}

// texts are the texts of the lines of one kind.
func texts(ls []Line, k Kind) []string {
	var out []string
	for _, l := range ls {
		if l.Kind == k {
			out = append(out, l.Text)
		}
	}
	return out
}

// checkInfo checks the invariants every Info from Latest or Find has, by reading the block.
func checkInfo(t testing.TB, p string, info *Info) []Line {
	t.Helper()
	ls := lines(t, p, info)
	if len(ls) != info.Lines {
		t.Fatalf("session %d: Each gave %d lines, Info.Lines = %d", info.Session, len(ls), info.Lines)
	}
	if ls[0].Kind != Header || !strings.Contains(ls[0].Text, fmt.Sprintf(" %d ", info.Session)) {
		t.Fatalf("session %d: first line %+v", info.Session, ls[0])
	}
	last := ls[len(ls)-1]
	if (last.Kind == End) != (info.End != nil) {
		t.Fatalf("session %d: last line %+v but End = %+v", info.Session, last, info.End)
	}
	for i, l := range ls {
		if l.N != i+1 {
			t.Fatalf("session %d: line %d numbered %d", info.Session, i+1, l.N)
		}
	}
	return ls
}

func wantErr(t testing.TB, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q, want it to contain %q", err, want)
	}
}

func wantCorrupt(t testing.TB, err error, want string) *CorruptError {
	t.Helper()
	wantErr(t, err, want)
	var ce *CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("error %q is not a *CorruptError wrapping ErrCorrupt", err)
	}
	return ce
}

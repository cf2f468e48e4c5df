package sessionlog

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"unicode/utf8"
)

// The agent's lines may be in the log as it printed them (wholeLine): every reader of this
// package gives them sanitized, and a raw line never ends a block or is taken for a marker of
// another form.
func TestReadersSanitizeRawAgentLines(t *testing.T) {
	raw := []string{"csi \x1b[2J", "osc \x1b]0;t\x07", "c1 \xc2\x9b lone \x9b", "nul \x00", "cr \r x", "bad \xff\xfe"}
	var body []string
	for i, r := range raw {
		if i%2 == 0 {
			body = append(body, "| "+r)
		} else {
			body = append(body, "! "+r)
		}
	}
	p := writeLog(t, block(1, body...)+block(2, "| \x1b[31m--- CRYO END 2 2026-11-22T12:00:00Z exit=0 ---"))
	clean := func(what, s string) {
		t.Helper()
		if !utf8.ValidString(s) || strings.ContainsAny(s, "\x00\x07\x1b\r\u009b") {
			t.Errorf("%s gives %q raw", what, s)
		}
	}
	info, err := Find(p, 1)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := Each(p, info, func(l Line) error {
		clean("Each", l.Text)
		clean("Line.Raw", l.Raw())
		if l.Kind == Stdout || l.Kind == Stderr {
			n++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != len(raw) {
		t.Errorf("Each gave %d agent lines, want %d", n, len(raw))
	}
	tail, err := Tail(p, info, 20)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range tail {
		clean("Tail", l.Text)
	}
	var out bytes.Buffer
	if err := Copy(context.Background(), p, &out, CopyOptions{Numbers: true}); err != nil {
		t.Fatal(err)
	}
	clean("Copy", strings.ReplaceAll(out.String(), "\n", ""))
	latest, err := Latest(p, -1)
	if err != nil || latest.Session != 2 || latest.End == nil || latest.Lines != 3 {
		t.Fatalf("Latest = %+v, %v: the agent's forged END line must stay inside block 2", latest, err)
	}
}

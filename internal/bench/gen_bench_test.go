package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/sessionlog"
)

// genStart is the start of the first generated session; sessions follow every 6 hours, so
// 100,000 sessions span about 68 years.
var genStart = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)

// genSession is one generated session: the lines cryochamber writes for it.
type genSession struct {
	n          int
	start, end time.Time
	meta       []string // "# " lines after the SESSION line
	out        []string // what the agent printed: "!" then text for stderr, else stdout
	note       string   // cryochamber's note before the END line
	between    string   // a "# <time> ..." note after the block ("" for none)
}

// words make up the agent's lines; the generator picks among them with a fixed seed, so every
// run writes the same log.
var words = []string{"build", "the", "tests", "passed", "PR", "#41", "review", "comments", "fixed",
	"go", "vet", "ok", "checking", "CI", "pipeline", "deploy", "staging", "übersicht", "naïve", "✓",
	"waiting", "for", "upstream", "release", "v1.2.3", "→", "merged", "into", "main", "issue"}

// session returns the n-th generated session (n from 1); rng shapes its body.
func session(n int, rng *rand.Rand) genSession {
	return sessionAt(n, genStart.Add(time.Duration(n-1)*6*time.Hour), rng)
}

// sessionAt is session n, started at start.
func sessionAt(n int, start time.Time, rng *rand.Rand) genSession {
	dur := time.Duration(30+rng.IntN(600)) * time.Second
	s := genSession{n: n, start: start, end: start.Add(dur)}
	s.meta = []string{
		"task: step " + strconv.Itoa(n) + " of the plan",
		"command: ./agent.sh",
		"due: " + start.Format(time.RFC3339) + " (plan)",
	}
	lines := 30 + rng.IntN(130)
	var b []byte
	for i := 0; i < lines; i++ {
		b = b[:0]
		if rng.IntN(20) == 0 {
			b = append(b, '!')
		}
		for w := 4 + rng.IntN(22); w > 0; w-- {
			b = append(b, words[rng.IntN(len(words))]...)
			b = append(b, ' ')
		}
		if rng.IntN(8) == 0 {
			b = append(b, '\t')
		}
		b = append(b, "line "...)
		b = strconv.AppendInt(b, int64(i), 10)
		s.out = append(s.out, string(b))
	}
	s.out = append(s.out,
		"[CRYO:EXIT 0] step "+strconv.Itoa(n)+" done",
		"[CRYO:PLAN look at the release notes next]",
		"[CRYO:WAKE "+start.Add(6*time.Hour).Format("2006-01-02T15:04")+"]",
	)
	s.note = fmt.Sprintf("agent exited with status 0 after %s", dur)
	if n%50 == 0 {
		s.between = "wake: not due: next wake at " + start.Add(6*time.Hour).Format(time.RFC3339) + "; nothing to do"
	}
	return s
}

// appendSession appends the bytes sessionlog's writer produces for s (Begin with s.meta, each
// output line on its stream, Note, End with exit 0, then AppendNote of s.between), for the
// ASCII-and-UTF-8, control-free text session makes. TestGeneratorMatchesTheWriter holds it to
// that.
func appendSession(b []byte, s genSession) []byte {
	b = append(b, "--- CRYO SESSION "...)
	b = strconv.AppendInt(b, int64(s.n), 10)
	b = append(b, ' ')
	b = s.start.UTC().AppendFormat(b, "2006-01-02T15:04:05Z")
	b = append(b, " ---\n"...)
	for _, m := range s.meta {
		b = append(b, "# "...)
		b = append(b, m...)
		b = append(b, '\n')
	}
	for _, l := range s.out {
		if len(l) > 0 && l[0] == '!' {
			b = append(b, "! "...)
			b = append(b, l[1:]...)
		} else {
			b = append(b, "| "...)
			b = append(b, l...)
		}
		b = append(b, '\n')
	}
	b = append(b, "# "...)
	b = append(b, s.note...)
	b = append(b, "\n--- CRYO END "...)
	b = strconv.AppendInt(b, int64(s.n), 10)
	b = append(b, ' ')
	b = s.end.UTC().AppendFormat(b, "2006-01-02T15:04:05Z")
	b = append(b, " exit=0 ---\n"...)
	if s.between != "" {
		b = append(b, "# "...)
		b = s.end.Add(time.Minute).UTC().AppendFormat(b, "2006-01-02T15:04:05Z")
		b = append(b, ' ')
		b = append(b, s.between...)
		b = append(b, '\n')
	}
	return b
}

// writeWithSessionlog writes s with the real writer, as a wake does.
func writeWithSessionlog(path string, s genSession) error {
	blk, err := sessionlog.Begin(path, s.n, s.start, s.meta)
	if err != nil {
		return err
	}
	for _, l := range s.out {
		w := blk.Stdout()
		if len(l) > 0 && l[0] == '!' {
			w, l = blk.Stderr(), l[1:]
		}
		if _, err := w.Write([]byte(l + "\n")); err != nil {
			return err
		}
	}
	if err := blk.Note(s.note); err != nil {
		return err
	}
	if err := blk.End(s.end, 0, ""); err != nil {
		return err
	}
	if s.between != "" {
		return sessionlog.AppendNote(path, s.end.Add(time.Minute), s.between)
	}
	return nil
}

// genLog writes a log of at least size bytes to path and returns its number of sessions.
func genLog(tb testing.TB, path string, size int64) int {
	tb.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	var buf []byte
	var written int64
	n := 0
	for written < size {
		n++
		buf = appendSession(buf[:0], session(n, rng))
		if _, err := w.Write(buf); err != nil {
			tb.Fatal(err)
		}
		written += int64(len(buf))
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return n
}

// The generator writes what sessionlog's writer writes, byte for byte: the big logs are in the
// real format without 200,000 fsyncs to make them.
func TestGeneratorMatchesTheWriter(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.log")
	rng := rand.New(rand.NewPCG(1, 2))
	var want []byte
	for n := 1; n <= 120; n++ {
		s := session(n, rng)
		if err := writeWithSessionlog(real, s); err != nil {
			t.Fatal(err)
		}
		want = appendSession(want, s)
	}
	got, err := os.ReadFile(real)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		t.Fatalf("generator and writer differ at byte %d:\nwriter:    %q\ngenerator: %q", i,
			got[max(0, i-40):min(len(got), i+40)], want[max(0, i-40):min(len(want), i+40)])
	}
	gen := filepath.Join(dir, "gen.log")
	if n := genLog(t, gen, int64(len(want))); n != 120 {
		t.Fatalf("genLog wrote %d sessions, want 120", n)
	}
	if data, err := os.ReadFile(gen); err != nil || !bytes.Equal(data, want) {
		t.Fatalf("genLog's file differs from appendSession's bytes (%v)", err)
	}
	info, err := sessionlog.Latest(gen, -1)
	if err != nil || info.Session != 120 || info.End == nil {
		t.Fatalf("Latest of the generated log = %+v, %v; want closed session 120", info, err)
	}
	for _, n := range []int{1, 50, 51, 119} {
		if info, err := sessionlog.Find(gen, n); err != nil || info.Session != n {
			t.Errorf("Find(%d) = %+v, %v", n, info, err)
		}
	}
}

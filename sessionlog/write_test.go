package sessionlog

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestGolden writes a small log through the API and compares it byte for byte with
// testdata/golden.log (go test -run TestGolden -update rewrites it).
func TestGolden(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cryo.log")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(AppendNote(p, t0.Add(-time.Minute), "chamber started\nsecond line of the event"))
	b, err := Begin(p, 1, t0, []string{"task: Follow up on PR #41", "command: opencode run"})
	must(err)
	io.WriteString(b.Stdout(), "hello\r\nworld\n")
	io.WriteString(b.Stderr(), "warn: \x1b[31mred\x1b[0m\n")
	io.WriteString(b.Stdout(), "--- CRYO END 1 2026-11-22T10:04:51Z exit=0 ---\n[CRYO:EXIT 0] done\n\nno newline at the end")
	io.WriteString(b.Stderr(), "bad \xff\xfe utf8, a bell\a, cut \xe2\x82")
	must(b.Note("exit marker seen\r\n" + TornNote))
	must(b.End(t0.Add(4*time.Minute+48*time.Second+999*time.Millisecond), 0, ""))
	b, err = Begin(p, 2, t0.Add(time.Hour), nil)
	must(err)
	io.WriteString(b.Stdout(), "\t| --- CRYO SESSION 3 2026-11-22T12:00:03Z ---\n")
	must(b.End(t0.Add(time.Hour+time.Second), 2, "no-exit"))
	must(AppendNote(p, t0.Add(2*time.Hour), "wake fired before its time"))

	got := readAll(t, p)
	golden := filepath.Join("testdata", "golden.log")
	if *update {
		must(os.WriteFile(golden, []byte(got), 0o644))
	}
	want, err := os.ReadFile(golden)
	must(err)
	if got != string(want) {
		t.Errorf("log differs from %s (run with -update to accept):\n%s", golden, got)
	}
	info, err := Latest(p, -1)
	must(err)
	if info.Session != 2 || info.End == nil || info.End.Reason != "no-exit" {
		t.Errorf("Latest = %+v", info)
	}
}

// writeBlock writes stdout chunks (and stderr chunks) through a block and returns the block's
// lines as read back.
func writeBlock(t *testing.T, out, errs []string) (*Block, []Line) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cryo.log")
	b, err := Begin(p, 1, t0, []string{"task: t"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < max(len(out), len(errs)); i++ {
		if i < len(out) {
			if _, err := io.WriteString(b.Stdout(), out[i]); err != nil {
				t.Fatal(err)
			}
		}
		if i < len(errs) {
			if _, err := io.WriteString(b.Stderr(), errs[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.End(t0.Add(time.Minute), 0, ""); err != nil {
		t.Fatal(err)
	}
	info, err := Latest(p, b.Offset())
	if err != nil {
		t.Fatal(err)
	}
	if info.Lines != b.Lines() {
		t.Fatalf("Latest.Lines = %d, Block.Lines = %d", info.Lines, b.Lines())
	}
	return b, checkInfo(t, p, info)
}

func TestStreamLines(t *testing.T) {
	long := strings.Repeat("a", rawFlush-2) + "€" + strings.Repeat("b", 10) // € straddles a raw flush
	run := strings.Repeat("a", rawFlush-1) + "\xff\xfe" + "b"               // invalid run straddles it
	cr := strings.Repeat("a", rawFlush-1) + "\r\nnext"                      // \r at the flush point
	for _, tc := range []struct {
		name string
		out  []string
		want []string
	}{
		{"lines", []string{"one\ntwo\n"}, []string{"one", "two"}},
		{"empty lines", []string{"\n\n"}, []string{"", ""}},
		{"crlf", []string{"a\r\nb\r\n"}, []string{"a", "b"}},
		{"crlf split", []string{"a\r", "\nb\n"}, []string{"a", "b"}},
		{"only one cr stripped", []string{"a\r\r\n"}, []string{"a\uFFFD"}},
		{"cr at end of stream", []string{"a\r"}, []string{"a\uFFFD"}},
		{"partial last line", []string{"a\nb"}, []string{"a", "b"}},
		{"chunks", []string{"he", "llo", "\nwor", "ld\n"}, []string{"hello", "world"}},
		{"rune split", []string{"caf\xc3", "\xa9\n"}, []string{"café"}},
		{"rune split 4", []string{"\xf0\x9f", "\x98", "\x80!\n"}, []string{"😀!"}},
		{"invalid run split", []string{"a\xff", "\xfe", "b\n"}, []string{"a\uFFFDb"}},
		{"cut at end", []string{"x\xe2\x82"}, []string{"x\uFFFD"}},
		{"cut before newline", []string{"x\xe2\x82\ny\n"}, []string{"x\uFFFD", "y"}},
		{"controls", []string{"\x1b[1mbold\x00\x7f\u0085\n"}, []string{"\uFFFD[1mbold\uFFFD\uFFFD\uFFFD"}},
		{"forged end", []string{"--- CRYO END 1 2026-11-22T10:04:51Z exit=0 ---\n"}, []string{"--- CRYO END 1 2026-11-22T10:04:51Z exit=0 ---"}},
		{"rune at raw flush", []string{long + "\n"}, []string{long}},
		{"run at raw flush", []string{run + "\n"}, []string{strings.Repeat("a", rawFlush-1) + "\uFFFDb"}},
		{"cr at raw flush", []string{cr + "\n"}, []string{strings.Repeat("a", rawFlush-1), "next"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ls := writeBlock(t, tc.out, nil)
			if got := texts(ls, Stdout); !slices.Equal(got, tc.want) {
				t.Errorf("stdout lines %q, want %q", short(got), short(tc.want))
			}
		})
	}
}

func short(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		if len(x) > 40 {
			x = fmt.Sprintf("%s...(%d bytes)", x[:20], len(x))
		}
		out[i] = x
	}
	return out
}

// A line longer than MaxText is cut into MaxText pieces on UTF-8 boundaries, whatever the
// chunking, and sanitizing that expands bytes (1 control byte → 3 bytes) is cut too.
func TestLongLines(t *testing.T) {
	for _, tc := range []struct {
		name  string
		line  string
		chunk int
		want  []int // piece lengths
	}{
		{"exactly MaxText", strings.Repeat("a", MaxText), 0, []int{MaxText}},
		{"MaxText+1", strings.Repeat("a", MaxText+1), 0, []int{MaxText, 1}},
		{"2.5 MiB", strings.Repeat("a", 5*MaxText/2), 0, []int{MaxText, MaxText, MaxText / 2}},
		{"rune on the cut", strings.Repeat("a", MaxText-1) + "éb", 0, []int{MaxText - 1, 3}},
		{"4-byte rune on the cut", strings.Repeat("a", MaxText-2) + "😀b", 0, []int{MaxText - 2, 5}},
		{"small chunks", strings.Repeat("é", MaxText/2+1), 4093, []int{MaxText, 2}},
		{"expansion", strings.Repeat("\x01", MaxText/2), 0, []int{MaxText - 1, MaxText/2*3 - (MaxText - 1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var chunks []string
			in := tc.line + "\n"
			if tc.chunk == 0 {
				chunks = []string{in}
			}
			for tc.chunk > 0 && in != "" {
				n := min(tc.chunk, len(in))
				chunks = append(chunks, in[:n])
				in = in[n:]
			}
			_, ls := writeBlock(t, chunks, nil)
			got := texts(ls, Stdout)
			var lens []int
			for _, g := range got {
				lens = append(lens, len(g))
				if !utf8.ValidString(g) {
					t.Errorf("piece is not valid UTF-8")
				}
			}
			if !slices.Equal(lens, tc.want) {
				t.Errorf("piece lengths %v, want %v", lens, tc.want)
			}
			if strings.Join(got, "") != Sanitize(tc.line) {
				t.Errorf("pieces do not join to the sanitized line")
			}
		})
	}
}

func TestOnStdoutLineAndConcurrency(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cryo.log")
	b, err := Begin(p, 4, t0, []string{"task: a\nmultiline task", "command: x"})
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		n    int
		text string
	}
	var got []seen
	b.OnStdoutLine(func(n int, text string) { got = append(got, seen{n, text}) })
	var wg sync.WaitGroup
	for _, w := range []struct {
		w    io.Writer
		name string
	}{{b.Stdout(), "out"}, {b.Stderr(), "err"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				// Two writes per line, so that the other stream can come between them.
				fmt.Fprintf(w.w, "%s %d ", w.name, i)
				if i%7 == 0 {
					fmt.Fprintf(w.w, "[cRyO:EXIT 0] ") // OnStdoutLine sees the lines that may hold a marker
				}
				fmt.Fprintf(w.w, "%s\n", strings.Repeat("x", i%300))
			}
		}()
	}
	wg.Wait()
	if err := b.Note("between"); err != nil {
		t.Fatal(err)
	}
	if err := b.End(t0.Add(time.Minute), 1, ""); err != nil {
		t.Fatal(err)
	}
	info, err := Latest(p, b.Offset())
	if err != nil {
		t.Fatal(err)
	}
	ls := checkInfo(t, p, info)
	if b.Lines() != len(ls) || len(ls) != 1+3+4000+1+1 {
		t.Fatalf("Block.Lines = %d, read %d lines", b.Lines(), len(ls))
	}
	var fromLog []seen
	for _, l := range ls {
		if l.Kind == Stdout && strings.Contains(l.Text, "[cRyO:") {
			fromLog = append(fromLog, seen{l.N, l.Text})
		}
	}
	if len(fromLog) != 2000/7+1 || !slices.Equal(got, fromLog) {
		t.Fatalf("OnStdoutLine saw %d lines that differ from the %d marker lines in the log", len(got), len(fromLog))
	}
	for _, k := range []Kind{Stdout, Stderr} {
		name := map[Kind]string{Stdout: "out", Stderr: "err"}[k]
		for i, s := range texts(ls, k) {
			marker := ""
			if i%7 == 0 {
				marker = "[cRyO:EXIT 0] "
			}
			if want := fmt.Sprintf("%s %d %s%s", name, i, marker, strings.Repeat("x", i%300)); s != want {
				t.Fatalf("%s line %d = %q, want %q", name, i, s, want)
			}
		}
	}
	if m := texts(ls, Meta); !slices.Equal(m, []string{"task: a", "multiline task", "command: x", "between"}) {
		t.Errorf("meta lines %q", m)
	}
}

func TestBlockErrors(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "cryo.log")
	_, err := Begin(p, 0, t0, nil)
	wantErr(t, err, "session number 0: must be at least 1")
	_, err = Begin(filepath.Join(dir, "missing", "cryo.log"), 1, t0, nil)
	wantErr(t, err, "no such file or directory")
	_, err = Begin(p, 1, time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), nil)
	wantErr(t, err, "outside the years 1 to 9999")

	b, err := Begin(p, 1, t0, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, b.End(t0, 3, ""), "exit code 3: must be 0, 1 or 2")
	wantErr(t, b.End(t0, 0, "timeout"), "a reason goes with exit code 2")
	wantErr(t, b.End(t0, 2, "Time Out"), "must be a word")
	// The block is still open after refused arguments.
	if _, err := io.WriteString(b.Stdout(), "still open\n"); err != nil {
		t.Fatal(err)
	}
	if err := b.End(t0, 2, "timeout"); err != nil {
		t.Fatal(err)
	}
	if err := b.End(t0, 0, ""); !errors.Is(err, ErrClosed) {
		t.Errorf("second End: %v, want ErrClosed", err)
	}
	if _, err := b.Stdout().Write([]byte("x\n")); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after End: %v, want ErrClosed", err)
	}
	if err := b.Note("x"); !errors.Is(err, ErrClosed) {
		t.Errorf("Note after End: %v, want ErrClosed", err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("log mode %v, want 0600", fi.Mode().Perm())
	}
	info, err := Latest(p, -1)
	if err != nil || info.End.Reason != "timeout" || info.End.Exit != 2 {
		t.Fatalf("Latest = %+v, %v", info, err)
	}
}

// A write error (disk full) is sticky and reported; End still closes the block when it can.
func TestWriteErrorSticky(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /dev/full:", err)
	}
	p := filepath.Join(t.TempDir(), "cryo.log")
	b, err := Begin(p, 1, t0, nil)
	if err != nil {
		t.Fatal(err)
	}
	good := b.f
	b.f = full
	_, err = io.WriteString(b.Stdout(), "lost\n")
	wantErr(t, err, "no space left on device")
	_, err = io.WriteString(b.Stderr(), "also lost\n")
	wantErr(t, err, "no space left on device")
	wantErr(t, b.Note("x"), "no space left on device")
	// The disk has room again for the END line.
	b.f = good
	full.Close()
	wantErr(t, b.End(t0, 0, ""), "some output was not logged")
	info, err := Latest(p, -1)
	if err != nil || info.End == nil {
		t.Fatalf("Latest = %+v, %v", info, err)
	}
}

func TestBeginAfterTornLine(t *testing.T) {
	// The header of session 2 was cut short by a crash: the last line has no newline.
	p := writeLog(t, block(1, "| a")+"--- CRYO SESSION 2 2026-11-22T11:0")
	info, err := Latest(p, -1)
	if err != nil || info.Session != 1 || info.End == nil {
		t.Fatalf("Latest before = %+v, %v", info, err)
	}
	b, err := Begin(p, 2, at(2), []string{"task: again"})
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(b.Stdout(), "ok\n")
	if err := b.End(at(2).Add(time.Minute), 0, ""); err != nil {
		t.Fatal(err)
	}
	want := block(1, "| a") + "--- CRYO SESSION 2 2026-11-22T11:0\n# " + TornNote + "\n"
	if got := readAll(t, p); !strings.HasPrefix(got, want) {
		t.Fatalf("log:\n%s\nwant prefix:\n%s", got, want)
	}
	if int(b.Offset()) != len(want) {
		t.Errorf("Offset = %d, want %d", b.Offset(), len(want))
	}
	for _, hint := range []int64{-1, b.Offset()} {
		info, err := Latest(p, hint)
		if err != nil || info.Session != 2 || info.Offset != b.Offset() || info.End == nil {
			t.Fatalf("Latest(hint %d) = %+v, %v", hint, info, err)
		}
	}
	f, err := Find(p, 1)
	if err != nil || f.End == nil || f.Lines != 3 {
		t.Fatalf("Find(1) = %+v, %v", f, err)
	}
}

func TestAppendNote(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cryo.log")
	if err := AppendNote(p, t0, "first\r\nsecond\x1b"); err != nil {
		t.Fatal(err)
	}
	if _, err := Latest(p, -1); !errors.Is(err, ErrNoBlocks) {
		t.Errorf("Latest of a log with only notes: %v, want ErrNoBlocks", err)
	}
	want := "# 2026-11-22T10:00:03Z first\n# 2026-11-22T10:00:03Z second\uFFFD\n"
	if got := readAll(t, p); got != want {
		t.Errorf("log %q, want %q", got, want)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v", fi.Mode(), err)
	}
	err := AppendNote(filepath.Join(t.TempDir(), "no", "cryo.log"), t0, "x")
	wantErr(t, err, "no such file or directory")
	wantErr(t, AppendNote(p, time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC), "x"), "outside the years")
}

func TestCloseTorn(t *testing.T) {
	now := at(9)
	closed := endl(3, 2, "")[:0] + fmt.Sprintf("--- CRYO END 3 %s exit=2 reason=crashed ---\n", now.Format(timeLayout))
	torn := "# " + TornNote + "\n"
	for _, tc := range []struct {
		name   string
		log    string
		want   string // the whole log after CloseTorn; "" = unchanged
		lines  int    // Lines of the closed block; 0: nothing was torn
		errSub string
	}{
		{name: "closed", log: block(1) + block(3, "| x")},
		{name: "closed then notes", log: block(3, "| x") + "# event\n"},
		{name: "only notes", log: "# event\n"},
		{name: "newline at end", log: block(1) + hdr(3) + "| x\n", want: block(1) + hdr(3) + "| x\n" + closed, lines: 3},
		{name: "header only", log: hdr(3), want: hdr(3) + closed, lines: 2},
		{name: "cut mid-line", log: hdr(3) + "| half", want: hdr(3) + "| half\n" + torn + closed, lines: 4},
		{name: "cut mid-character", log: hdr(3) + "| caf\xc3", want: hdr(3) + "| caf\xc3\n" + torn + closed, lines: 4},
		{name: "cut in the END line", log: hdr(3) + "| x\n--- CRYO END 3 2026-11-22T13:0",
			want: hdr(3) + "| x\n--- CRYO END 3 2026-11-22T13:0\n" + torn + closed, lines: 5},
		{name: "corrupt", log: hdr(3) + "garbage\n", errSub: "is not a SESSION, END"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeLog(t, tc.log)
			info, err := CloseTorn(p, now)
			if tc.errSub != "" {
				wantCorrupt(t, err, tc.errSub)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := readAll(t, p)
			if tc.lines == 0 {
				if info != nil || got != tc.log {
					t.Fatalf("nothing to close, but CloseTorn = %+v and log %q", info, got)
				}
				return
			}
			if got != tc.want {
				t.Fatalf("log %q, want %q", got, tc.want)
			}
			if info.Session != 3 || info.End == nil || info.End.Exit != 2 || info.End.Reason != "crashed" ||
				!info.End.End.Equal(now) || info.Lines != tc.lines {
				t.Fatalf("CloseTorn = %+v (end %+v)", info, info.End)
			}
			again, err := Latest(p, -1)
			if err != nil || *again.End != *info.End || again.Offset != info.Offset || again.Size != info.Size ||
				again.Lines != info.Lines {
				t.Fatalf("Latest after CloseTorn = %+v, %v; CloseTorn said %+v", again, err, info)
			}
			ls := checkInfo(t, p, again)
			if strings.Contains(tc.name, "cut") && ls[len(ls)-3].Kind != Torn {
				t.Errorf("the completed torn line reads as %v", ls[len(ls)-3].Kind)
			}
			// Nothing is torn any more, and the next session starts cleanly.
			if info, err := CloseTorn(p, now); info != nil || err != nil {
				t.Fatalf("second CloseTorn = %+v, %v", info, err)
			}
			b, err := Begin(p, 4, at(10), nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.End(at(10), 0, ""); err != nil {
				t.Fatal(err)
			}
			for n := 3; n <= 4; n++ {
				if f, err := Find(p, n); err != nil || f.End == nil {
					t.Fatalf("Find(%d) = %+v, %v", n, f, err)
				}
			}
		})
	}
	if info, err := CloseTorn(filepath.Join(t.TempDir(), "cryo.log"), now); info != nil || err != nil {
		t.Errorf("CloseTorn of a missing log = %+v, %v", info, err)
	}
}

func TestMoveAside(t *testing.T) {
	p := writeLog(t, "garbage")
	now := time.Date(2026, 11, 22, 10, 0, 3, 0, time.FixedZone("CET", 3600))
	got, err := MoveAside(p, now)
	if err != nil {
		t.Fatal(err)
	}
	if want := p + ".corrupt-20261122T090003Z"; got != want {
		t.Errorf("moved to %s, want %s", got, want)
	}
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("log still there: %v", err)
	}
	// Same second again: never overwrite the first copy.
	os.WriteFile(p, []byte("second"), 0o600)
	got2, err := MoveAside(p, now)
	if err != nil || got2 != got+"-1" {
		t.Fatalf("second MoveAside = %s, %v", got2, err)
	}
	os.WriteFile(p, []byte("third"), 0o600)
	got3, err := MoveAside(p, now)
	if err != nil || got3 != got+"-2" {
		t.Fatalf("third MoveAside = %s, %v", got3, err)
	}
	if readAll(t, got) != "garbage" || readAll(t, got2) != "second" || readAll(t, got3) != "third" {
		t.Errorf("contents mixed up")
	}
	_, err = MoveAside(p, now)
	wantErr(t, err, "no such file or directory")
}

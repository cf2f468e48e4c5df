package sessionlog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLatest(t *testing.T) {
	two := block(1, "| a", "! b") + block(2, "# task: x", "| c")
	for _, tc := range []struct {
		name    string
		log     string
		session int
		closed  bool
		lines   int
		offset  int // -1: the offset of the last "--- CRYO SESSION"
		size    int // -1: to EOF
	}{
		{"one block", block(1, "| a"), 1, true, 3, 0, -1},
		{"two blocks", two, 2, true, 4, -1, -1},
		{"notes after END", two + "# 2026-11-22T13:00:03Z wake fired early\n# more\n", 2, true, 4, -1, len(two)},
		{"notes before the first block", "# moved aside\n" + block(1), 1, true, 2, -1, -1},
		{"torn, newline at end", two + hdr(3) + "| x\n", 3, false, 2, -1, -1},
		{"torn, header only", two + hdr(3), 3, false, 1, -1, -1},
		{"torn mid-line", two + hdr(3) + "| x\n| half a li", 3, false, 3, -1, -1},
		{"torn mid-character", two + hdr(3) + "| x\n| caf\xc3", 3, false, 3, -1, -1},
		{"torn mid-4-byte character", two + hdr(3) + "! \xf0\x9f\x98", 3, false, 2, -1, -1},
		{"torn header is no block", two + "--- CRYO SESSION 3 2026-11-22T13:00", 2, true, 4, -1, len(two)},
		{"whole header without its newline is no block", two + strings.TrimSuffix(hdr(3), "\n"), 2, true, 4, -1, len(two)},
		{"torn END: still open", two + hdr(3) + "--- CRYO END 3 2026-11-22T13:05:03Z exit=0 ---", 3, false, 2, -1, -1},
		{"completed torn line inside", hdr(3) + "| half\n# " + TornNote + "\n" + endl(3, 2, "crashed"), 3, true, 4, 0, -1},
		{"completed torn line with a cut character", hdr(3) + "| caf\xc3\n# " + TornNote + "\n" + endl(3, 2, "crashed"), 3, true, 4, 0, -1},
		{"completed torn END line", hdr(3) + "--- CRYO END 3 2026-11-22T13:05:03Z exit=0 ---\n# " + TornNote + "\n" + endl(3, 2, "crashed"), 3, true, 4, 0, -1},
		{"completed torn header", block(2) + hdr(3)[:20] + "\n# " + TornNote + "\n" + block(3), 3, true, 2, -1, -1},
		{"completed whole torn header", block(2) + hdr(3) + "# " + TornNote + "\n" + block(3, "| x"), 3, true, 3, -1, -1},
		{"unclosed block before", hdr(1) + "| a\n" + block(2, "| b"), 2, true, 3, -1, -1},
		{"corruption before the latest block is not read", "garbage\x00\xff\n" + block(1) + block(2), 2, true, 2, -1, -1},
		{"bare prefixes", hdr(1) + "|\n!\n#\n" + endl(1, 0, ""), 1, true, 5, 0, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeLog(t, tc.log)
			off := tc.offset
			if off < 0 {
				off = strings.LastIndex(tc.log, "\n--- CRYO SESSION") + 1
				if strings.HasPrefix(tc.name, "torn header") || strings.HasPrefix(tc.name, "whole header") {
					off = strings.LastIndex(tc.log[:len(two)], "\n--- CRYO SESSION") + 1
				}
			}
			size := tc.size
			if size < 0 {
				size = len(tc.log) - off
			} else {
				size -= off
			}
			for _, hint := range []int64{-1, int64(off), 0, int64(len(tc.log) - 1), 5} {
				info, err := Latest(p, hint)
				if err != nil {
					t.Fatalf("Latest(hint %d): %v", hint, err)
				}
				if info.Session != tc.session || (info.End != nil) != tc.closed || info.Lines != tc.lines ||
					info.Offset != int64(off) || info.Size != int64(size) {
					t.Fatalf("Latest(hint %d) = %+v, want session %d closed %v lines %d offset %d size %d",
						hint, info, tc.session, tc.closed, tc.lines, off, size)
				}
				if !info.Start.Equal(at(tc.session)) {
					t.Errorf("Start = %v", info.Start)
				}
				checkInfo(t, p, info)
			}
		})
	}
}

func TestLatestNoBlocks(t *testing.T) {
	dir := t.TempDir()
	for name, log := range map[string]*string{
		"missing":       nil,
		"empty":         ptr(""),
		"only notes":    ptr("# a\n# b\n"),
		"torn note":     ptr("# a\n# b"),
		"torn header":   ptr("--- CRYO SESSION 1 2026"),
		"note and torn": ptr("# a\n# " + TornNote),
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if log != nil {
			os.WriteFile(p, []byte(*log), 0o600)
		}
		if _, err := Latest(p, -1); !errors.Is(err, ErrNoBlocks) {
			t.Errorf("%s: Latest: %v, want ErrNoBlocks", name, err)
		}
		if _, err := Find(p, 1); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: Find: %v, want ErrNotFound", name, err)
		}
	}
}

func ptr(s string) *string { return &s }

func TestLatestCorrupt(t *testing.T) {
	good := block(1, "| a")
	for _, tc := range []struct {
		name string
		log  string
		want string
		off  int // expected CorruptError.Offset, -1 to skip
	}{
		{"binary garbage", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\n", "", -1},
		{"text file", "hello\nworld\n", "\"world\" is not a SESSION, END", 6},
		{"NUL in the block", good + hdr(2) + "# a\x00b\n", "NUL byte", len(good) + len(hdr(2))},
		{"NULs at the end (zeroed tail)", good + hdr(2) + "| x\n\x00\x00\x00\x00", "NUL byte in torn line", -1},
		{"invalid UTF-8 in a complete line", good + hdr(2) + "# a\xe2\x82\n| b\n", "invalid UTF-8", len(good) + len(hdr(2))},
		{"hand-edited line", good + hdr(2) + "an edit without prefix\n" + endl(2, 0, ""), "\"an edit without prefix\" is not a SESSION, END", len(good) + len(hdr(2))},
		{"empty line", good + hdr(2) + "\n" + endl(2, 0, ""), "empty line", len(good) + len(hdr(2))},
		{"CRLF edit", good + strings.ReplaceAll(block(2, "| a"), "\n", "\r\n"), "does not end with", -1},
		{"malformed END", good + hdr(2) + "--- CRYO END 2 2026-11-22T12:05:03Z exit=7 ---\n", "malformed END line", len(good) + len(hdr(2))},
		{"malformed SESSION", good + "--- CRYO SESSION two 2026-11-22T12:00:03Z ---\n| x\n", "malformed SESSION line", len(good)},
		{"END mismatch", good + hdr(2) + "| x\n" + endl(3, 0, ""), "END line of session 3 closes the block of session 2", len(good) + len(hdr(2)) + 4},
		{"two ENDs", good + hdr(2) + endl(2, 0, "") + endl(2, 0, ""), "has no SESSION line before it (the END line of session 2 comes first)", len(good) + len(hdr(2)) + len(endl(2, 0, ""))},
		{"output after END", good + "| stray\n", "output line after the END line of session 1", len(good)},
		{"END without SESSION", "# x\n" + endl(1, 0, ""), "END line of session 1 has no SESSION line before it", 4},
		{"output without SESSION", "# x\n| out\n", "output line outside any session block", 4},
		{"numbers go down (END)", block(5) + block(3), "session numbers go down: END 5 comes before SESSION 3", 0 + len(hdr(5))},
		{"numbers go down past notes", block(5) + "# a\n# b\n" + block(5), "session numbers go down: END 5 comes before SESSION 5", len(hdr(5))},
		{"numbers go down (unclosed)", hdr(4) + block(4), "session numbers go down: SESSION 4 comes before SESSION 4", 0},
		{"line too long", good + hdr(2) + "| " + strings.Repeat("a", MaxText+1) + "\n", "line longer than 1048578 bytes", -1},
		{"torn tail too long", good + hdr(2) + "| " + strings.Repeat("a", MaxText+1), "line longer than 1048578 bytes", -1},
		{"torn garbage", good + "garbage without newline", "is not the start of any line form", len(good)},
		{"torn invalid UTF-8 inside", good + hdr(2) + "# \xff and more", "invalid UTF-8 in torn line", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeLog(t, tc.log)
			var first error
			for _, hint := range []int64{-1, 0, int64(len(good)), int64(len(tc.log)) - 2} {
				_, err := Latest(p, hint)
				if first == nil {
					first = err
				}
				ce := wantCorrupt(t, err, tc.want)
				if tc.off >= 0 && ce.Offset != int64(tc.off) {
					t.Errorf("Offset = %d, want %d (%v)", ce.Offset, tc.off, err)
				}
				if err.Error() != first.Error() {
					t.Errorf("hint %d gives %q, without hint %q", hint, err, first)
				}
			}
			if !strings.Contains(first.Error(), p) {
				t.Errorf("error %q does not name the file", first)
			}
		})
	}
}

// The hint is trusted only when it points at the start of the only SESSION line up to EOF.
func TestLatestHint(t *testing.T) {
	log := block(1, "| a") + block(2, "| b") + "# note\n" + hdr(3) + "| c\n"
	p := writeLog(t, log)
	o3 := int64(strings.Index(log, "--- CRYO SESSION 3"))
	o2 := int64(strings.Index(log, "--- CRYO SESSION 2"))
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size := int64(len(log))
	for _, tc := range []struct {
		name string
		hint int64
		used bool
	}{
		{"right", o3, true},
		{"stale (an older block)", o2, false},
		{"first block", 0, false},
		{"mid-line", o3 + 4, false},
		{"just after the newline of a | line", o3 + int64(len(hdr(3))), false},
		{"at a note", o3 - int64(len("# note\n")), false},
		{"at an END line", o2 - int64(len(endl(1, 0, ""))), false},
	} {
		info := latestAt(f, size, tc.hint)
		if (info != nil) != tc.used {
			t.Errorf("%s: latestAt(%d) = %+v, want used=%v", tc.name, tc.hint, info, tc.used)
		}
		got, err := Latest(p, tc.hint)
		if err != nil || got.Session != 3 || got.Offset != o3 || got.End != nil || got.Lines != 2 {
			t.Errorf("%s: Latest(%d) = %+v, %v", tc.name, tc.hint, got, err)
		}
	}
	for _, hint := range []int64{-1, -100, size, size + 100, 1 << 62} {
		if got, err := Latest(p, hint); err != nil || got.Session != 3 {
			t.Errorf("Latest(%d) = %+v, %v", hint, got, err)
		}
	}
}

// bigLog writes blocks 1..n whose sizes vary, some spanning many 64 KiB chunks.
func bigLog(t testing.TB, n int, skip func(int) bool) (string, map[int]int64) {
	t.Helper()
	var b strings.Builder
	offs := map[int]int64{}
	for i := 1; i <= n; i++ {
		if skip != nil && skip(i) {
			continue
		}
		offs[i] = int64(b.Len())
		b.WriteString(hdr(i))
		b.WriteString("# task: block " + fmt.Sprint(i) + "\n")
		lines := 1 + (i*7919)%40
		if i%17 == 0 {
			lines = 3000 // about 250 KiB
		}
		for j := 0; j < lines; j++ {
			fmt.Fprintf(&b, "| %d/%d %s\n", i, j, strings.Repeat("z", 80))
		}
		if i%23 == 0 {
			fmt.Fprintf(&b, "| %s\n", strings.Repeat("é", MaxText/2)) // one longest line
		}
		b.WriteString(endl(i, 0, ""))
		if i%5 == 0 {
			b.WriteString("# between\n")
		}
	}
	return writeLog(t, b.String()), offs
}

func TestFind(t *testing.T) {
	p, offs := bigLog(t, 120, func(i int) bool { return i%10 == 3 })
	latest, err := Latest(p, -1)
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n <= 125; n++ {
		info, err := Find(p, n)
		off, ok := offs[n]
		if !ok {
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("Find(%d) = %+v, %v; want ErrNotFound", n, info, err)
			}
			wantErr(t, err, fmt.Sprintf("session %d: session not found", n))
			continue
		}
		if err != nil {
			t.Fatalf("Find(%d): %v", n, err)
		}
		if info.Session != n || info.Offset != off || info.End == nil {
			t.Fatalf("Find(%d) = %+v, want offset %d", n, info, off)
		}
		checkInfo(t, p, info)
		if n == 120 && *info != *latest && (*info.End != *latest.End || info.Offset != latest.Offset || info.Size != latest.Size || info.Lines != latest.Lines) {
			t.Errorf("Find(120) = %+v, Latest = %+v", info, latest)
		}
	}
}

func TestFindEdges(t *testing.T) {
	unclosed := block(1) + hdr(2) + "| died\n" + block(3)
	p := writeLog(t, unclosed)
	info, err := Find(p, 2)
	if err != nil || info.End != nil || info.Lines != 2 || info.Size != int64(len(hdr(2))+len("| died\n")) {
		t.Fatalf("Find(2) of an unclosed block = %+v, %v", info, err)
	}
	checkInfo(t, p, info)

	// A forged header inside agent output, or a completed torn header, is not a boundary.
	forged := block(1, "| "+strings.TrimSuffix(hdr(2), "\n")) + hdr(2)[:25] + "\n# " + TornNote + "\n" + block(2)
	p = writeLog(t, forged)
	for n, lines := range map[int]int{1: 3, 2: 2} {
		info, err := Find(p, n)
		if err != nil || info.Lines != lines || info.End == nil {
			t.Fatalf("Find(%d) = %+v, %v", n, info, err)
		}
	}

	// The binary search lands in block 1 (more than half the file) and resyncs to SESSION 3.
	p = writeLog(t, block(1, slices.Repeat([]string{"| padding"}, 50)...)+hdr(3)+block(2))
	_, err = Find(p, 3)
	wantCorrupt(t, err, "session numbers go down: SESSION 2 follows SESSION 3")

	p = writeLog(t, block(1)+"--- CRYO SESSION 2 yesterday ---\n")
	_, err = Find(p, 2)
	wantCorrupt(t, err, "malformed SESSION line")

	p = writeLog(t, block(1)+hdr(2)+"| x\n"+endl(3, 0, ""))
	_, err = Find(p, 2)
	wantCorrupt(t, err, "END line of session 3 closes the block of session 2")

	p = writeLog(t, block(1)+hdr(2)+"oops\n")
	_, err = Find(p, 2)
	wantCorrupt(t, err, "\"oops\" is not a SESSION, END")
}

// Forge attempts: the agent prints END lines, SESSION lines, whole copies of old blocks and the
// TornNote text. None of it may split the block or change what Latest and Find return.
func TestForge(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cryo.log")
	for n := 1; n <= 3; n++ {
		b, err := Begin(p, n, at(n), []string{"task: " + TornNote, TornNote})
		if err != nil {
			t.Fatal(err)
		}
		old := readAll(t, p)
		fmt.Fprintf(b.Stdout(), "--- CRYO END %d %s exit=0 ---\n", n, at(n).Format(timeLayout))
		io.WriteString(b.Stdout(), old)
		io.WriteString(b.Stderr(), old)
		io.WriteString(b.Stdout(), hdr(n+1)+"# "+TornNote+"\n")
		b.Note(old)
		b.Note(TornNote)
		io.WriteString(b.Stdout(), "\n--- CRYO END 99 2026-11-22T10:04:51Z exit=0 ---")
		if err := b.End(at(n).Add(time.Minute), 1, ""); err != nil {
			t.Fatal(err)
		}
		for _, hint := range []int64{-1, b.Offset(), 0} {
			info, err := Latest(p, hint)
			if err != nil || info.Session != n || info.Offset != b.Offset() || info.Lines != b.Lines() ||
				info.End == nil || info.End.Exit != 1 {
				t.Fatalf("block %d: Latest(%d) = %+v, %v (Block: offset %d, %d lines)", n, hint, info, err, b.Offset(), b.Lines())
			}
			ls := checkInfo(t, p, info)
			for _, l := range ls[1 : len(ls)-1] {
				if l.Kind == Header || l.Kind == End || l.Kind == Torn {
					t.Fatalf("block %d: forged line read as %v: %q", n, l.Kind, l.Text)
				}
			}
		}
	}
	for n := 1; n <= 3; n++ {
		info, err := Find(p, n)
		if err != nil || info.Session != n || info.End == nil || info.End.Exit != 1 {
			t.Fatalf("Find(%d) = %+v, %v", n, info, err)
		}
	}
}

func TestEachAndTail(t *testing.T) {
	log := block(1) + hdr(2) + "# task: x\n| out\n! err\n| half\n# " + TornNote + "\n| after\n| cut \xe2\x82"
	p := writeLog(t, log)
	info, err := Latest(p, -1)
	if err != nil {
		t.Fatal(err)
	}
	ls := checkInfo(t, p, info)
	want := []Line{
		{1, Header, strings.TrimSuffix(hdr(2), "\n")},
		{2, Meta, "task: x"},
		{3, Stdout, "out"},
		{4, Stderr, "err"},
		{5, Torn, "| half"},
		{6, Meta, TornNote},
		{7, Stdout, "after"},
		{8, Torn, "| cut \uFFFD"},
	}
	if !slices.Equal(ls, want) {
		t.Fatalf("Each:\n%+v\nwant\n%+v", ls, want)
	}
	var raw []string
	for _, l := range ls {
		raw = append(raw, l.Raw())
	}
	wantRaw := strings.Split(strings.TrimPrefix(log, block(1)), "\n")
	wantRaw[len(wantRaw)-1] = "| cut \uFFFD"
	if !slices.Equal(raw, wantRaw) {
		t.Errorf("Raw lines %q, want %q", raw, wantRaw)
	}
	for _, n := range []int{1, 3, 8, 20} {
		tail, err := Tail(p, info, n)
		if err != nil {
			t.Fatal(err)
		}
		if w := want[max(0, len(want)-n):]; !slices.Equal(tail, w) {
			t.Errorf("Tail(%d) = %+v, want %+v", n, tail, w)
		}
	}
	if tail, err := Tail(p, info, 0); err != nil || tail != nil {
		t.Errorf("Tail(0) = %+v, %v", tail, err)
	}
	stop := errors.New("stop")
	count := 0
	err = Each(p, info, func(Line) error { count++; return stop })
	if err != stop || count != 1 {
		t.Errorf("Each did not stop at fn's error: %v after %d lines", err, count)
	}

	// The log changed under a stale Info.
	os.WriteFile(p, []byte(block(1)+block(5)), 0o600)
	err = Each(p, info, func(Line) error { return nil })
	wantErr(t, err, "no SESSION line of session 2 at byte 91")
	os.WriteFile(p, []byte(block(1)+block(5)+block(6)), 0o600)
	_, err = Tail(p, info, 8)
	wantErr(t, err, "SESSION line of session 6 inside the block of session 2")
	os.WriteFile(p, []byte(block(1)), 0o600)
	_, err = Tail(p, info, 8)
	wantErr(t, err, fmt.Sprintf("block of session 2 (bytes 91 to %d) is no longer in the log", len(log)))
	err = Each(p, info, func(Line) error { return nil })
	wantErr(t, err, "no SESSION line of session 2 at byte 91")
}

func TestTailLongLine(t *testing.T) {
	long := strings.Repeat("é", MaxText/2)
	p := writeLog(t, block(7, "| "+long, "| short"))
	info, err := Latest(p, -1)
	if err != nil {
		t.Fatal(err)
	}
	tail, err := Tail(p, info, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(tail) != 3 || tail[0].N != 2 || tail[0].Text != long[:tailText]+"…" || tail[1].Text != "short" || tail[2].Kind != End {
		t.Fatalf("Tail = %d lines, first %d bytes", len(tail), len(tail[0].Text))
	}
	if tail, _ := Tail(p, info, 10000); len(tail) != 4 {
		t.Errorf("Tail(10000) = %d lines", len(tail))
	}
}

// A block of many chunks and longest lines reads the same from the end as from a hint.
func TestLatestBigBlock(t *testing.T) {
	var b strings.Builder
	b.WriteString(block(1))
	b.WriteString(hdr(2))
	for i := 0; i < 5; i++ {
		b.WriteString("| " + strings.Repeat("x", MaxText) + "\n")
		b.WriteString("! " + strings.Repeat("€", MaxText/3) + "\n")
		for j := 0; j < 1000; j++ {
			fmt.Fprintf(&b, "| line %d %d\n", i, j)
		}
	}
	b.WriteString(endl(2, 0, ""))
	p := writeLog(t, b.String())
	for _, hint := range []int64{-1, int64(len(block(1)))} {
		info, err := Latest(p, hint)
		if err != nil || info.Session != 2 || info.Lines != 2+5*1002 || info.Size != int64(b.Len()-len(block(1))) {
			t.Fatalf("Latest(%d) = %+v, %v", hint, info, err)
		}
		checkInfo(t, p, info)
	}
}

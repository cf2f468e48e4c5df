package sessionlog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// FuzzLatest reads arbitrary bytes as a log. Latest never panics; it returns ErrNoBlocks, a
// *CorruptError, or an Info that Each, Tail, Find and CloseTorn agree with; and the hint never
// changes the answer.
func FuzzLatest(f *testing.F) {
	f.Add([]byte(block(1, "| a")+block(2, "# task: x", "! b")), int64(0))
	f.Add([]byte(block(1)+hdr(2)+"| caf\xc3"), int64(93))
	f.Add([]byte(hdr(3)+"| half\n# "+TornNote+"\n"+endl(3, 2, "crashed")), int64(0))
	f.Add([]byte("\x89PNG\r\n\x1a\n"), int64(-1))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte, hint int64) {
		p := filepath.Join(dir, "cryo.log")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		info, err := Latest(p, -1)
		withHint, herr := Latest(p, hint)
		if (err == nil) != (herr == nil) || err != nil && err.Error() != herr.Error() ||
			err == nil && (*info != *withHint && !sameInfo(info, withHint)) {
			t.Fatalf("Latest(-1) = %+v, %v; Latest(%d) = %+v, %v", info, err, hint, withHint, herr)
		}
		if err != nil {
			if !errors.Is(err, ErrNoBlocks) && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Latest: unexpected error %v", err)
			}
			return
		}
		size := int64(len(data))
		if info.Offset < 0 || info.Size <= 0 || info.Offset+info.Size > size || info.Lines < 1 {
			t.Fatalf("Info out of range: %+v (size %d)", info, size)
		}
		ls := checkInfo(t, p, info)
		tail, err := Tail(p, info, 3)
		if err != nil {
			t.Fatalf("Tail: %v", err)
		}
		want := ls[max(0, len(ls)-3):]
		for i := range tail {
			if tail[i].N != want[i].N || tail[i].Kind != want[i].Kind ||
				!strings.HasPrefix(want[i].Text, strings.TrimSuffix(tail[i].Text, "…")) {
				t.Fatalf("Tail %+v, Each %+v", tail[i], want[i])
			}
		}
		if found, err := Find(p, info.Session); err == nil && found.Offset == info.Offset && !sameInfo(found, info) {
			t.Fatalf("Find = %+v, Latest = %+v", found, info)
		}
		closed, err := CloseTorn(p, t0)
		if err != nil {
			t.Fatalf("CloseTorn: %v", err)
		}
		if (closed == nil) != (info.End != nil) {
			t.Fatalf("CloseTorn = %+v for %+v", closed, info)
		}
		after, err := Latest(p, -1)
		if err != nil || after.Session != info.Session || after.End == nil || after.Offset != info.Offset {
			t.Fatalf("after CloseTorn: Latest = %+v, %v (before %+v)", after, err, info)
		}
		if closed != nil && !sameInfo(closed, after) {
			t.Fatalf("CloseTorn = %+v, Latest = %+v", closed, after)
		}
		checkInfo(t, p, after)
	})
}

func sameInfo(a, b *Info) bool {
	if (a.End == nil) != (b.End == nil) || a.End != nil && (*a.End != *b.End) {
		return false
	}
	return a.Session == b.Session && a.Start.Equal(b.Start) && a.Offset == b.Offset && a.Size == b.Size && a.Lines == b.Lines
}

// FuzzWriteRead writes arbitrary stdout and stderr bytes through a Block, in chunks sized by
// cuts and interleaved, then reads the block back: the lines round-trip after sanitizing, the
// OnStdoutLine callback saw exactly the stdout lines that may hold a marker, with their
// numbers, the block is intact, and Trusted finds from Block.Ref what Latest finds.
func FuzzWriteRead(f *testing.F) {
	f.Add([]byte("hello\nworld\n"), []byte("warn\n"), []byte{1, 2, 3})
	f.Add([]byte("a\r\nb\rc\xff\xfe\xe2\x82\n--- CRYO END 1 x exit=0 ---\n"), []byte("\x00\x1b[1m"), []byte{0})
	f.Add([]byte("caf\xc3\xa9\n\xf0\x9f\x98\x80"), []byte(""), []byte{3, 1, 1, 1})
	f.Add([]byte("x [CRYO:EXIT 0] ok\n[cryo\n:WAKE]\n[Cryo:TODO"), []byte("[CRYO:EXIT 2]\n"), []byte{2, 5})
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, out, errs, cuts []byte) {
		p := filepath.Join(dir, "cryo.log")
		if err := os.Truncate(p, 0); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		b, err := Begin(p, 1, t0, []string{"task: fuzz"})
		if err != nil {
			t.Fatal(err)
		}
		type seen struct {
			n    int
			text string
		}
		var cb []seen
		b.OnStdoutLine(func(n int, text string) { cb = append(cb, seen{n, text}) })
		o, e := out, errs
		for i := 0; len(o)+len(e) > 0; i++ {
			c := 1
			if len(cuts) > 0 {
				c = int(cuts[i%len(cuts)])%17 + 1
			}
			w, src := b.Stdout(), &o
			if i%2 == 1 {
				w, src = b.Stderr(), &e
			}
			k := min(c, len(*src))
			if _, err := w.Write((*src)[:k]); err != nil {
				t.Fatal(err)
			}
			*src = (*src)[k:]
		}
		if err := b.End(t0.Add(time.Minute), 0, ""); err != nil {
			t.Fatal(err)
		}
		info, err := Latest(p, b.Offset())
		if err != nil {
			t.Fatalf("Latest: %v\nlog: %q", err, readAll(t, p))
		}
		if info.End == nil || info.Lines != b.Lines() || info.Offset != 0 || info.Size != int64(len(readAll(t, p))) {
			t.Fatalf("Latest = %+v, Block has %d lines", info, b.Lines())
		}
		ls := checkInfo(t, p, info)
		if got, want := texts(ls, Stdout), expectLines(out); !slices.Equal(got, want) {
			t.Fatalf("stdout lines %q, want %q", got, want)
		}
		if got, want := texts(ls, Stderr), expectLines(errs); !slices.Equal(got, want) {
			t.Fatalf("stderr lines %q, want %q", got, want)
		}
		var fromLog []seen
		for _, l := range ls {
			if l.Kind == Stdout && strings.Contains(strings.ToLower(l.Text), "[cryo:") {
				fromLog = append(fromLog, seen{l.N, l.Text})
			}
		}
		if !slices.Equal(cb, fromLog) {
			t.Fatalf("OnStdoutLine saw %v, the log has %v", cb, fromLog)
		}
		ref, ok := b.Ref()
		if !ok {
			t.Fatal("Block.Ref after a clean End: not ok")
		}
		if tr, err := Trusted(p, ref); err != nil || tr == nil || !sameInfo(tr, info) || !tr.End.End.Equal(info.End.End) {
			t.Fatalf("Trusted(%+v) = %+v, %v; Latest = %+v", ref, tr, err, info)
		}
		if len(ls) != 1+1+len(texts(ls, Stdout))+len(texts(ls, Stderr))+1 {
			t.Fatalf("unexpected lines in the block: %+v", ls)
		}
	})
}

// expectLines is what the log must hold for one stream: its lines ("\r\n" counts as a newline),
// the last one even without a newline, sanitized and cut into MaxText pieces.
func expectLines(data []byte) []string {
	var out []string
	for len(data) > 0 {
		l := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			l, data = bytes.TrimSuffix(data[:i], []byte("\r")), data[i+1:]
		} else {
			data = nil // a last line without newline keeps its \r
		}
		s := []byte(Sanitize(string(l)))
		for len(s) > MaxText {
			n := runeCut(s, MaxText)
			out = append(out, string(s[:n]))
			s = s[n:]
		}
		out = append(out, string(s))
	}
	return out
}

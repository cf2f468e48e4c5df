package sessionlog

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cryochamber/cryochamber/internal/confined"
)

// ErrNoBlocks means the log is missing, empty, or holds only "# " lines: no session has begun.
var ErrNoBlocks = errors.New("no session block in the log")

// ErrNotFound means the log has no block of the session asked for.
var ErrNotFound = errors.New("session not found in the log")

// Info locates one block of the log.
type Info struct {
	Session int
	Start   time.Time
	End     *EndInfo // nil: the block has no END line (torn: its session died)
	Offset  int64    // byte offset of the SESSION line
	Size    int64    // bytes of the block including its END line, or to EOF (or the next SESSION line) when torn
	Lines   int      // lines of the block, the SESSION line and the END line included
}

// Line is one line of a block.
type Line struct {
	N    int    // line number within the block; the SESSION line is 1
	Kind Kind   //
	Text string // Header, End, Torn: the whole line; Meta, Stdout, Stderr: the text after the prefix (always sanitized)
}

// Raw is the line with its prefix, as a reader shows it: the agent's text sanitized (the log may
// hold it as printed), a torn line sanitized, cut like Text by Tail.
func (l Line) Raw() string {
	switch l.Kind {
	case Meta:
		return "# " + l.Text
	case Stdout:
		return "| " + l.Text
	case Stderr:
		return "! " + l.Text
	}
	return l.Text
}

// Latest finds the latest block of the log at path.
//
// hint is the offset of the latest SESSION line recorded in timer.json (-1 if none). It is used
// only when the line there is a SESSION line and no other SESSION line follows it; otherwise, and
// whenever the region from hint to the end is not a well-formed block, Latest reads backwards
// from the end in 64 KiB chunks. Either way it reads the latest block and what follows it, and
// nothing before it except the line just before its SESSION line.
//
// It returns an error wrapping ErrNoBlocks when the log is missing or has no block, and one
// wrapping a *CorruptError when the region read is corrupt.
func Latest(path string, hint int64) (*Info, error) {
	f, size, err := openRead(path)
	if errors.Is(err, os.ErrNotExist) || err == nil && size == 0 {
		return nil, fmt.Errorf("%s: %w", path, ErrNoBlocks)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if hint >= 0 && hint < size {
		if info := latestAt(f, size, hint); info != nil {
			return info, nil
		}
	}
	info, err := latestBack(f, size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return info, nil
}

// latestAt checks the region from hint to EOF and returns its block, or nil if the hint does not
// point at the only block of a well-formed region.
func latestAt(f *os.File, size, hint int64) *Info {
	if hint > 0 {
		var b [1]byte
		if _, err := f.ReadAt(b[:], hint-1); err != nil || b[0] != '\n' {
			return nil
		}
	}
	r := newFwd(io.NewSectionReader(f, hint, size-hint), hint)
	l, _, complete, err := r.next()
	if err != nil || !complete || r.tornNext() {
		return nil
	}
	h, why := parseLine(l)
	if why != "" || h.kind != Header {
		return nil
	}
	info := &Info{Session: h.n, Start: h.t, Offset: hint, Size: size - hint, Lines: 1}
	for {
		l, _, complete, err := r.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil
		}
		torn := !complete || r.tornNext()
		if info.End == nil {
			info.Lines++
		}
		if torn {
			if checkTorn(l) != "" {
				return nil
			}
			continue
		}
		p, why := parseLine(l)
		if why != "" {
			return nil
		}
		switch p.kind {
		case Header:
			return nil // a later block: the hint is stale
		case End:
			if info.End != nil || p.n != info.Session {
				return nil
			}
			info.End = &EndInfo{End: p.t, Exit: p.exit, Reason: p.why}
			info.Size = r.off - hint
		case Stdout, Stderr:
			if info.End != nil {
				return nil
			}
		}
	}
	if checkBefore(f, hint, info.Session) != nil {
		return nil
	}
	return info
}

// latestBack reads backwards from EOF to the last SESSION line, checking every line on the way.
func latestBack(f *os.File, size int64) (*Info, error) {
	tail, err := lastByte(f, size)
	if err != nil {
		return nil, err
	}
	hi := size
	if tail == '\n' {
		hi--
	}
	r := newBack(f, 0, hi)
	isTail := tail != '\n' // the first line returned is a torn last line
	nextTorn := false      // the line after the current one is the TornNote line
	var (
		end      *EndInfo
		endN     int
		endOff   int64
		blockEnd int64
		count    int        // lines seen since the END line (or since EOF)
		output   int64 = -1 // offset of the last output line seen before any END line
	)
	for {
		l, off, err := r.prev()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		torn := isTail || nextTorn
		isTail = false
		nextTorn = bytes.Equal(l, tornLine)
		count++
		if torn {
			if why := checkTorn(l); why != "" {
				return nil, corrupt(off, "%s", why)
			}
			continue
		}
		p, why := parseLine(l)
		if why != "" {
			return nil, corrupt(off, "%s", why)
		}
		switch p.kind {
		case Stdout, Stderr:
			if end == nil && output < 0 {
				output = off
			}
		case End:
			if end != nil {
				return nil, corrupt(endOff, "END line of session %d has no SESSION line before it (the END line of session %d comes first)", endN, p.n)
			}
			if output >= 0 {
				return nil, corrupt(output, "output line after the END line of session %d", p.n)
			}
			end = &EndInfo{End: p.t, Exit: p.exit, Reason: p.why}
			endN, endOff, blockEnd = p.n, off, off+int64(len(l))+1
			count = 1
		case Header:
			if end != nil && endN != p.n {
				return nil, corrupt(endOff, "END line of session %d closes the block of session %d", endN, p.n)
			}
			info := &Info{Session: p.n, Start: p.t, End: end, Offset: off, Size: size - off, Lines: count}
			if end != nil {
				info.Size = blockEnd - off
			}
			if err := checkBefore(f, off, p.n); err != nil {
				return nil, err
			}
			return info, nil
		}
	}
	if end != nil {
		return nil, corrupt(endOff, "END line of session %d has no SESSION line before it", endN)
	}
	if output >= 0 {
		return nil, corrupt(output, "output line outside any session block (no SESSION line before it)")
	}
	return nil, ErrNoBlocks
}

// checkBefore checks that the block before the SESSION line of session n at off (found by
// skipping back over a few "# " lines) has a smaller session number.
func checkBefore(f *os.File, off int64, n int) error {
	if off == 0 {
		return nil
	}
	r := newBack(f, 0, off-1)
	nextTorn := false
	for i := 0; i < 64; i++ {
		l, loff, err := r.prev()
		if err != nil {
			if errors.Is(err, ErrCorrupt) || err == io.EOF {
				return nil // outside the region Latest answers for
			}
			return err
		}
		torn := nextTorn
		nextTorn = bytes.Equal(l, tornLine)
		if torn {
			continue
		}
		p, why := parseLine(l)
		if why != "" || p.kind == Stdout || p.kind == Stderr {
			return nil
		}
		if (p.kind == End || p.kind == Header) && p.n >= n {
			what := map[Kind]string{End: "END", Header: "SESSION"}[p.kind]
			return corrupt(loff, "session numbers go down: %s %d comes before SESSION %d", what, p.n, n)
		}
		if p.kind != Meta {
			return nil
		}
	}
	return nil
}

// Find returns the block of session: a binary search over byte offsets (seek to the middle,
// resynchronise to the next SESSION line, compare numbers), so that a large log costs O(log n)
// reads plus the block itself. The returned block is checked like Latest's. It returns an error
// wrapping ErrNotFound when the log has no such block.
func Find(path string, session int) (*Info, error) {
	f, size, err := openRead(path)
	if errors.Is(err, os.ErrNotExist) || err == nil && size == 0 {
		return nil, fmt.Errorf("%s: session %d: %w", path, session, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Invariant: if the block exists, its SESSION line starts in [lo, hi).
	lo, hi := int64(0), size
	for lo < hi {
		mid := lo + (hi-lo)/2
		h, err := nextHeader(f, size, mid, hi)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		switch {
		case h == nil || h.n > session:
			hi = mid
		case h.n < session:
			lo = h.off + 1
		default:
			info, err := blockAt(f, size, h)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			return info, nil
		}
	}
	return nil, fmt.Errorf("%s: session %d: %w", path, session, ErrNotFound)
}

type header struct {
	n   int
	t   time.Time
	off int64
}

// nextHeader returns the first SESSION line that starts in [from, limit), or nil.
func nextHeader(f *os.File, size, from, limit int64) (*header, error) {
	r := newFwd(io.NewSectionReader(f, from, size-from), from)
	if from > 0 {
		var b [1]byte
		if _, err := f.ReadAt(b[:], from-1); err != nil {
			return nil, fmt.Errorf("read: %w", err)
		}
		if b[0] != '\n' {
			if err := r.skip(); err != nil {
				return nil, err
			}
		}
	}
	for r.off < limit {
		l, off, complete, err := r.next()
		if err == io.EOF {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if !bytes.HasPrefix(l, []byte(sessionPrefix)) || !complete || r.tornNext() {
			continue
		}
		p, why := parseLine(l)
		if why != "" {
			return nil, corrupt(off, "%s", why)
		}
		return &header{n: p.n, t: p.t, off: off}, nil
	}
	return nil, nil
}

// blockAt reads the block whose SESSION line is h, checking its lines.
func blockAt(f *os.File, size int64, h *header) (*Info, error) {
	r := newFwd(io.NewSectionReader(f, h.off, size-h.off), h.off)
	if _, _, _, err := r.next(); err != nil {
		return nil, err
	}
	info := &Info{Session: h.n, Start: h.t, Offset: h.off, Size: size - h.off, Lines: 1}
	for {
		l, off, complete, err := r.next()
		if err == io.EOF {
			return info, nil
		}
		if err != nil {
			return nil, err
		}
		if !complete || r.tornNext() {
			if why := checkTorn(l); why != "" {
				return nil, corrupt(off, "%s", why)
			}
			info.Lines++
			continue
		}
		p, why := parseLine(l)
		if why != "" {
			return nil, corrupt(off, "%s", why)
		}
		switch p.kind {
		case Header:
			if p.n <= h.n {
				return nil, corrupt(off, "session numbers go down: SESSION %d follows SESSION %d", p.n, h.n)
			}
			info.Size = off - h.off // never closed; the next session began
			return info, nil
		case End:
			if p.n != h.n {
				return nil, corrupt(off, "END line of session %d closes the block of session %d", p.n, h.n)
			}
			info.Lines++
			info.End = &EndInfo{End: p.t, Exit: p.exit, Reason: p.why}
			info.Size = r.off - h.off
			return info, nil
		}
		info.Lines++
	}
}

// Each calls fn for every line of the block info (from Latest or Find), in order, reading with
// bounded memory. It stops at the first error fn returns and returns it.
func Each(path string, info *Info, fn func(l Line) error) error {
	f, err := confined.OpenIn(path, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("read session %d: %w", info.Session, err)
	}
	defer f.Close()
	r := newFwd(io.NewSectionReader(f, info.Offset, info.Size), info.Offset)
	var last Kind
	for n := 1; ; n++ {
		l, off, complete, err := r.next()
		if err == io.EOF && n == 1 {
			return fmt.Errorf("%s: no SESSION line of session %d at byte %d (the log changed?)", path, info.Session, info.Offset)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		ln, err := blockLine(l, off, n, !complete || r.tornNext(), info.Session)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if last == End {
			return fmt.Errorf("%s: %w", path, corrupt(off, "line after the END line of session %d", info.Session))
		}
		last = ln.Kind
		if err := fn(ln); err != nil {
			return err
		}
	}
	if info.End != nil && last != End {
		return fmt.Errorf("%s: block of session %d at byte %d has no END line any more (the log changed)", path, info.Session, info.Offset)
	}
	return nil
}

// blockLine checks and converts line n of the block of session.
func blockLine(l []byte, off int64, n int, torn bool, session int) (Line, error) {
	ln := Line{N: n}
	if n == 1 {
		p, why := parseLine(l)
		if torn || why != "" || p.kind != Header || p.n != session {
			return ln, fmt.Errorf("no SESSION line of session %d at byte %d (the log changed?)", session, off)
		}
		ln.Kind, ln.Text = Header, string(l)
		return ln, nil
	}
	if torn {
		if why := checkTorn(l); why != "" {
			return ln, corrupt(off, "%s", why)
		}
		san, _ := sanitizeAppend(nil, l, false)
		ln.Kind, ln.Text = Torn, string(san)
		return ln, nil
	}
	p, why := parseLine(l)
	if why != "" {
		return ln, corrupt(off, "%s", why)
	}
	ln.Kind = p.kind
	switch p.kind {
	case Header:
		return ln, corrupt(off, "SESSION line of session %d inside the block of session %d", p.n, session)
	case End:
		if p.n != session {
			return ln, corrupt(off, "END line of session %d closes the block of session %d", p.n, session)
		}
		ln.Text = string(l)
	case Stdout, Stderr:
		// The agent's text is in the log as it printed it: sanitized here, for every reader.
		san, _ := sanitizeAppend(nil, p.text, false)
		ln.Text = string(san)
	default:
		ln.Text = string(p.text)
	}
	return ln, nil
}

// tailMax bounds Tail: at most this many lines, each cut to tailText bytes, so that Tail never
// holds more than one full line plus about 1 MiB.
const (
	tailMax  = 256
	tailText = 4096
)

// Tail returns the last n lines of the block info (from Latest or Find), reading backwards. It
// returns at most 256 lines, and cuts a line's Text to 4 KiB, marking the cut with "…".
func Tail(path string, info *Info, n int) ([]Line, error) {
	n = min(n, tailMax)
	if n <= 0 || info.Size <= 0 {
		return nil, nil
	}
	f, err := confined.OpenIn(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("read session %d: %w", info.Session, err)
	}
	defer f.Close()
	hi := info.Offset + info.Size
	if fi, err := f.Stat(); err != nil || fi.Size() < hi {
		return nil, fmt.Errorf("%s: block of session %d (bytes %d to %d) is no longer in the log (the log changed?)", path, info.Session, info.Offset, hi)
	}
	last, err := lastByte(f, hi)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if last == '\n' {
		hi--
	}
	r := newBack(f, info.Offset, hi)
	isTail, nextTorn := last != '\n', false
	var out []Line
	for num := info.Lines; len(out) < n; num-- {
		l, off, err := r.prev()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		torn := isTail || nextTorn
		isTail, nextTorn = false, bytes.Equal(l, tornLine)
		pos := max(num, 2) // blockLine checks line 1 as the SESSION line
		if off == info.Offset {
			pos = 1
		}
		ln, err := blockLine(l, off, pos, torn, info.Session)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		ln.N = num
		if len(ln.Text) > tailText {
			ln.Text = ln.Text[:runeCut([]byte(ln.Text), tailText)] + "…"
		}
		out = append(out, ln)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

func openRead(path string) (*os.File, int64, error) {
	f, err := confined.OpenIn(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("read session log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("read session log: %w", err)
	}
	if fi.Size() == 0 {
		f.Close()
		return nil, 0, nil
	}
	return f, fi.Size(), nil
}

func lastByte(f *os.File, size int64) (byte, error) {
	var b [1]byte
	if _, err := f.ReadAt(b[:], size-1); err != nil {
		return 0, fmt.Errorf("read: %w", err)
	}
	return b[0], nil
}

// fwdReader reads lines forwards, holding at most one line (up to maxLine) plus its buffer.
type fwdReader struct {
	br  *bufio.Reader
	off int64 // file offset of the next unread byte
	buf []byte
}

func newFwd(r io.Reader, off int64) *fwdReader {
	return &fwdReader{br: bufio.NewReaderSize(r, chunkSize), off: off}
}

// next returns the next line without its newline (valid until the next call), its offset, and
// whether a newline ended it. It returns io.EOF when nothing is left, and a *CorruptError for a
// line longer than maxLine.
func (r *fwdReader) next() ([]byte, int64, bool, error) {
	r.buf = r.buf[:0]
	start := r.off
	for {
		frag, err := r.br.ReadSlice('\n')
		r.off += int64(len(frag))
		nl := err == nil
		if nl {
			frag = frag[:len(frag)-1]
		}
		if len(r.buf)+len(frag) > maxLine {
			return nil, start, false, corrupt(start, "line longer than %d bytes", maxLine)
		}
		// Copy even a line that fits the buffer: tornNext's Peek may move the buffer.
		r.buf = append(r.buf, frag...)
		switch {
		case nl:
			return r.buf, start, true, nil
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF:
			if len(r.buf) == 0 {
				return nil, start, false, io.EOF
			}
			return r.buf, start, false, nil
		default:
			return nil, start, false, fmt.Errorf("read: %w", err)
		}
	}
}

// skip discards the rest of the current line, whatever its length.
func (r *fwdReader) skip() error {
	for {
		frag, err := r.br.ReadSlice('\n')
		r.off += int64(len(frag))
		switch {
		case err == nil || err == io.EOF:
			return nil
		case err != bufio.ErrBufferFull:
			return fmt.Errorf("read: %w", err)
		}
	}
}

// tornNext reports whether the next line is the TornNote line (which makes the line just read
// a torn one).
func (r *fwdReader) tornNext() bool {
	p, err := r.br.Peek(len(tornLine) + 1)
	if err == nil {
		return p[len(tornLine)] == '\n' && bytes.Equal(p[:len(tornLine)], tornLine)
	}
	return bytes.Equal(p, tornLine)
}

// backReader returns the lines of the region [lo, hi) from the last to the first, holding at
// most one line (up to maxLine) plus one chunk. The caller leaves a final newline out of the
// region; the bytes after the last newline are the first line returned.
type backReader struct {
	ra    io.ReaderAt
	lo    int64
	pos   int64  // file offset of buf[0]
	buf   []byte // bytes [pos, pos+len(buf)) not yet returned
	spare []byte
	done  bool
}

func newBack(ra io.ReaderAt, lo, hi int64) *backReader {
	return &backReader{ra: ra, lo: lo, pos: hi}
}

// prev returns the previous line (valid until the next call), its offset, io.EOF before the
// first line, and a *CorruptError for a line longer than maxLine.
func (r *backReader) prev() ([]byte, int64, error) {
	if r.done {
		return nil, 0, io.EOF
	}
	for {
		if i := bytes.LastIndexByte(r.buf, '\n'); i >= 0 {
			l, off := r.buf[i+1:], r.pos+int64(i)+1
			r.buf = r.buf[:i]
			if len(l) > maxLine {
				return nil, off, corrupt(off, "line longer than %d bytes", maxLine)
			}
			return l, off, nil
		}
		if len(r.buf) > maxLine {
			return nil, r.pos, corrupt(r.pos, "line longer than %d bytes", maxLine)
		}
		if r.pos == r.lo {
			r.done = true
			return r.buf, r.pos, nil
		}
		n := min(int64(chunkSize), r.pos-r.lo)
		need := int(n) + len(r.buf)
		if cap(r.spare) < need {
			r.spare = make([]byte, 0, need+chunkSize)
		}
		nb := r.spare[:need]
		if _, err := r.ra.ReadAt(nb[:n], r.pos-n); err != nil {
			return nil, r.pos, fmt.Errorf("read: %w", err)
		}
		copy(nb[n:], r.buf)
		r.spare = r.buf[:0]
		r.buf = nb
		r.pos -= n
	}
}

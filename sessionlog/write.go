package sessionlog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cryochamber/cryochamber/internal/atomicfile"
	"github.com/cryochamber/cryochamber/internal/confined"
)

const (
	// rawFlush is how many raw bytes of an unfinished line a stream holds before sanitizing them.
	rawFlush = 64 << 10
	// batchMax bounds the lines gathered into one write(2).
	batchMax = 64 << 10
	// fastLine is the longest line wholeLine takes (most agent lines are far shorter); its
	// sanitized form (at most 3 bytes a byte) is far below MaxText and fits one batch.
	fastLine = 4096
)

// ErrClosed is returned by a Block's methods after End.
var ErrClosed = errors.New("session block already ended")

// Block is one session block being written. Only the process that holds the chamber's lock
// writes; every write appends whole lines (O_APPEND), so a line is never split between two
// writes and the stdout and stderr streams interleave at line boundaries.
//
// The writers returned by Stdout and Stderr, Note and End may be called from different
// goroutines. A write error is sticky: every later call returns it (End still tries to close
// the block). Each stream holds at most one MaxText piece plus about 200 KiB of an unfinished
// line. Call End only after the agent's output has been copied in full (after exec's Wait).
type Block struct {
	mu        sync.Mutex
	f         *os.File
	path      string
	session   int
	offset    int64
	size      int64 // of the whole block, set by an End that succeeded
	unsynced  int64 // bytes written since the last startWriteback
	lines     int
	batch     []byte
	err       error
	closed    bool
	onStdout  func(blockLine int, text string)
	out, errs stream
}

// Begin appends the SESSION line of session and one "# " line per meta entry (for example
// "task: ..." and "command: ..."), creating path with mode 0600 if needed, and fsyncs. If the
// file ends with a torn line, it is completed first (see TornNote).
//
// The caller holds the chamber's lock, has closed any torn block (CloseTorn), and passes a
// session number larger than every number in the log.
func Begin(path string, session int, start time.Time, meta []string) (*Block, error) {
	head, err := sessionLine(session, start)
	if err != nil {
		return nil, fmt.Errorf("begin session %d in %s: %w", session, path, err)
	}
	f, prefix, size, err := openAppend(path)
	if err != nil {
		return nil, fmt.Errorf("begin session %d: %w", session, err)
	}
	b := &Block{f: f, path: path, session: session, offset: size + int64(len(prefix))}
	b.out = stream{b: b, prefix: '|'}
	b.errs = stream{b: b, prefix: '!'}
	buf := append(prefix, head...)
	buf = append(buf, '\n')
	b.lines = 1
	for _, m := range meta {
		buf = appendNote(buf, m, func() { b.lines++ })
	}
	if _, err := f.Write(buf); err != nil {
		f.Close()
		return nil, fmt.Errorf("begin session %d: write %s: %w", session, path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("begin session %d: fsync %s: %w", session, path, err)
	}
	return b, nil
}

// Offset is the byte offset of the block's SESSION line (recorded in timer.json as a hint for
// Latest).
func (b *Block) Offset() int64 { return b.offset }

// Ref is where the block lies in the log, once End has closed it without an error (ok is false
// otherwise): what Trusted needs to find it again without reading it.
func (b *Block) Ref() (ref Ref, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed || b.err != nil || b.size == 0 {
		return Ref{}, false
	}
	return Ref{Session: b.session, Offset: b.offset, Size: b.size, Lines: b.lines}, true
}

// Lines is the number of lines of the block written so far, counting the SESSION line as 1.
func (b *Block) Lines() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lines
}

// Stdout is the writer for the agent's standard output: every complete line becomes a "| "
// line (its text raw or sanitized: readers sanitize it, see wholeLine); a line longer than
// MaxText is cut into several lines.
func (b *Block) Stdout() io.Writer { return &b.out }

// Stderr is the writer for the agent's standard error ("! " lines).
func (b *Block) Stderr() io.Writer { return &b.errs }

// OnStdoutLine registers fn, called for each stdout line that may hold a marker (it contains
// "[CRYO:" in any letter case) as it is written, with its line number within the block (the
// SESSION line is 1) and its sanitized text without prefix. It is how the marker parser reads
// markers while the agent runs; a line without that text holds no marker, and is passed over
// without a copy (most of an agent's output). fn runs with the block locked: it must not call
// the block's methods. Set it before writing.
func (b *Block) OnStdoutLine(fn func(blockLine int, text string)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.onStdout = fn
}

// Note appends text as "# " lines (one per line of text, sanitized).
func (b *Block) Note(text string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable(); err != nil {
		return err
	}
	b.batch = appendNote(b.batch, text, func() { b.lines++ })
	return b.flush()
}

// End writes the partial last lines of both streams, then the END line, fsyncs and closes the
// file. reason is "" or a word (no-exit, crashed, timeout, agent-failed) and then exit must be 2.
// Invalid arguments leave the block open. After an earlier write error, End still tries to
// close the block and returns that error.
func (b *Block) End(end time.Time, exit int, reason string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	el, err := endLine(b.session, end, exit, reason)
	if err != nil {
		return fmt.Errorf("end session %d: %w", b.session, err)
	}
	b.closed = true
	defer b.f.Close()
	if b.err == nil {
		for _, s := range []*stream{&b.out, &b.errs} {
			if s.partial {
				s.finishLine()
			}
		}
		b.flush() // sets b.err
	}
	// After a failed or short write the file may end inside a line: complete it first.
	prefix, err := tornPrefix(b.f)
	if err != nil {
		return errors.Join(b.err, fmt.Errorf("end session %d: %w", b.session, err))
	}
	if prefix != nil {
		b.lines += 2
	}
	buf := append(prefix, el...)
	buf = append(buf, '\n')
	if _, err := b.f.Write(buf); err != nil {
		return errors.Join(b.err, fmt.Errorf("end session %d: write %s: %w", b.session, b.path, err))
	}
	b.lines++
	if err := b.f.Sync(); err != nil {
		return errors.Join(b.err, fmt.Errorf("end session %d: fsync %s: %w", b.session, b.path, err))
	}
	if b.err != nil {
		return fmt.Errorf("session %d: some output was not logged: %w", b.session, b.err)
	}
	if fi, err := b.f.Stat(); err == nil && prefix == nil {
		b.size = fi.Size() - b.offset
	}
	return nil
}

func (b *Block) usable() error {
	if b.closed {
		return ErrClosed
	}
	return b.err
}

// emit adds one complete line (with its newline) to the pending batch, writing the batch first
// when the line would not fit, and writing a long line on its own.
func (b *Block) emit(line []byte) {
	if b.err != nil {
		return
	}
	if len(b.batch)+len(line) > batchMax {
		if b.flush() != nil {
			return
		}
	}
	b.lines++
	if len(line) > batchMax {
		k, err := b.f.Write(line)
		if err != nil {
			b.err = fmt.Errorf("write %s: %w", b.path, err)
		}
		b.written(k)
		return
	}
	b.batch = append(b.batch, line...)
}

// flush writes the pending batch of whole lines with one write.
func (b *Block) flush() error {
	if b.err != nil || len(b.batch) == 0 {
		b.batch = b.batch[:0]
		return b.err
	}
	k, err := b.f.Write(b.batch)
	b.batch = b.batch[:0]
	if err != nil {
		b.err = fmt.Errorf("write %s: %w", b.path, err)
	}
	b.written(k)
	return b.err
}

// writebackEvery is how much output a block lets pile up in the page cache before it asks the
// kernel to start writing it out (startWriteback): the fsync at END then waits for the last
// few megabytes, not for everything an agent printed.
const writebackEvery = 8 << 20

// written counts n bytes just written, and starts the writeback of what piled up since the
// last start once it reaches writebackEvery.
func (b *Block) written(n int) {
	b.unsynced += int64(n)
	if b.unsynced >= writebackEvery {
		startWriteback(b.f, b.unsynced)
		b.unsynced = 0
	}
}

// stream turns one output stream of the agent into prefixed, sanitized lines.
type stream struct {
	b       *Block
	prefix  byte
	raw     []byte // raw bytes of the current line, not yet sanitized (a UTF-8 sequence or "\r" held back)
	san     []byte // prefix, space, and the sanitized text of the current line not yet written
	inRun   bool   // san ends in the U+FFFD of an invalid UTF-8 run that may continue
	partial bool   // bytes of the current line have been seen since the last newline
}

// Write implements io.Writer. It returns an error only when the log cannot be written.
func (s *stream) Write(p []byte) (int, error) {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable(); err != nil {
		return 0, err
	}
	n := len(p)
	for len(p) > 0 && b.err == nil {
		if !s.partial {
			if i := bytes.IndexByte(p[:min(len(p), fastLine+1)], '\n'); i >= 0 {
				s.wholeLine(p[:i])
				p = p[i+1:]
				continue
			}
		}
		i := bytes.IndexByte(p, '\n')
		seg := p
		if i >= 0 {
			seg = p[:i]
		}
		for len(seg) > 0 {
			k := min(len(seg), rawFlush)
			s.raw = append(s.raw, seg[:k]...)
			seg = seg[k:]
			s.partial = true
			if len(s.raw) >= rawFlush {
				s.sanitizeRaw(true)
				s.emitFull()
			}
		}
		if i < 0 {
			break
		}
		p = p[i+1:]
		s.raw = bytes.TrimSuffix(s.raw, []byte{'\r'})
		s.finishLine()
	}
	if err := b.flush(); err != nil {
		return 0, err
	}
	return n, nil
}

// wholeLine writes a line that arrived whole in one Write (nothing of it held from an earlier
// one) and is at most fastLine bytes: its bytes as the agent printed them, behind the prefix,
// straight into the batch. This is the path of nearly all agent output, and it does not
// sanitize: every reader of the log does (Each, Tail and Copy sanitize "| " and "! " lines;
// docs/DESIGN.md, "The session log"), so the sanitizer runs where the log is shown, not on every
// byte an agent prints. The line holds no newline, so it stays one line behind its prefix and
// cannot begin or end a block. A line that may hold a marker is sanitized for the marker
// parser, which reads exactly the text it read before.
func (s *stream) wholeLine(line []byte) {
	b := s.b
	line = bytes.TrimSuffix(line, []byte{'\r'})
	if len(b.batch)+2+len(line)+1 > batchMax && b.flush() != nil {
		return
	}
	b.batch = append(b.batch, s.prefix, ' ')
	b.batch = append(b.batch, line...)
	b.batch = append(b.batch, '\n')
	b.lines++
	// Sanitizing only replaces bytes outside printable ASCII with U+FFFD, so "[CRYO:" is in the
	// raw line exactly when it is in the sanitized one.
	if s.prefix == '|' && b.onStdout != nil && MayHoldMarker(line) {
		san, _ := sanitizeAppend(nil, line, false)
		b.onStdout(b.lines, string(san))
	}
}

// MayHoldMarker reports whether text contains "[CRYO:" in any letter case: only such a line
// can hold a marker (marker.Parser reads nothing else).
func MayHoldMarker(text []byte) bool {
	for i := 0; ; {
		j := bytes.IndexByte(text[i:], '[')
		if j < 0 {
			return false
		}
		i += j
		if len(text)-i < 6 {
			return false
		}
		if text[i+1]|0x20 == 'c' && text[i+2]|0x20 == 'r' && text[i+3]|0x20 == 'y' && text[i+4]|0x20 == 'o' && text[i+5] == ':' {
			return true
		}
		i++
	}
}

// sanitizeRaw moves raw bytes into san; with hold, it keeps back what the next bytes could
// change: an unfinished UTF-8 sequence, or a "\r" that a newline would strip.
func (s *stream) sanitizeRaw(hold bool) {
	cut := len(s.raw)
	if hold {
		cut -= incomplete(s.raw)
		if cut > 0 && cut == len(s.raw) && s.raw[cut-1] == '\r' {
			cut--
		}
	}
	if len(s.san) == 0 {
		s.san = append(s.san, s.prefix, ' ')
	}
	s.san, s.inRun = sanitizeAppend(s.san, s.raw[:cut], s.inRun)
	s.raw = s.raw[:copy(s.raw, s.raw[cut:])]
}

// emitFull writes MaxText pieces of the current line while more than MaxText is pending, so a
// long line never holds more than MaxText (plus one raw chunk) in memory.
func (s *stream) emitFull() {
	for len(s.san)-2 > MaxText && s.b.err == nil {
		s.emitPiece(runeCut(s.san[2:], MaxText))
	}
}

// finishLine writes the rest of the current line (a newline was read, or the stream ended).
func (s *stream) finishLine() {
	s.sanitizeRaw(false)
	s.emitFull()
	s.emitPiece(len(s.san) - 2)
	s.san = s.san[:0]
	s.inRun = false
	s.partial = false
}

// emitPiece writes san[2:2+n] as one line and drops it from san.
func (s *stream) emitPiece(n int) {
	b := s.b
	end := 2 + n
	var text string
	call := s.prefix == '|' && b.onStdout != nil && MayHoldMarker(s.san[2:end])
	if call {
		text = string(s.san[2:end])
	}
	// Put the newline in place (saving the byte it covers) so the line goes out without a copy.
	if end == len(s.san) {
		s.san = append(s.san, '\n')
		b.emit(s.san[:end+1])
		s.san = s.san[:2]
	} else {
		saved := s.san[end]
		s.san[end] = '\n'
		b.emit(s.san[:end+1])
		s.san[end] = saved
		s.san = s.san[:2+copy(s.san[2:], s.san[end:])]
	}
	if b.err == nil && call {
		b.onStdout(b.lines, text)
	}
}

// appendNote appends text as "# " lines: split at newlines (a "\r" before one is dropped),
// sanitized, cut at MaxText. count is called once per line.
func appendNote(dst []byte, text string, count func()) []byte {
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSuffix(l, "\r")
		san, _ := sanitizeAppend(nil, []byte(l), false)
		if bytes.Equal(san, tornLine[2:]) {
			san = append([]byte("(note) "), san...)
		}
		for {
			n := len(san)
			if n > MaxText {
				n = runeCut(san, MaxText)
			}
			dst = append(dst, '#', ' ')
			dst = append(dst, san[:n]...)
			dst = append(dst, '\n')
			count()
			san = san[n:]
			if len(san) == 0 {
				break
			}
		}
	}
	return dst
}

// openAppend opens path for appending (creating it 0600, and making its directory entry
// durable), and returns what must be written first to complete a torn last line, and the size.
func openAppend(path string) (*os.File, []byte, int64, error) {
	_, statErr := os.Lstat(path)
	created := errors.Is(statErr, fs.ErrNotExist)
	f, err := confined.OpenIn(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("open %s: %w", path, err)
	}
	if created {
		if err := atomicfile.SyncDir(filepath.Dir(path)); err != nil {
			f.Close()
			return nil, nil, 0, err
		}
	}
	prefix, err := tornPrefix(f)
	if err != nil {
		f.Close()
		return nil, nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, 0, fmt.Errorf("stat %s: %w", path, err)
	}
	return f, prefix, fi.Size(), nil
}

// tornPrefix returns "\n" plus the TornNote line when f does not end with a newline, else nil.
func tornPrefix(f *os.File) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", f.Name(), err)
	}
	if fi.Size() == 0 {
		return nil, nil
	}
	var last [1]byte
	if _, err := f.ReadAt(last[:], fi.Size()-1); err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	if last[0] == '\n' {
		return nil, nil
	}
	p := append([]byte{'\n'}, tornLine...)
	return append(p, '\n'), nil
}

// AppendNote appends text as "# " lines outside a block, each stamped with now in UTC, for
// events between sessions ("wake fired before its time"). It fsyncs. The caller holds the lock.
func AppendNote(path string, now time.Time, text string) error {
	ts, err := formatTime(now)
	if err != nil {
		return fmt.Errorf("note in %s: %w", path, err)
	}
	f, prefix, _, err := openAppend(path)
	if err != nil {
		return fmt.Errorf("note: %w", err)
	}
	defer f.Close()
	var stamped []string
	for _, l := range strings.Split(text, "\n") {
		stamped = append(stamped, ts+" "+strings.TrimSuffix(l, "\r"))
	}
	buf := appendNote(prefix, strings.Join(stamped, "\n"), func() {})
	if _, err := f.Write(buf); err != nil {
		return fmt.Errorf("note: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("note: fsync %s: %w", path, err)
	}
	return f.Close()
}

// CloseTorn closes the latest block if it has no END line (its session died): it completes a
// torn last line (see TornNote), then appends "--- CRYO END n <now> exit=2 reason=crashed ---"
// and fsyncs. It returns the closed block, or nil, nil when there was nothing to close (no
// block, or the latest block is closed). The caller holds the lock.
func CloseTorn(path string, now time.Time) (*Info, error) {
	info, err := Latest(path, -1)
	if errors.Is(err, ErrNoBlocks) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if info.End != nil {
		return nil, nil
	}
	el, err := endLine(info.Session, now, 2, "crashed")
	if err != nil {
		return nil, fmt.Errorf("close session %d: %w", info.Session, err)
	}
	f, err := confined.OpenIn(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return nil, fmt.Errorf("close session %d: %w", info.Session, err)
	}
	defer f.Close()
	prefix, err := tornPrefix(f)
	if err != nil {
		return nil, fmt.Errorf("close session %d: %w", info.Session, err)
	}
	if prefix != nil {
		info.Lines++ // the TornNote line; the torn line itself was already counted
	}
	buf := append(prefix, el...)
	buf = append(buf, '\n')
	if _, err := f.Write(buf); err != nil {
		return nil, fmt.Errorf("close session %d: write %s: %w", info.Session, path, err)
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("close session %d: fsync %s: %w", info.Session, path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("close session %d: %w", info.Session, err)
	}
	info.End = &EndInfo{End: now.UTC().Truncate(time.Second), Exit: 2, Reason: "crashed"}
	info.Lines++
	info.Size = fi.Size() - info.Offset
	return info, f.Close()
}

// MoveAside renames a corrupt log to "<path>.corrupt-<now as 20261122T100003Z>", adding -1, -2,
// ... rather than overwrite an earlier one, and fsyncs the directory. It returns the new path.
// The caller then starts a fresh log (Begin creates it).
func MoveAside(path string, now time.Time) (string, error) {
	base := path + ".corrupt-" + now.UTC().Format("20060102T150405Z")
	for i := 0; i < 1000; i++ {
		dst := base
		if i > 0 {
			dst = fmt.Sprintf("%s-%d", base, i)
		}
		// A hard link fails when dst exists, so an earlier copy is never overwritten, even by a
		// racing process; rename would replace it silently.
		err := os.Link(path, dst)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("move %s aside: %w", path, err)
		}
		if err != nil {
			// Some file systems have no hard links: check, then rename (we hold the lock).
			if _, serr := os.Lstat(dst); serr == nil {
				continue
			}
			if err := os.Rename(path, dst); err != nil {
				return "", fmt.Errorf("move %s aside: %w", path, err)
			}
		} else if err := os.Remove(path); err != nil {
			return "", fmt.Errorf("move %s aside: %w", path, err)
		}
		if err := atomicfile.SyncDir(filepath.Dir(path)); err != nil {
			return "", fmt.Errorf("move %s aside: %w", path, err)
		}
		return dst, nil
	}
	return "", fmt.Errorf("move %s aside: 1000 files named %s-N already exist", path, base)
}

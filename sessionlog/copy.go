package sessionlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/cryochamber/cryochamber/internal/confined"
)

// CopyOptions selects what Copy prints.
type CopyOptions struct {
	// Session is the session whose block to print; 0 prints the whole log.
	Session int
	// Follow keeps printing what is appended, polling every Poll, until ctx is done. With a
	// Session it stops at that block's END line. Without one it starts at the latest block (not
	// at the beginning of a years-long log), and goes on with the new file when the log is moved
	// aside and started afresh.
	Follow bool
	// Numbers prefixes every line of a block with its line number within the block (the SESSION
	// line is 1), the numbers marker errors name. Lines outside blocks get a blank prefix.
	Numbers bool
	// Poll is the follow interval; 0 means 200ms.
	Poll time.Duration
}

// Copy prints the log at path to w for `cryochamber log`: the whole log, one session's block, or
// the log as it grows. What it prints is sanitized again (a corrupt log must not send control
// characters to a terminal), and it holds at most about one line in memory. A finished Follow
// (ctx done) is not an error.
func Copy(ctx context.Context, path string, w io.Writer, opt CopyOptions) error {
	if opt.Poll <= 0 {
		opt.Poll = 200 * time.Millisecond
	}
	c := &copier{w: w, numbers: opt.Numbers, session: opt.Session}
	var start, limit int64 = 0, -1
	switch {
	case opt.Session > 0:
		info, err := Find(path, opt.Session)
		if err != nil {
			return err
		}
		start = info.Offset
		if !opt.Follow || info.End != nil {
			opt.Follow = false
			limit = info.Offset + info.Size
		}
	case opt.Follow:
		info, err := Latest(path, -1)
		switch {
		case err == nil:
			start = info.Offset
		case errors.Is(err, ErrNoBlocks):
		default:
			// A corrupt log can still be followed: from its last 64 KiB, at a line start.
			c.skipFirst = true
			if fi, err := os.Stat(path); err == nil {
				start = max(0, fi.Size()-chunkSize)
				c.skipFirst = start > 0
			}
		}
	}
	if !opt.Follow {
		f, err := confined.OpenIn(path, os.O_RDONLY, 0)
		if err != nil {
			return fmt.Errorf("print log: %w", err)
		}
		defer f.Close()
		if limit < 0 {
			fi, err := f.Stat()
			if err != nil {
				return fmt.Errorf("print log: %w", err)
			}
			limit = fi.Size()
		}
		if _, err := c.copyRange(f, start, limit); err != nil {
			return err
		}
		return c.finish()
	}
	return c.follow(ctx, path, start, opt.Poll)
}

// follow prints from start, then whatever is appended, until ctx is done or (for a session)
// the block ends.
func (c *copier) follow(ctx context.Context, path string, pos int64, poll time.Duration) error {
	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for !c.done {
		if f == nil {
			if nf, err := confined.OpenIn(path, os.O_RDONLY, 0); err == nil {
				f = nf
			} else if !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("follow log: %w", err)
			}
		}
		if f != nil {
			fi, err := f.Stat()
			if err != nil {
				return fmt.Errorf("follow log: %w", err)
			}
			// Moved aside (a fresh log took its place) or truncated: start over with the new file.
			cur, serr := os.Lstat(path)
			if fi.Size() < pos || serr == nil && !os.SameFile(fi, cur) {
				if fi.Size() >= pos { // print what was added to the old file before it moved
					if _, err := c.copyRange(f, pos, fi.Size()); err != nil {
						return err
					}
				}
				if c.done {
					return nil
				}
				if c.session > 0 {
					return fmt.Errorf("follow log: %s was replaced before session %d ended", path, c.session)
				}
				f.Close()
				f, pos = nil, 0
				c.part, c.long, c.skipFirst = c.part[:0], false, false
				continue
			}
			if pos, err = c.copyRange(f, pos, fi.Size()); err != nil {
				return err
			}
		}
		if c.done {
			break
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
	return nil
}

// copier splits bytes into lines and prints them.
type copier struct {
	w         io.Writer
	numbers   bool
	session   int    // > 0: printing one block
	n         int    // line number within the current block; 0 outside blocks
	part      []byte // the current line, no newline yet
	long      bool   // the current line was longer than maxLine and is printed in pieces
	skipFirst bool   // drop the first (partial) line
	done      bool   // the block of session ended
	out       []byte
}

// copyRange prints [from, to) of f and returns the offset reached.
func (c *copier) copyRange(f *os.File, from, to int64) (int64, error) {
	buf := make([]byte, chunkSize)
	for from < to && !c.done {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), to-from)], from)
		if n > 0 {
			from += int64(n)
			if werr := c.write(buf[:n]); werr != nil {
				return from, werr
			}
		}
		if err != nil && !(err == io.EOF && n > 0) {
			if err == io.EOF {
				return from, nil // the file shrank: follow notices
			}
			return from, fmt.Errorf("print log: %w", err)
		}
	}
	return from, nil
}

func (c *copier) write(p []byte) error {
	for len(p) > 0 && !c.done {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			c.part = append(c.part, p...)
			if len(c.part) > maxLine {
				// Not a line of ours (corrupt log): print it in pieces rather than hold it.
				if err := c.line(c.part, false); err != nil {
					return err
				}
				c.part, c.long = c.part[:0], true
			}
			return nil
		}
		c.part = append(c.part, p[:i]...)
		p = p[i+1:]
		if err := c.line(c.part, true); err != nil {
			return err
		}
		c.part, c.long = c.part[:0], false
	}
	return nil
}

// finish prints a last line that has no newline (a torn line).
func (c *copier) finish() error {
	if len(c.part) == 0 && !c.long || c.done {
		return nil
	}
	return c.line(c.part, true)
}

// line prints one line (or, with complete false, the first pieces of an overlong line).
func (c *copier) line(l []byte, complete bool) error {
	if c.skipFirst {
		if complete {
			c.skipFirst = false
		}
		return nil
	}
	first := !c.long // the start of a line: number it
	if first {
		var kind Kind
		var n int
		if bytes.HasPrefix(l, []byte(sessionPrefix)) || bytes.HasPrefix(l, []byte(endPrefix)) {
			if p, why := parseLine(l); why == "" {
				kind, n = p.kind, p.n
			}
		}
		switch {
		case c.session > 0:
			if kind == Header && c.n > 0 {
				c.done = true // the next session began: the block never got its END line
				return nil
			}
			c.n++
			if kind == End && n == c.session {
				defer func() { c.done = true }()
			}
		case kind == Header:
			c.n = 1
		case c.n > 0:
			c.n++
		}
		if kind == End && c.session == 0 {
			defer func() { c.n = 0 }()
		}
	}
	c.out = c.out[:0]
	if c.numbers && first {
		if c.n > 0 {
			c.out = append(c.out, fmt.Sprintf("%6s\t", strconv.Itoa(c.n))...)
		} else {
			c.out = append(c.out, "      \t"...)
		}
	}
	c.out, _ = sanitizeAppend(c.out, l, false)
	if complete {
		c.out = append(c.out, '\n')
	}
	if _, err := c.w.Write(c.out); err != nil {
		return fmt.Errorf("print log: %w", err)
	}
	return nil
}

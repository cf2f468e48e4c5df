package sessionlog

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/cryochamber/cryochamber/internal/confined"
)

// Ref is where a block lies in the log, as the Block that wrote and closed it knows it (see
// Block.Ref). The caller keeps it (outside the chamber) so that the next reader can find the
// block again without reading it: a block of 500 MB is otherwise read whole, line by line, by
// every Latest that checks it.
type Ref struct {
	Session int   `json:"session"`
	Offset  int64 `json:"offset"` // of the SESSION line
	Size    int64 `json:"size"`   // of the whole block, END line included
	Lines   int   `json:"lines"`  // of the block, SESSION and END lines included
}

// Limits of what Trusted reads: a SESSION or END line is far shorter than boundMax, and the
// "# " notes written between blocks (a wake that found nothing due) stay under notesMax.
const (
	boundMax = 512
	notesMax = 1 << 20
)

// Trusted returns the latest block of the log at path from ref, reading only its two boundary
// lines and what follows it: the SESSION line of ref.Session at ref.Offset (after a newline),
// its END line ending at ref.Offset+ref.Size, and after it nothing but complete "# " lines (at
// most 1 MiB of them). It returns nil when any of that does not hold (the log was replaced,
// moved aside, cut, appended to by another session, or ends in a torn line): the caller then
// uses Latest, which checks every line.
//
// What it does not see: a change in the middle of the block that keeps its size. The block was
// checked as it was written (every line went through the writer), so only another process
// rewriting cryo.log in place between two sessions could make one; Latest, Find and Each still
// refuse such a block when they read it.
func Trusted(path string, ref Ref) (*Info, error) {
	if ref.Session <= 0 || ref.Offset < 0 || ref.Size <= 0 || ref.Lines < 2 {
		return nil, nil
	}
	f, err := confined.OpenIn(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("read session log: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read session log: %w", err)
	}
	end := ref.Offset + ref.Size
	if fi.Size() < end || fi.Size()-end > notesMax {
		return nil, nil
	}
	// The SESSION line, at the start of a line.
	head := make([]byte, boundMax)
	from := max(ref.Offset-1, 0)
	n, err := f.ReadAt(head, from)
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("read session log: %w", err)
	}
	head = head[:n]
	if ref.Offset > 0 {
		if len(head) == 0 || head[0] != '\n' {
			return nil, nil
		}
		head = head[1:]
	}
	i := bytes.IndexByte(head, '\n')
	if i < 0 || int64(i+1) > ref.Size {
		return nil, nil
	}
	h, why := parseLine(head[:i])
	if why != "" || h.kind != Header || h.n != ref.Session {
		return nil, nil
	}
	// The END line: the last line of the block.
	lo := max(end-boundMax, ref.Offset+int64(i)+1)
	tail := make([]byte, end-lo)
	if _, err := f.ReadAt(tail, lo); err != nil {
		return nil, fmt.Errorf("read session log: %w", err)
	}
	if len(tail) == 0 || tail[len(tail)-1] != '\n' {
		return nil, nil
	}
	j := bytes.LastIndexByte(tail[:len(tail)-1], '\n')
	if j < 0 && lo != ref.Offset+int64(i)+1 {
		return nil, nil // longer than an END line
	}
	e, why := parseLine(tail[j+1 : len(tail)-1])
	if why != "" || e.kind != End || e.n != ref.Session {
		return nil, nil
	}
	// What follows: "# " notes only, every one complete.
	if fi.Size() > end {
		r := newFwd(io.NewSectionReader(f, end, fi.Size()-end), end)
		for {
			l, _, complete, err := r.next()
			if err == io.EOF {
				break
			}
			if err != nil || !complete || r.tornNext() {
				return nil, nil
			}
			if p, why := parseLine(l); why != "" || p.kind != Meta {
				return nil, nil
			}
		}
	}
	return &Info{Session: ref.Session, Start: h.t, End: &EndInfo{End: e.t, Exit: e.exit, Reason: e.why},
		Offset: ref.Offset, Size: ref.Size, Lines: ref.Lines}, nil
}

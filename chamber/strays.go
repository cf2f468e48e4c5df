package chamber

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/cryochamber/cryochamber/internal/confined"
	"github.com/cryochamber/cryochamber/message"
)

// maxStrayExamples bounds the names a summary of strays shows (each opened once, to say what
// it is).
const maxStrayExamples = 3

// strays says what a mailbox directory holds under a message's name that is not a message: a
// symlink (to a private key, say), a hard link, a FIFO, a device, a directory. message.Names
// leaves them out, so no session reads or waits on them; without this they would sit there
// unexplained, and the operator would not learn that something in the chamber planted them.
// The wake warns (stderr and the next prompt), status lists them.
//
// Whatever their number, they are one line: how many, of which kinds (from the directory
// listing alone), and the first few examples (issue 22: 200,000 planted symlinks, one warning
// each, cost every wake minutes of CPU and every prompt 25 MB).
func (r *runner) strays(dir string) []string {
	if r.fs == nil {
		return nil
	}
	ents, err := r.fs.ReadDir(dir)
	if err != nil {
		return nil // Names said why
	}
	publishing := map[string]bool{} // names whose temporary twin is still there (a send at work)
	for _, e := range ents {
		if base, _, ok := strings.Cut(e.Name(), ".tmp-"); ok && strings.HasPrefix(base, ".") {
			publishing[base[1:]] = true
		}
	}
	kinds := map[string]int{}
	var examples []string
	total := 0
	for _, e := range ents {
		if !message.ValidName(e.Name()) || publishing[e.Name()] {
			continue
		}
		kind := strayKind(e.Type())
		if e.Type().IsRegular() {
			fi, err := e.Info()
			if err == nil && confined.Links(fi) == 1 {
				continue
			}
			kind = "hard link"
		}
		if len(examples) < maxStrayExamples {
			// Opening through the confined opener never follows or waits, and names what it found.
			f, err := r.fs.Open(path.Join(dir, e.Name()))
			if err == nil {
				f.Close() // became a message meanwhile: the next session claims it
				continue
			}
			examples = append(examples, err.Error())
		}
		total++
		kinds[kind]++
	}
	switch total {
	case 0:
		return nil
	case 1:
		return []string{"not a message, left alone: " + examples[0]}
	}
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	var counts []string
	for _, k := range names {
		counts = append(counts, fmt.Sprintf("%d %s", kinds[k], plural(k, kinds[k])))
	}
	more := ""
	if total > len(examples) {
		more = fmt.Sprintf("; and %d more", total-len(examples))
	}
	return []string{fmt.Sprintf("%d names in %s are not messages, left alone (%s): %s%s",
		total, dir, strings.Join(counts, ", "), strings.Join(examples, "; "), more)}
}

// strayKind names what a directory entry that is not a message is.
func strayKind(t fs.FileMode) string {
	switch {
	case t&fs.ModeSymlink != 0:
		return "symlink"
	case t&fs.ModeNamedPipe != 0:
		return "FIFO"
	case t.IsDir():
		return "directory"
	case t&fs.ModeSocket != 0:
		return "socket"
	case t&fs.ModeDevice != 0:
		return "device"
	}
	return "other file"
}

func plural(word string, n int) string {
	if n == 1 || strings.HasSuffix(word, "s") {
		return word
	}
	return word + "s"
}

// warnStrays warns of the strays of a mailbox directory, and tells the next prompt.
func (r *runner) warnStrays(dir string) {
	for _, w := range r.strays(dir) {
		r.warnf("%s", w)
		r.warnings = append(r.warnings, w)
	}
}

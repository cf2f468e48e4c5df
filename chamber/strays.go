package chamber

import (
	"path"
	"strings"

	"github.com/cryochamber/cryochamber/internal/confined"
	"github.com/cryochamber/cryochamber/message"
)

// strays says what a mailbox directory holds under a message's name that is not a message: a
// symlink (to a private key, say), a hard link, a FIFO, a device, a directory. message.Names
// leaves them out, so no session reads or waits on them; without this they would sit there
// unexplained, and the operator would not learn that something in the chamber planted them.
// The wake warns (stderr and the next prompt), status lists them.
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
	var out []string
	for _, e := range ents {
		if !message.ValidName(e.Name()) || publishing[e.Name()] {
			continue
		}
		if fi, err := e.Info(); err == nil && e.Type().IsRegular() && confined.Links(fi) == 1 {
			continue
		}
		// Opening through the confined opener never follows or waits, and names what it found.
		f, err := r.fs.Open(path.Join(dir, e.Name()))
		if err == nil {
			f.Close() // became a message meanwhile: the next session claims it
			continue
		}
		out = append(out, "not a message, left alone: "+err.Error())
	}
	return out
}

// warnStrays warns of the strays of a mailbox directory, and tells the next prompt.
func (r *runner) warnStrays(dir string) {
	for _, w := range r.strays(dir) {
		r.warnf("%s", w)
		r.warnings = append(r.warnings, w)
	}
}

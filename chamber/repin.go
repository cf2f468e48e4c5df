package chamber

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Writers never write what readers refuse. The dead-man and alert timers run the copy of the
// binary pinned at `start` or `reload` (accept.go), so that removing or moving the installed
// binary cannot silence them. Upgraded in place without `reload`, the wake timer runs the new
// build while the dead-man still runs the old copy; a new build that writes the state in a later
// format leaves a dead-man that cannot read it, which can then neither report a missed or
// crashed session nor re-arm anything (an old enough copy cannot even alert: issue 23,
// item 16). So before a build writes the state, or arms a timer that runs the pinned copy, it
// makes itself the pinned copy: the dead-man always runs the build that last wrote the state.
//
// This costs one stat of the running binary per command: the binary is read and hashed only
// when that stat differs from the one recorded with the copy (an upgrade, or another build run
// by hand).

// binaryStamp identifies a binary file cheaply: a rename over it (a package manager's upgrade)
// changes its inode, a copy over it its size or time.
func binaryStamp(fi os.FileInfo) string {
	s := fmt.Sprintf("%d:%d", fi.Size(), fi.ModTime().UnixNano())
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s += fmt.Sprintf(":%v:%v", st.Dev, st.Ino)
	}
	return s
}

// stampOf is the stamp of the file at path, "" when it cannot be read.
func stampOf(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return ""
	}
	return binaryStamp(fi)
}

// repinSelf makes the running build the copy the dead-man and alert timers run, once per
// command, when it is not already (see above). It never fails the command: when the copy
// cannot be made (a full disk), a dead-man that may not read the state is said on stderr, and
// when this build is the binary the wake timer runs, the dead-man runs that binary instead of
// the older copy (pin.json without binary_copy), until a later command can copy it.
func (r *runner) repinSelf() {
	if r.repinned || r.unlocked {
		return
	}
	r.repinned = true
	p, self := r.pin(), r.env.Binary
	if p == nil || self == "" || r.env.StateDir == "" || self == p.Copy {
		return // no pin (accept.go writes it), or the dead-man (or alert timer) itself
	}
	if strings.HasPrefix(self, filepath.Join(r.env.StateDir, "bin")+string(filepath.Separator)) {
		// A pinned copy run by a timer armed before the last re-pin: an older dead-man, never
		// the build that should be pinned (it would pin the older build back).
		return
	}
	stamp := stampOf(self)
	if stamp == "" {
		return // this build's file is gone: its copy cannot be made from it
	}
	if stamp == p.CopyOf && (p.Copy == "" || exists(p.Copy)) {
		return
	}
	cp, err := pinBinary(r.env.StateDir, self, r.now())
	next := *p
	next.CopyOf = stamp
	switch {
	case err != nil && self == r.st.Binary:
		r.warnf("cannot copy %s for the dead-man timer (%v): it runs %s itself until a later wake can copy it", self, err, self)
		next.Copy, next.CopyOf = "", p.CopyOf // tried again at the next command
	case err != nil:
		r.warnf("cannot copy %s for the dead-man timer (%v): it still runs %s, which may not read the state this build writes", self, err, p.Copy)
		return
	case cp == p.Copy:
	default:
		r.printf("the dead-man and alert timers now run %s, a copy of %s (they ran %s, another build)", cp, self, p.Copy)
		next.Copy = cp
	}
	data, _ := json.MarshalIndent(next, "", "  ")
	if err := r.store.write(pinName, append(data, '\n'), nil); err != nil {
		r.warnf("cannot record the dead-man's copy of %s in %s: %v", self, r.store.path(pinName), err)
		return
	}
	r.pins = &next
	// The timers armed before now run the copy this replaced: the session's dead-man is armed
	// anew rather than kept (startDeadman), so that it runs this build.
	r.repinChanged = next.Copy != p.Copy
	r.pruneDue = r.pruneDue || r.repinChanged // pinprune.go
}

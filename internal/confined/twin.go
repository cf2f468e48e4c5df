package confined

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
)

// A CreateNew killed (SIGKILL, a crash, a power loss) between its link(2) and the removal of its
// temporary name leaves the file it published under two names: its own and the hidden
// ".<name>.tmp-<12 hex>" writeTemp chose. Every open refuses a file with two names (one may be
// outside the chamber), so without this the message would be refused for good, and whatever
// reads the directory in order (a sync, a wake) would stop at it.
//
// Settle recognises that stray for what it is: a name of our temporary pattern, in the same
// directory, the same file, and no third name anywhere (2 links: so no name outside the chamber).
// It removes the temporary name; nothing else is ever removed. Removing it while a live CreateNew
// is between its link and its own removal is harmless: the published name is in place, and that
// writer's removal fails quietly.

// tmpSuffixLen is the length of the random part of a temporary name (hex of 6 bytes).
const tmpSuffixLen = 12

// isTempOf reports whether tmp is a temporary name writeTemp makes for base.
func isTempOf(tmp, base string) bool {
	prefix := "." + base + ".tmp-"
	if !strings.HasPrefix(tmp, prefix) || len(tmp) != len(prefix)+tmpSuffixLen {
		return false
	}
	for _, r := range tmp[len(prefix):] {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

// TwinOf returns the temporary name (relative to the Dir) that is the other name of name, when
// name has exactly two names and the other is a temporary name of name's own in the same
// directory; "" otherwise.
func (d *Dir) TwinOf(name string) string {
	fi, err := d.root.Lstat(name)
	if err != nil || !fi.Mode().IsRegular() || Links(fi) != 2 {
		return ""
	}
	return d.twinName(name)
}

// Settle removes the stray temporary name a killed CreateNew left beside name (see TwinOf), and
// reports the name it removed ("" when there was none, or it could not be removed).
func (d *Dir) Settle(name string) string {
	tmp := d.TwinOf(name)
	if tmp == "" {
		return ""
	}
	if err := d.root.Remove(tmp); err != nil && !isNotExist(err) {
		return ""
	}
	_ = d.SyncDir(path.Dir(name))
	return tmp
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// twinName is the temporary name of ours among name's names, whatever their number (for an
// error that must name what to remove), or "".
func (d *Dir) twinName(name string) string {
	fi, err := d.root.Lstat(name)
	if err != nil {
		return ""
	}
	dir, base := path.Dir(name), path.Base(name)
	ents, err := d.ReadDir(dir)
	if err != nil {
		return ""
	}
	for _, e := range ents {
		if !isTempOf(e.Name(), base) {
			continue
		}
		tmp := path.Join(dir, e.Name())
		if ti, err := d.root.Lstat(tmp); err == nil && os.SameFile(fi, ti) {
			return tmp
		}
	}
	return ""
}

package confined

import (
	"fmt"
	"io/fs"
)

// Readlink reads the target of the symlink name without following it (the snapshot records a
// symlink as a symlink: its target is text, never a place to go).
func (d *Dir) Readlink(name string) (string, error) {
	fi, err := d.root.Lstat(name)
	if err != nil {
		return "", err
	}
	if fi.Mode().Type()&fs.ModeSymlink == 0 {
		return "", fmt.Errorf("%s is %s, not a symlink", name, what(fi.Mode()))
	}
	return d.root.Readlink(name)
}

// Symlink makes name a symlink to target. The target is not resolved or checked: the confined
// opener never follows a symlink at a final name, and os.Root never through one that leaves
// the directory.
func (d *Dir) Symlink(target, name string) error { return d.root.Symlink(target, name) }

// RemoveAll removes name and what it holds, without following a symlink (os.Root.RemoveAll).
func (d *Dir) RemoveAll(name string) error { return d.root.RemoveAll(name) }

// Package confined opens files in a directory whose contents are untrusted: a chamber, where an
// agent that reads untrusted text may have left a symlink, a FIFO, a device or a forgery under
// any name cryochamber uses.
//
// A Dir is an os.Root on the directory (which the caller resolved and trusts). Every name is
// relative to it and can never reach outside it (os.Root refuses "..", absolute names and
// symlinks that leave the root). On top of that, the file a name finally designates must be a
// regular file, not a symlink (checked before and after opening, so swapping the name between
// the two is caught), with one name only (a hard link may be the other name of a file outside
// the directory: appending to it, or quoting it, would reach outside as surely as a symlink),
// and every open is non-blocking, so a FIFO or a device is refused with an error instead of
// hanging the process. Writes go to a temporary file in the same directory,
// fsynced, then renamed over the name (a symlink there is replaced, never followed).
//
// This package never decides what a file means; it only makes sure that reading or writing it
// cannot lead outside the directory or block.
package confined

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
)

// ErrNotRegular is returned (wrapped in a *NotRegularError) for a name that is a symlink, a
// FIFO, a device, a socket or a directory where a regular file was wanted.
var ErrNotRegular = errors.New("not a regular file")

// NotRegularError names the file and what it was found to be.
type NotRegularError struct {
	Name  string // relative to the Dir
	What  string // "a symlink", "a FIFO", ...
	Links int    // for a regular file with more than one name (a hard link): how many
	Twin  string // for a hard link: a stray temporary name of ours among its names (twin.go)
}

func (e *NotRegularError) Error() string {
	if e.Links > 1 && e.Twin != "" {
		return fmt.Sprintf("%s is a hard link (one file with %d names, one of them %s, the temporary name of a write that was cut short): refused (remove %s)", e.Name, e.Links, e.Twin, e.Twin)
	}
	if e.Links > 1 {
		return fmt.Sprintf("%s is a hard link (one file with %d names, maybe outside the chamber): refused (remove it)", e.Name, e.Links)
	}
	return fmt.Sprintf("%s is %s, not a regular file: refused (remove it)", e.Name, e.What)
}

// Links is the number of names (hard links) of the file fi describes; 1 where the system does
// not say.
func Links(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		return int(st.Nlink)
	}
	return 1
}

func (e *NotRegularError) Unwrap() error { return ErrNotRegular }

// ErrTooLarge is returned by ReadFile for a file longer than its limit.
var ErrTooLarge = errors.New("file too large")

// Dir is an open directory whose names are resolved confined to it.
type Dir struct {
	root *os.Root
}

// Open opens the directory at path. path itself is trusted (the caller resolved it); only the
// names used under it are not.
func Open(path string) (*Dir, error) {
	r, err := os.OpenRoot(path)
	if err != nil {
		return nil, err
	}
	return &Dir{root: r}, nil
}

// Path is the directory's path as it was opened.
func (d *Dir) Path() string { return d.root.Name() }

// Close releases the directory.
func (d *Dir) Close() error { return d.root.Close() }

// what describes a file mode for an error message.
func what(m fs.FileMode) string {
	switch t := m.Type(); {
	case t&fs.ModeSymlink != 0:
		return "a symlink"
	case t&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case t&fs.ModeDevice != 0, t&fs.ModeCharDevice != 0:
		return "a device"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeDir != 0:
		return "a directory"
	}
	return "not a regular file"
}

// OpenFile opens name with flag (os.O_RDONLY, os.O_WRONLY|os.O_APPEND|os.O_CREATE, ...). It
// refuses a name that is not a regular file or that has other names (a hard link), never
// follows a symlink at the name, and never blocks. A file it creates gets perm.
func (d *Dir) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	return d.openFile(name, flag, perm, true)
}

func (d *Dir) openFile(name string, flag int, perm fs.FileMode, settle bool) (*os.File, error) {
	before, err := d.root.Lstat(name)
	switch {
	case err == nil && !before.Mode().IsRegular():
		return nil, &NotRegularError{Name: name, What: what(before.Mode())}
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, err
	case err != nil && flag&os.O_CREATE == 0:
		return nil, err
	}
	f, err := d.root.OpenFile(name, flag|syscall.O_NONBLOCK|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, perm)
	if err != nil {
		return nil, err
	}
	after, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !after.Mode().IsRegular() {
		f.Close()
		return nil, &NotRegularError{Name: name, What: what(after.Mode())}
	}
	if n := Links(after); n > 1 {
		// Nothing cryochamber keeps in a chamber has two names for longer than a publish (a
		// link(2) then the removal of the temporary name); a lasting one was planted, or is the
		// stray temporary name of a publish that was killed (twin.go), which is removed.
		f.Close()
		if settle && n == 2 && d.Settle(name) != "" {
			return d.openFile(name, flag, perm, false)
		}
		return nil, &NotRegularError{Name: name, What: "a hard link", Links: n, Twin: d.twinName(name)}
	}
	if before != nil && !os.SameFile(before, after) {
		// The name was replaced between the check and the open (by a symlink, perhaps).
		f.Close()
		return nil, &NotRegularError{Name: name, What: "replaced while it was opened"}
	}
	return f, nil
}

// Open opens name for reading (see OpenFile).
func (d *Dir) Open(name string) (*os.File, error) {
	return d.OpenFile(name, os.O_RDONLY, 0)
}

// ReadFile reads name whole, refusing a file longer than limit bytes.
func (d *Dir) ReadFile(name string, limit int64) ([]byte, error) {
	f, err := d.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAll(f, name, limit)
}

// WriteFile replaces name with data: a temporary file in the same directory, written, fsynced
// and closed, then renamed over name, then the directory fsynced. A reader sees the old file
// or the new one, never a mix. beforeRename, if set, runs just before the rename (crash tests).
func (d *Dir) WriteFile(name string, data []byte, perm fs.FileMode, beforeRename func()) error {
	tmp, err := d.writeTemp(name, data, perm)
	if err != nil {
		return err
	}
	if beforeRename != nil {
		beforeRename()
	}
	if err := d.root.Rename(tmp, name); err != nil {
		_ = d.root.Remove(tmp)
		return fmt.Errorf("write %s: %w", name, err)
	}
	return d.SyncDir(path.Dir(name))
}

// WriteView replaces name with data like WriteFile, without the fsyncs: for a view that is
// rewritten from the authoritative copy at every save and never read back as truth (the
// chamber's timer.json, todo.json, the prompt). A crash may leave the previous content, or an
// empty file, until the next save; a reader still sees the old file or the new one, never a mix.
func (d *Dir) WriteView(name string, data []byte, perm fs.FileMode) error {
	tmp, err := d.writeTempSync(name, data, perm, false)
	if err != nil {
		return err
	}
	if err := d.root.Rename(tmp, name); err != nil {
		_ = d.root.Remove(tmp)
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// CreateNew publishes data under name only if name does not exist yet (os.ErrExist otherwise):
// a temporary file, fsynced, then hard-linked to name, which fails rather than replace anything.
func (d *Dir) CreateNew(name string, data []byte, perm fs.FileMode) error {
	tmp, err := d.writeTemp(name, data, perm)
	if err != nil {
		return err
	}
	defer d.root.Remove(tmp)
	if err := d.root.Link(tmp, name); err != nil {
		return err
	}
	return d.SyncDir(path.Dir(name))
}

// writeTemp writes data to a new hidden temporary file beside name, fsynced, and returns its
// name.
func (d *Dir) writeTemp(name string, data []byte, perm fs.FileMode) (string, error) {
	return d.writeTempSync(name, data, perm, true)
}

func (d *Dir) writeTempSync(name string, data []byte, perm fs.FileMode, sync bool) (string, error) {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(path.Dir(name), "."+path.Base(name)+".tmp-"+hex.EncodeToString(rnd[:]))
	f, err := d.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, perm)
	if err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			_ = d.root.Remove(tmp)
		}
	}()
	// The umask may have narrowed perm; a private file must never be wider than asked, and a
	// readable one should be as readable as asked.
	if err := f.Chmod(perm); err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	if _, err := f.Write(data); err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			return "", fmt.Errorf("write %s: fsync: %w", name, err)
		}
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	ok = true
	return tmp, nil
}

// RemoveStale removes the temporary files a WriteFile of name left when its process died
// between creating and renaming them. Only a process that holds the chamber's lock may call it.
func (d *Dir) RemoveStale(name string) {
	ents, err := d.ReadDir(path.Dir(name))
	if err != nil {
		return
	}
	prefix := "." + path.Base(name) + ".tmp-"
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			_ = d.root.Remove(path.Join(path.Dir(name), e.Name()))
		}
	}
}

// ReadDir lists the directory name ("." for the Dir itself), which must be a directory and not
// a symlink to one.
func (d *Dir) ReadDir(name string) ([]fs.DirEntry, error) {
	if name != "." {
		fi, err := d.root.Lstat(name)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("%s is %s, not a directory: refused", name, what(fi.Mode()))
		}
	}
	f, err := d.root.OpenFile(name, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return d.readDir(f, name)
}

// MkdirAll makes the directory name and its parents with mode perm, and gives an existing name
// that mode. Every element must be a real directory: a symlink or a file in the way is an error.
func (d *Dir) MkdirAll(name string, perm fs.FileMode) error {
	cur := ""
	for _, elem := range strings.Split(path.Clean(name), "/") {
		if elem == "." {
			continue
		}
		cur = path.Join(cur, elem)
		fi, err := d.root.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			if err := d.root.Mkdir(cur, perm); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			if fi, err = d.root.Lstat(cur); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s is %s, not a directory: refused (remove it)", cur, what(fi.Mode()))
		}
	}
	fi, err := d.root.Lstat(path.Clean(name))
	if err != nil {
		return err
	}
	if fi.Mode().Perm() != perm {
		return d.root.Chmod(path.Clean(name), perm)
	}
	return nil
}

// Lstat describes name without following a symlink there.
func (d *Dir) Lstat(name string) (fs.FileInfo, error) { return d.root.Lstat(name) }

// Rename moves oldname to newname (both inside the Dir). A symlink is moved as itself.
func (d *Dir) Rename(oldname, newname string) error { return d.root.Rename(oldname, newname) }

// Link makes newname a hard link to oldname; it fails if newname exists.
func (d *Dir) Link(oldname, newname string) error { return d.root.Link(oldname, newname) }

// Remove removes the file or empty directory name (a symlink itself, not its target).
func (d *Dir) Remove(name string) error { return d.root.Remove(name) }

// SyncDir fsyncs the directory name so that entries created, renamed or removed in it survive
// a crash.
func (d *Dir) SyncDir(name string) error {
	f, err := d.root.OpenFile(name, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("sync %s: %w", name, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", name, err)
	}
	return nil
}

// OpenIn opens the file at p, whose directory is trusted and whose final name is not (cryo.log
// at the top of a chamber): the same rules as Dir.OpenFile.
func OpenIn(p string, flag int, perm fs.FileMode) (*os.File, error) {
	d, err := Open(path.Dir(p))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.OpenFile(path.Base(p), flag, perm)
}

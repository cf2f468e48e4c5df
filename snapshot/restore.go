package snapshot

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/cryochamber/cryochamber/internal/confined"
)

// Restored says what a rollback did to the chamber.
type Restored struct {
	Written  []string `json:"written"`  // created or overwritten
	Removed  []string `json:"removed"`  // files that the snapshot did not hold
	Problems []string `json:"problems"` // what could not be done (the rest was)
}

// Restore makes the chamber opened as fs hold exactly the files of tree: every file of the
// tree written (through the confined opener: temporary file, fsync, rename; a symlink
// recreated as a symlink), every file the latest snapshot holds that the tree does not hold
// removed, and the directories left empty by that removed. What snapshots never hold (the
// Own names, the excluded globs, files that were too large or not regular) is left alone. The
// caller takes a snapshot of the chamber first (so the rollback can be undone, and so that
// the latest snapshot is the chamber as it is now) and holds the chamber's lock.
func (r *Repo) Restore(ctx context.Context, fs *confined.Dir, opt Options, tree string) (*Restored, error) {
	target, err := r.files(ctx, tree)
	if err != nil {
		return nil, err
	}
	current := r.loadCache().Files
	res := &Restored{}
	problem := func(format string, args ...any) { res.Problems = append(res.Problems, fmt.Sprintf(format, args...)) }

	// 1. Remove what the target does not hold (deepest first).
	var gone []string
	for p := range current {
		if _, ok := target[p]; !ok && !opt.Excluded(p) {
			gone = append(gone, p)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(gone)))
	dirs := map[string]bool{}
	for _, p := range gone {
		if err := fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			problem("remove %s: %v", p, err)
			continue
		}
		res.Removed = append(res.Removed, p)
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	// Directories the target still needs stay; the others go if they are now empty.
	need := map[string]bool{}
	for p := range target {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			need[d] = true
		}
	}
	var empty []string
	for d := range dirs {
		if !need[d] {
			empty = append(empty, d)
		}
	}
	sort.Slice(empty, func(i, j int) bool { return strings.Count(empty[i], "/") > strings.Count(empty[j], "/") })
	for _, d := range empty {
		_ = fs.Remove(d) // fails, as it should, when something snapshots do not hold is in it
	}

	// 2. Write what differs.
	var todo []string
	for p, te := range target {
		if c, ok := current[p]; ok && c.ID == te.id && c.Mode == te.mode {
			if _, err := fs.Lstat(p); err == nil {
				continue
			}
		}
		todo = append(todo, p)
	}
	sort.Strings(todo)
	if len(todo) == 0 {
		return res, nil
	}
	cat, err := r.catFile(ctx)
	if err != nil {
		return nil, err
	}
	defer cat.close()
	for _, p := range todo {
		te := target[p]
		data, err := cat.blob(te.id)
		if err != nil {
			return res, fmt.Errorf("read %s from the snapshot: %w", p, err)
		}
		if err := ensureDir(fs, path.Dir(p)); err != nil {
			problem("%s: %v", p, err)
			continue
		}
		if fi, err := fs.Lstat(p); err == nil && (fi.IsDir() || te.mode == "120000") {
			if err := fs.Remove(p); err != nil {
				problem("%s: %s in the way cannot be removed: %v", p, confined.Kind(fi.Mode().Type()), err)
				continue
			}
		}
		switch te.mode {
		case "120000":
			err = fs.Symlink(string(data), p)
		case "100755":
			err = fs.WriteFile(p, data, 0o755, nil)
		default:
			err = fs.WriteFile(p, data, 0o644, nil)
		}
		if err != nil {
			problem("write %s: %v", p, err)
			continue
		}
		res.Written = append(res.Written, p)
	}
	return res, nil
}

// ensureDir makes the directory d (and its parents) unless it is one already; a file or
// symlink in the way is an error (the confined opener never goes through a symlink).
func ensureDir(fs *confined.Dir, d string) error {
	if d == "." || d == "" {
		return nil
	}
	if fi, err := fs.Lstat(d); err == nil && fi.IsDir() {
		return nil
	}
	parent := path.Dir(d)
	if err := ensureDir(fs, parent); err != nil {
		return err
	}
	if fi, err := fs.Lstat(d); err == nil && !fi.IsDir() {
		// A file the target does not hold at this name was removed above; a symlink or a file
		// that snapshots leave out is in the way.
		if err := fs.Remove(d); err != nil {
			return fmt.Errorf("%s is %s in the way of a directory: %w", d, confined.Kind(fi.Mode().Type()), err)
		}
	}
	return fs.MkdirAll(d, 0o755)
}

// catFile is one `git cat-file --batch` reading blobs by ID.
type catFile struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	cancel context.CancelFunc
}

func (r *Repo) catFile(ctx context.Context) (*catFile, error) {
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	cmd := exec.CommandContext(ctx, r.git, "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "cat-file", "--batch")
	cmd.Dir = r.dir
	cmd.Env = r.gitEnv()
	in, err := cmd.StdinPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, err
	}
	return &catFile{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<16), cancel: cancel}, nil
}

func (c *catFile) blob(id string) ([]byte, error) {
	if _, err := io.WriteString(c.in, id+"\n"); err != nil {
		return nil, err
	}
	hdr, err := c.out.ReadString('\n')
	if err != nil {
		return nil, err
	}
	f := strings.Fields(hdr)
	if len(f) != 3 || f[1] != "blob" {
		return nil, fmt.Errorf("git cat-file: %s", strings.TrimSpace(hdr))
	}
	n, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return nil, err
	}
	data := make([]byte, n+1)
	if _, err := io.ReadFull(c.out, data); err != nil {
		return nil, err
	}
	return data[:n], nil
}

func (c *catFile) close() {
	c.in.Close()
	_ = c.cmd.Wait()
	c.cancel()
}

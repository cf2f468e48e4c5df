package snapshot

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cryochamber/cryochamber/internal/atomicfile"
	"github.com/cryochamber/cryochamber/internal/confined"
)

// Options say what of a chamber a snapshot holds.
type Options struct {
	// Own are the names cryochamber keeps in the chamber for itself (its log, its views, its
	// mailbox, .cryo): never snapshotted, never restored or removed by a rollback. A name
	// matches the path itself or anything under it.
	Own []string
	// Exclude are the operator's globs (snapshot_exclude); see Excluded.
	Exclude []string
	// MaxFile: a regular file larger than this is left out and listed (snapshot_max_file).
	MaxFile int64
	// Keep: snapshots older than this are dropped (snapshot_keep); 0 keeps everything.
	Keep time.Duration
}

// Excluded reports whether the path rel (slash-separated, relative to the chamber) is left out
// of snapshots. An Own name matches itself and what is under it. A glob without a slash
// (`*.tmp`, `node_modules`) matches any element of the path, so a directory it matches is left
// out whole; a glob with one (`build/*.o`, `data/raw`) matches the path from the top, or a
// directory above it. Globs are path.Match's: `*` stays within one element, no `**`.
func (o *Options) Excluded(rel string) bool {
	for _, own := range o.Own {
		if rel == own || strings.HasPrefix(rel, own+"/") {
			return true
		}
	}
	elems := strings.Split(rel, "/")
	for _, g := range o.Exclude {
		g = strings.Trim(g, "/")
		if g == "" {
			continue
		}
		if !strings.Contains(g, "/") {
			for _, e := range elems {
				if ok, _ := path.Match(g, e); ok {
					return true
				}
			}
			continue
		}
		for i := range elems {
			if ok, _ := path.Match(g, strings.Join(elems[:i+1], "/")); ok {
				return true
			}
		}
	}
	return false
}

// cached is what the latest snapshot knew of one file: enough to reuse its blob without
// reading it again when nothing about it changed.
type cached struct {
	Mode  string `json:"m"`
	ID    string `json:"id"`
	Size  int64  `json:"s"`
	Mtime int64  `json:"t"`
	Ctime int64  `json:"c"`
	Ino   uint64 `json:"i"`
}

// cache is the latest snapshot's state (last.json).
type cache struct {
	Seq         int               `json:"seq"`
	Tree        string            `json:"tree"`
	Commit      string            `json:"commit"` // the latest snapshot's commit
	Compacted   time.Time         `json:"compacted"`
	Files       map[string]cached `json:"files"`
	Trees       []string          `json:"trees"`    // the latest snapshot's trees: in the repository (loose or packed)
	SettingsKey string            `json:"settings"` // the options the files were read with
}

func (r *Repo) loadCache() *cache {
	c := &cache{}
	data, err := os.ReadFile(filepath.Join(r.dir, cacheName))
	if err == nil {
		_ = json.Unmarshal(data, c)
	}
	if c.Files == nil {
		c.Files = map[string]cached{}
	}
	if c.Tree == "" {
		c.Tree = EmptyTree
	}
	return c
}

func (r *Repo) saveCache(c *cache) error {
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(r.dir, cacheName), data, 0o600)
}

// walker builds the tree of a chamber, writing the blobs that are new.
type walker struct {
	ctx     context.Context // the snapshot's deadline bounds the walk too
	r       *Repo
	fs      *confined.Dir
	opt     *Options
	old     map[string]cached
	files   map[string]cached
	skipped []Skip
	// known are objects the latest snapshot holds: in the repository for sure (its ref is
	// never dropped), perhaps only in a pack, where writeObject would not see them.
	known map[string]bool
	trees []string
	// moreSkipped counts the files left out past maxSkipped.
	moreSkipped int
}

// store writes an object unless the latest snapshot already holds it.
func (w *walker) store(kind string, data []byte) (string, error) {
	id := objectID(kind, data)
	if w.known[id] {
		return id, nil
	}
	return w.r.writeObject(kind, data)
}

type treeItem struct {
	mode, name, id string
}

// Tree reads the chamber through fs and stores its tree (blobs and trees written as needed),
// returning the root tree's ID, every file with its blob, and what was left out.
func (w *walker) tree(rel string) (string, error) {
	name := rel
	if name == "" {
		name = "."
	}
	ents, err := w.fs.ReadDir(name)
	if err != nil {
		if rel == "" {
			return "", fmt.Errorf("list the chamber: %w", err)
		}
		w.skip(rel, fmt.Sprintf("cannot be listed: %v", err), 0)
		return EmptyTree, nil
	}
	var items []treeItem
	for _, e := range ents {
		if err := w.ctx.Err(); err != nil {
			return "", fmt.Errorf("the snapshot was stopped at its time limit (a chamber of very many files? see snapshot_exclude): %w", err)
		}
		p := path.Join(rel, e.Name())
		if w.opt.Excluded(p) {
			continue
		}
		switch t := e.Type(); {
		case t.IsDir():
			id, err := w.tree(p)
			if err != nil {
				return "", err
			}
			if id != EmptyTree {
				items = append(items, treeItem{"40000", e.Name(), id})
			}
		case t&fs.ModeSymlink != 0:
			target, err := w.fs.Readlink(p)
			if err != nil {
				w.skip(p, fmt.Sprintf("symlink cannot be read: %v", err), 0)
				continue
			}
			id, err := w.store("blob", []byte(target))
			if err != nil {
				return "", err
			}
			w.files[p] = cached{Mode: "120000", ID: id}
			items = append(items, treeItem{"120000", e.Name(), id})
		case t.IsRegular():
			c, ok, err := w.file(p, e)
			if err != nil {
				return "", err
			}
			if ok {
				items = append(items, treeItem{c.Mode, e.Name(), c.ID})
			}
		default:
			w.skip(p, confined.Kind(t), 0)
		}
	}
	if len(items) == 0 {
		return EmptyTree, nil
	}
	// git's order: by name, a tree compared as if its name ended in '/'.
	key := func(it treeItem) string {
		if it.mode == "40000" {
			return it.name + "/"
		}
		return it.name
	}
	sort.Slice(items, func(i, j int) bool { return key(items[i]) < key(items[j]) })
	var buf []byte
	for _, it := range items {
		raw, _ := hex.DecodeString(it.id)
		buf = append(buf, it.mode...)
		buf = append(buf, ' ')
		buf = append(buf, it.name...)
		buf = append(buf, 0)
		buf = append(buf, raw...)
	}
	id, err := w.store("tree", buf)
	if err == nil {
		w.trees = append(w.trees, id)
	}
	return id, err
}

// maxSkipped bounds the files a snapshot lists as left out; the rest are counted. A session
// can leave any number of FIFOs: listed whole, they made the snapshot's index line longer than
// the index reader takes, and every later diff and rollback failed.
const maxSkipped = 1000

func (w *walker) skip(p, why string, size int64) {
	if len(w.skipped) >= maxSkipped {
		w.moreSkipped++
		return
	}
	w.skipped = append(w.skipped, Skip{Path: p, Why: why, Size: size})
}

// skippedList is what the snapshot lists as left out: at most maxSkipped files, then a count.
func (w *walker) skippedList() []Skip {
	if w.moreSkipped == 0 {
		return w.skipped
	}
	return append(w.skipped, Skip{Path: "…", Why: fmt.Sprintf("and %d more files left out, not listed", w.moreSkipped)})
}

// file stores one regular file: from the cache when its stat is what the latest snapshot saw,
// otherwise read through the confined opener (no symlink followed, never blocking, a hard link
// refused). Problems with the file itself leave it out and list it; only a repository that
// cannot be written is an error.
func (w *walker) file(p string, e fs.DirEntry) (cached, bool, error) {
	fi, err := e.Info()
	if err != nil {
		w.skip(p, fmt.Sprintf("cannot be read: %v", err), 0)
		return cached{}, false, nil
	}
	if w.opt.MaxFile > 0 && fi.Size() > w.opt.MaxFile {
		w.skip(p, "larger than snapshot_max_file", fi.Size())
		return cached{}, false, nil
	}
	st := statOf(fi)
	if old, ok := w.old[p]; ok && old.Mode != "120000" && old.Size == st.Size && old.Mtime == st.Mtime && old.Ctime == st.Ctime && old.Ino == st.Ino && old.Mode == st.Mode {
		w.files[p] = old
		return old, true, nil
	}
	f, err := w.fs.Open(p)
	if err != nil {
		var nr *confined.NotRegularError
		if errors.As(err, &nr) {
			w.skip(p, nr.What, 0)
		} else {
			w.skip(p, fmt.Sprintf("cannot be read: %v", err), 0)
		}
		return cached{}, false, nil
	}
	defer f.Close()
	ofi, err := f.Stat()
	if err != nil {
		w.skip(p, fmt.Sprintf("cannot be read: %v", err), 0)
		return cached{}, false, nil
	}
	limit := w.opt.MaxFile
	if limit <= 0 {
		limit = 1 << 40
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		w.skip(p, fmt.Sprintf("cannot be read: %v", err), 0)
		return cached{}, false, nil
	}
	if int64(len(data)) > limit {
		w.skip(p, "larger than snapshot_max_file", int64(len(data)))
		return cached{}, false, nil
	}
	id, err := w.r.writeObject("blob", data)
	if err != nil {
		return cached{}, false, err
	}
	c := statOf(ofi)
	c.ID = id
	w.files[p] = c
	return c, true, nil
}

func statOf(fi fs.FileInfo) cached {
	c := cached{Mode: "100644", Size: fi.Size(), Mtime: fi.ModTime().UnixNano()}
	if fi.Mode().Perm()&0o111 != 0 {
		c.Mode = "100755"
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		c.Ctime = ctime(st)
		c.Ino = uint64(st.Ino)
	}
	return c
}

// Request says what snapshot to take.
type Request struct {
	Kind    Kind
	Session int
	To      int // KindRollback
	Now     time.Time
	// IfChanged: record nothing when the chamber is as the latest snapshot holds it
	// (the snapshot before a session).
	IfChanged bool
}

// Take snapshots the chamber opened as fs. It returns the new entry, or nil when IfChanged
// and nothing changed.
func (r *Repo) Take(ctx context.Context, fs *confined.Dir, opt Options, req Request) (*Entry, error) {
	c := r.loadCache()
	key := settingsKey(opt)
	old := c.Files
	if c.SettingsKey != key {
		old = nil // other exclusions or limit: read everything again
	}
	known := map[string]bool{}
	for _, f := range c.Files {
		known[f.ID] = true
	}
	for _, t := range c.Trees {
		known[t] = true
	}
	w := &walker{ctx: ctx, r: r, fs: fs, opt: &opt, old: old, files: map[string]cached{}, known: known}
	tree, err := w.tree("")
	if err != nil {
		return nil, err
	}
	if tree == EmptyTree {
		if _, err := r.writeObject("tree", nil); err != nil {
			return nil, err
		}
	}
	if req.IfChanged && tree == c.Tree && c.Seq > 0 {
		return nil, nil
	}
	prevTree := c.Tree
	e := Entry{Seq: c.Seq + 1, Kind: req.Kind, Session: req.Session, To: req.To, Time: req.Now.UTC().Truncate(time.Second), Tree: tree, Skipped: w.skippedList()}
	if tree == prevTree && c.Commit != "" {
		// Nothing changed (a session that only answered a message): the entry names the
		// latest commit, which its ref keeps; no object, no ref, no fsync but the index's.
		e.Commit = c.Commit
	} else {
		ts := strconv.FormatInt(req.Now.Unix(), 10) + " +0000"
		msg := fmt.Sprintf("tree %s\nauthor cryochamber <cryochamber@localhost> %s\ncommitter cryochamber <cryochamber@localhost> %s\n\nsnapshot %d: %s\n",
			tree, ts, ts, e.Seq, e.Describe())
		if e.Commit, err = r.writeObject("commit", []byte(msg)); err != nil {
			return nil, err
		}
		if err := r.syncObjects(); err != nil {
			return nil, err
		}
		if prevTree != tree {
			if files, err := r.Changes(ctx, prevTree, tree); err == nil {
				e.Changed = len(files)
			}
		}
		if err := r.writeRef(e.Seq, e.Commit); err != nil {
			return nil, err
		}
	}
	if err := r.appendEntry(e); err != nil {
		return nil, err
	}
	c.Seq, c.Tree, c.Commit, c.Files, c.Trees, c.SettingsKey = e.Seq, tree, e.Commit, w.files, w.trees, key
	if err := r.saveCache(c); err != nil {
		return nil, err
	}
	if err := r.maintain(ctx, c, opt, req.Now); err != nil {
		return &e, fmt.Errorf("snapshot %d taken, but the repository could not be compacted: %w", e.Seq, err)
	}
	return &e, nil
}

func settingsKey(o Options) string {
	return fmt.Sprintf("%q %q %d", o.Own, o.Exclude, o.MaxFile)
}

// compactEvery is how often the snapshots beyond the retention are dropped and the repository
// pruned. In between, `git gc --auto` packs loose objects once there are many.
const compactEvery = 24 * time.Hour

// gcEvery: `git gc --auto` runs after every gcEvery-th snapshot (a snapshot writes a few loose
// objects; git's threshold is thousands).
const gcEvery = 32

// maintain keeps the repository's size bounded by the retention: at most once a day it drops
// the snapshots older than Keep (never the latest), deletes their refs, and runs a full gc that
// prunes what only they held; otherwise a `gc --auto`, which does nothing until git's own
// thresholds are reached.
func (r *Repo) maintain(ctx context.Context, c *cache, opt Options, now time.Time) error {
	if c.Compacted.IsZero() {
		c.Compacted = now
		return r.saveCache(c)
	}
	if now.Sub(c.Compacted) < compactEvery || opt.Keep <= 0 {
		if c.Seq%gcEvery != 0 {
			return nil // a process per session for a check that says "nothing to do"
		}
		_, err := r.Git(ctx, nil, "gc", "--auto", "--quiet")
		return err
	}
	if err := r.Compact(ctx, now.Add(-opt.Keep)); err != nil {
		return err
	}
	c.Compacted = now
	return r.saveCache(c)
}

// Compact drops every snapshot taken before cutoff except the latest, then packs the
// repository and prunes what no kept snapshot holds.
func (r *Repo) Compact(ctx context.Context, cutoff time.Time) error {
	entries, err := r.Entries()
	if err != nil {
		return err
	}
	var keep, drop []Entry
	for i, e := range entries {
		if e.Time.Before(cutoff) && i < len(entries)-1 {
			drop = append(drop, e)
		} else {
			keep = append(keep, e)
		}
	}
	if len(drop) > 0 {
		// Several entries may name one commit (a session that changed nothing names the one
		// before it), and the ref is the first one's: a ref goes when no kept entry names its
		// commit.
		kept := map[string]bool{}
		for _, e := range keep {
			kept[e.Commit] = true
		}
		refs, err := r.Git(ctx, nil, "for-each-ref", "--format=%(objectname) %(refname)", "refs/snapshots/")
		if err != nil {
			return err
		}
		var cmds strings.Builder
		for _, line := range strings.Split(strings.TrimSpace(string(refs)), "\n") {
			if id, name, ok := strings.Cut(line, " "); ok && !kept[id] {
				fmt.Fprintf(&cmds, "delete %s\n", name)
			}
		}
		if _, err := r.Git(ctx, strings.NewReader(cmds.String()), "update-ref", "--no-deref", "--stdin"); err != nil {
			return err
		}
		var buf []byte
		for _, e := range keep {
			line, _ := json.Marshal(e)
			buf = append(append(buf, line...), '\n')
		}
		if err := atomicfile.Write(filepath.Join(r.dir, indexName), buf, 0o600); err != nil {
			return err
		}
	}
	_, err = r.Git(ctx, nil, "gc", "--quiet", "--prune=now")
	return err
}

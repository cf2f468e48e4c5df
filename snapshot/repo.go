// Package snapshot keeps a history of a chamber's files: one snapshot after every session (and
// before it, when something changed between sessions), in a private git repository in the
// chamber's state directory, so that the operator can see what a session changed (`diff`) and
// put the chamber back as it was (`rollback`).
//
// The repository is git's own format (loose objects, packs, refs), so `git` can read it, but
// no git code ever walks the chamber: this package reads the chamber's files through
// internal/confined (no symlink followed, FIFOs and devices never opened, a hard link refused)
// and writes the blob, tree and commit objects itself. The `git` program is run only on the
// private repository (GIT_DIR set, no work tree, hooks and fsmonitor off, no system or global
// configuration, HOME in the state directory): to compare two trees, to read blobs back for a
// rollback, and to pack and prune. It never runs anything the chamber names, and it never reads
// the chamber's own .git (the chamber's .git is not part of the snapshot at all).
//
// Each snapshot is a commit without a parent, kept alive by its own ref
// (refs/snapshots/<seq>), and listed in an index (snapshots.jsonl). Dropping a snapshot older
// than the retention is dropping its ref and its index line; `git gc --prune=now` then frees
// what only it held. So a chamber's fifth year costs what its first day cost: the work of a
// snapshot depends on the chamber and the snapshots kept, never on how many were ever taken.
package snapshot

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/internal/atomicfile"
)

// EmptyTree is the ID of git's empty tree.
const EmptyTree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

// Files of the repository directory besides git's own.
const (
	indexName = "snapshots.jsonl" // one Entry per line, oldest first
	cacheName = "last.json"       // the latest snapshot's files with their stat, to skip re-reading
)

// gitTimeout bounds one git command (gc of a large repository included).
const gitTimeout = 5 * time.Minute

// Repo is the private snapshot repository of one chamber.
type Repo struct {
	dir string // the repository (GIT_DIR)
	git string // absolute path of the git program
	// dirty are the object directories written since the last sync.
	dirty map[string]bool
}

// Open opens (creating it if needed, 0700) the repository at dir. git is the absolute path of
// the git program, resolved by the caller on a PATH it trusts.
func Open(dir, git string) (*Repo, error) {
	r := &Repo{dir: dir, git: git, dirty: map[string]bool{}}
	if err := r.init(); err != nil {
		return nil, err
	}
	return r, nil
}

// Dir is the repository's directory.
func (r *Repo) Dir() string { return r.dir }

// init lays out a bare repository by hand (no `git init`: no templates, no sample hooks).
func (r *Repo) init() error {
	for _, d := range []string{"", "objects", "refs", "refs/snapshots", "refs/heads"} {
		if err := os.MkdirAll(filepath.Join(r.dir, d), 0o700); err != nil {
			return fmt.Errorf("create the snapshot repository: %w", err)
		}
	}
	files := map[string]string{
		"HEAD": "ref: refs/heads/main\n",
		// bare: there is no work tree, ever. logAllRefUpdates off: no reflog keeps a dropped
		// snapshot alive. Hooks and fsmonitor are also turned off on every command line.
		"config": "[core]\n\trepositoryformatversion = 0\n\tbare = true\n\tlogallrefupdates = false\n\thooksPath = /dev/null\n\tfsmonitor = false\n[gc]\n\tautoDetach = false\n\treflogExpire = now\n",
	}
	for name, data := range files {
		p := filepath.Join(r.dir, name)
		if _, err := os.Stat(p); err == nil {
			continue
		}
		if err := atomicfile.Write(p, []byte(data), 0o600); err != nil {
			return fmt.Errorf("create the snapshot repository: %w", err)
		}
	}
	return nil
}

// Git runs the git program on the repository, isolated from every configuration but the
// repository's own: no system or global config, HOME and XDG_CONFIG_HOME in the repository,
// hooks and fsmonitor off, no external diff or text conversion. Its working directory is the
// repository; there is no work tree.
func (r *Repo) Git(ctx context.Context, stdin io.Reader, args ...string) ([]byte, error) {
	var out bytes.Buffer
	err := r.gitTo(ctx, stdin, &out, args...)
	return out.Bytes(), err
}

func (r *Repo) gitTo(ctx context.Context, stdin io.Reader, stdout io.Writer, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	full := append([]string{
		"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.bare=true",
		"-c", "gc.autoDetach=false", "-c", "diff.external=", "-c", "core.pager=cat",
		"-c", "core.quotePath=true", "-c", "color.ui=false",
	}, args...)
	cmd := exec.CommandContext(ctx, r.git, full...)
	cmd.Dir = r.dir
	cmd.Env = r.gitEnv()
	cmd.Stdin = stdin
	cmd.Stdout = stdout
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 500 {
			msg = msg[:500]
		}
		if msg != "" {
			return fmt.Errorf("git %s: %w: %s", args[0], err, msg)
		}
		return fmt.Errorf("git %s: %w", args[0], err)
	}
	return nil
}

// gitEnv is the whole environment of a git command: the repository, and nothing of the
// user's or the chamber's configuration.
func (r *Repo) gitEnv() []string {
	return []string{
		"GIT_DIR=" + r.dir,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_NO_REPLACE_OBJECTS=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_OPTIONAL_LOCKS=0",
		"HOME=" + r.dir,
		"XDG_CONFIG_HOME=" + r.dir,
		"LC_ALL=C",
		"PATH=" + filepath.Dir(r.git) + ":/usr/bin:/bin",
	}
}

// objectID is git's name of an object: the SHA-1 of its header and content.
func objectID(kind string, data []byte) string {
	h := sha1.New()
	h.Write([]byte(kind + " " + strconv.Itoa(len(data)) + "\x00"))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// writeObject stores a git object (loose, zlib-compressed, written to a temporary file,
// fsynced, renamed) and returns its ID. An object that is already there loose is not written
// again; one that is only packed is written loose once more (gc drops the copy).
func (r *Repo) writeObject(kind string, data []byte) (string, error) {
	hdr := kind + " " + strconv.Itoa(len(data)) + "\x00"
	id := objectID(kind, data)
	dir := filepath.Join(r.dir, "objects", id[:2])
	p := filepath.Join(dir, id[2:])
	if _, err := os.Stat(p); err == nil {
		return id, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, "tmp_obj_")
	if err != nil {
		return "", err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	zw, _ := zlib.NewWriterLevel(f, zlib.BestSpeed)
	if _, err := zw.Write([]byte(hdr)); err != nil {
		return "", err
	}
	if _, err := zw.Write(data); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	if err := f.Sync(); err != nil {
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(f.Name(), p); err != nil {
		return "", err
	}
	ok = true
	r.dirty[dir] = true
	return id, nil
}

// syncObjects fsyncs the object directories written since the last call, so that no ref or
// index line written after it can name an object a crash lost.
func (r *Repo) syncObjects() error {
	for d := range r.dirty {
		if err := atomicfile.SyncDir(d); err != nil {
			return err
		}
	}
	if len(r.dirty) > 0 {
		if err := atomicfile.SyncDir(filepath.Join(r.dir, "objects")); err != nil {
			return err
		}
	}
	r.dirty = map[string]bool{}
	return nil
}

// Entry is one snapshot, one line of the index.
type Entry struct {
	Seq     int       `json:"seq"`
	Kind    Kind      `json:"kind"`
	Session int       `json:"session"`       // after (KindSession) or before (KindBefore) this session; the last session (KindRollback)
	To      int       `json:"to,omitempty"`  // KindRollback: the session whose snapshot was restored
	Time    time.Time `json:"time"`          //
	Commit  string    `json:"commit"`        //
	Tree    string    `json:"tree"`          //
	Changed int       `json:"files_changed"` // paths changed since the previous snapshot
	Skipped []Skip    `json:"skipped,omitempty"`
}

// Kind says when a snapshot was taken.
type Kind string

const (
	KindBefore   Kind = "before"   // before a session, when the chamber changed since the last snapshot
	KindSession  Kind = "session"  // after a session
	KindRollback Kind = "rollback" // the chamber as a rollback left it
	KindPresent  Kind = "present"  // the chamber as it was when a rollback replaced it
)

// Describe says what the snapshot is, for headers and messages.
func (e *Entry) Describe() string {
	t := e.Time.UTC().Format(time.RFC3339)
	switch e.Kind {
	case KindBefore:
		return fmt.Sprintf("before session %d (%s)", e.Session, t)
	case KindPresent:
		return fmt.Sprintf("the chamber before a rollback (%s)", t)
	case KindRollback:
		return fmt.Sprintf("the rollback to after session %d (%s)", e.To, t)
	}
	return fmt.Sprintf("after session %d (%s)", e.Session, t)
}

// Skip is a file left out of a snapshot, and why.
type Skip struct {
	Path string `json:"path"`
	Why  string `json:"why"`
	Size int64  `json:"size,omitempty"`
}

// Entries reads the index, oldest first. A line a crash cut short is skipped.
func (r *Repo) Entries() ([]Entry, error) {
	f, err := os.Open(filepath.Join(r.dir, indexName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Entry
	// A line longer than maxIndexLine (an earlier release listed every skipped file) is
	// skipped like a torn one: the snapshots after it stay listed.
	rd := bufio.NewReaderSize(f, 64<<10)
	var line []byte
	long := false
	for {
		chunk, err := rd.ReadSlice('\n')
		if !long {
			if len(line)+len(chunk) > maxIndexLine {
				long, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if !long {
			var e Entry
			if json.Unmarshal(line, &e) == nil && e.Commit != "" {
				out = append(out, e)
			}
		}
		line, long = line[:0], false
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// maxIndexLine bounds one line of the index read back.
const maxIndexLine = 16 << 20

// appendEntry adds e to the index (after its objects and its ref are durable).
func (r *Repo) appendEntry(e Entry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	p := filepath.Join(r.dir, indexName)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	// A crash may have cut the last line: start on a line of its own.
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
		var last [1]byte
		if rf, err := os.Open(p); err == nil {
			if _, err := rf.ReadAt(last[:], fi.Size()-1); err == nil && last[0] != '\n' {
				line = append([]byte{'\n'}, line...)
			}
			rf.Close()
		}
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		return err
	}
	return f.Sync()
}

// writeRef points refs/snapshots/<seq> at commit (a loose ref, written atomically).
func (r *Repo) writeRef(seq int, commit string) error {
	return atomicfile.Write(filepath.Join(r.dir, "refs", "snapshots", strconv.Itoa(seq)), []byte(commit+"\n"), 0o600)
}

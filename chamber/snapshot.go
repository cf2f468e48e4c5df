package chamber

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cryochamber/cryochamber/internal/program"
	"github.com/cryochamber/cryochamber/internal/termtext"
	"github.com/cryochamber/cryochamber/snapshot"
)

// Snapshots of the chamber's files (issue 27): before a session (when the chamber changed
// since the last snapshot: the operator's edits, a rollback) and after it, kept in a private
// git repository in the state directory (package snapshot). A snapshot never holds up arming:
// one that fails is a warning and a notice to the operator, and the session goes on.
const (
	snapshotsDir    = "snapshots"            // the repository, in the private state directory
	rolledBackName  = "rolled-back"          // a rollback the next session's prompt must tell
	snapFailingName = "snapshots-failing"    // the last snapshot failed (one notice per streak)
	snapshotTimeout = 5 * time.Minute        // one snapshot, compaction included
	gitProgram      = "git"                  // looked up on the chamber's PATH, never in it
	snapPrompt      = "the operator rolled " // the start of the prompt's rollback line
)

// snapshotOptions is what the chamber's snapshots hold: everything but cryochamber's own
// files and views (the log, timer.json, todo.json, .cryo, the mailbox), the chamber's own
// .git (a repository of its own, never read by us), and what the operator excluded.
func (c *Config) snapshotOptions() snapshot.Options {
	return snapshot.Options{
		Own:     []string{LogFile, StateFile, todoName, PrivateDir, "messages", ".git"},
		Exclude: append([]string{LogFile + ".corrupt-*", PrivateDir + ".moved-aside-*"}, c.SnapshotExclude...),
		MaxFile: c.SnapshotMaxFile.N,
		Keep:    c.SnapshotKeep.D,
	}
}

// snapshotOptions are the configuration's, plus the private state directory when it lies
// inside the chamber (XDG_STATE_HOME set there): the repository must never hold itself.
func (r *runner) snapshotOptions() snapshot.Options {
	opt := r.cfg.snapshotOptions()
	for _, p := range []string{r.env.StateDir, string(r.store)} {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		if rel, err := filepath.Rel(r.dir, p); err == nil && rel != "." && !strings.HasPrefix(rel, "..") && !filepath.IsAbs(rel) {
			opt.Own = append(opt.Own, filepath.ToSlash(rel))
		}
	}
	return opt
}

// snapRepo opens the chamber's snapshot repository, with the git program found on the PATH
// the chamber runs with (never a program inside the chamber).
func (r *runner) snapRepo() (*snapshot.Repo, error) {
	git, err := program.Look(gitProgram, "", r.capturedPath())
	if err != nil {
		return nil, fmt.Errorf("snapshots need the git program: %w", err)
	}
	if strings.HasPrefix(git, r.dir+string(filepath.Separator)) {
		return nil, fmt.Errorf("the git program found on the PATH (%s) is inside the chamber: not run", git)
	}
	return snapshot.Open(r.store.path(snapshotsDir), git)
}

// takeSnapshot takes one snapshot of the chamber.
func (r *runner) takeSnapshot(ctx context.Context, req snapshot.Request) (*snapshot.Entry, error) {
	if r.fs == nil {
		return nil, r.fsErr
	}
	repo, err := r.snapRepo()
	if err != nil {
		return nil, err
	}
	// Bounded well inside the session's dead-man (armed at its start + fallback_after), so a
	// slow snapshot of a huge chamber can never make a finished session look overdue.
	limit := min(snapshotTimeout, r.cfg.FallbackAfter.D/4)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limit)
	defer cancel()
	return repo.Take(ctx, r.fs, r.snapshotOptions(), req)
}

// snapshotBefore runs before session n: it records the chamber if it changed since the last
// snapshot (so that `diff --session n` shows only what session n did), and tells the session
// of a rollback since the last one.
func (r *runner) snapshotBefore(ctx context.Context, n int) {
	if data, err := r.store.read(rolledBackName, 64); err == nil {
		if to, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
			r.warnings = append(r.warnings, fmt.Sprintf("%sthe chamber back to after session %d (cryochamber rollback): its files are as they were then, and what later sessions wrote there is gone", snapPrompt, to))
		}
	}
	if !r.cfg.SnapshotsOn() {
		return
	}
	_, err := r.takeSnapshot(ctx, snapshot.Request{Kind: snapshot.KindBefore, Session: n, Now: r.now(), IfChanged: true})
	r.snapshotDone(ctx, n, err)
}

// snapshotAfter records the chamber after session f, for its history row (files changed).
func (r *runner) snapshotAfter(ctx context.Context, f *finishing) {
	r.store.clearFlag(rolledBackName) // the session that was told has run
	if !r.cfg.SnapshotsOn() {
		return
	}
	e, err := r.takeSnapshot(ctx, snapshot.Request{Kind: snapshot.KindSession, Session: f.n, Now: r.now()})
	if e != nil {
		changed := e.Changed
		f.filesChanged = &changed
	}
	r.snapshotDone(ctx, f.n, err)
}

// snapshotRecovered takes the snapshot after session f when its process died before taking
// it (a recovery): unless the snapshot is there already (the process died after it), which a
// second one would make look like a session that changed nothing.
func (r *runner) snapshotRecovered(ctx context.Context, f *finishing) {
	if !r.cfg.SnapshotsOn() || r.fs == nil {
		return
	}
	if repo, err := r.snapRepo(); err == nil {
		if entries, err := repo.Entries(); err == nil && len(entries) > 0 {
			if last := entries[len(entries)-1]; last.Kind == snapshot.KindSession && last.Session == f.n {
				changed := last.Changed
				f.filesChanged = &changed
				return
			}
		}
	}
	r.snapshotAfter(ctx, f)
}

// snapshotDone reports a snapshot that failed: a warning every time, a notice to the operator
// once per run of failures (a full disk says so, as the other disk cases do).
func (r *runner) snapshotDone(ctx context.Context, n int, err error) {
	if err == nil {
		r.store.clearFlag(snapFailingName)
		return
	}
	r.warnf("the snapshot of the chamber's files failed (the session goes on): %v", err)
	if r.store.flag(snapFailingName) {
		return
	}
	_ = r.store.setFlag(snapFailingName, r.now())
	reason, text := "snapshot", fmt.Sprintf("the snapshot of the chamber's files around session %d failed: %v. Sessions go on; `diff` and `rollback` will not see this session until snapshots work again.", n, err)
	if errors.Is(err, syscall.ENOSPC) {
		reason = "disk"
		text = fmt.Sprintf("the disk that holds the chamber's snapshots (%s) is full: the snapshot around session %d was not taken. Sessions go on; free space there.", r.store.path(snapshotsDir), n)
	}
	r.notify(ctx, n, reason, text)
}

// DiffOptions are the options of `cryochamber diff`.
type DiffOptions struct {
	Dir     string
	Session int
	Stat    bool // a summary (git's --stat) instead of the patch
}

// SessionDiff is what session N changed, for `diff --json` and the dashboard.
type SessionDiff struct {
	Session  int               `json:"session"`
	Snapshot string            `json:"snapshot"` // what the snapshot is ("after session 3 (time)")
	Since    string            `json:"since"`    // what it is compared with
	Files    []snapshot.Change `json:"files"`
	Skipped  []snapshot.Skip   `json:"skipped"` // left out of the snapshot (too large, not a regular file)
	Patch    string            `json:"-"`
	Cut      bool              `json:"-"` // Patch was cut at the limit asked for
	repo     *snapshot.Repo
	a, b     string
}

// LoadDiff finds what session n changed: the snapshot after it against the one before it.
// maxPatch > 0 also reads the patch, cut at maxPatch bytes (the dashboard's bound).
func LoadDiff(ctx context.Context, env *Env, dir string, n int, maxPatch int) (*SessionDiff, error) {
	r, _, err := open(ctx, env, dir, openOptions{unlocked: true})
	if err != nil {
		return nil, err
	}
	defer r.close()
	return r.loadDiff(ctx, n, maxPatch)
}

func (r *runner) loadDiff(ctx context.Context, n int, maxPatch int) (*SessionDiff, error) {
	if _, err := os.Stat(r.store.path(snapshotsDir)); err != nil {
		return nil, failErr("snapshots are taken after every session while `snapshots = true` (the default) in cryo.toml",
			"the chamber %s has no snapshots", r.dir)
	}
	repo, err := r.snapRepo()
	if err != nil {
		return nil, &Error{Msg: "cannot read the snapshots", Err: err, Hint: "install git (snapshots are kept in a git repository in the private state directory)"}
	}
	entries, err := repo.Entries()
	if err != nil {
		return nil, &Error{Msg: "cannot read the snapshots", Err: err}
	}
	prev, e := snapshot.AfterSession(entries, n)
	if e == nil {
		return nil, failErr(fmt.Sprintf("`cryochamber history --dir %s` lists the sessions; snapshots older than snapshot_keep are dropped, and none is taken while snapshots = false", r.dir),
			"there is no snapshot of the chamber after session %d", n)
	}
	d := &SessionDiff{Session: n, Snapshot: e.Describe(), Since: "an empty chamber (the first snapshot kept)", Skipped: e.Skipped, repo: repo, a: snapshot.EmptyTree, b: e.Tree}
	if d.Skipped == nil {
		d.Skipped = []snapshot.Skip{}
	}
	if prev != nil {
		d.Since, d.a = prev.Describe(), prev.Tree
	}
	if d.Files, err = repo.Changes(ctx, d.a, d.b); err != nil {
		return nil, &Error{Msg: "cannot compare the snapshots", Err: err}
	}
	if d.Files == nil {
		d.Files = []snapshot.Change{}
	}
	if maxPatch > 0 {
		w := &capWriter{max: maxPatch}
		// Cut at the bound, git ends on a broken pipe: that is the bound, not a failure.
		if err := repo.Patch(ctx, w, d.a, d.b); err != nil && !w.cut {
			return nil, &Error{Msg: "cannot compare the snapshots", Err: err}
		}
		d.Patch, d.Cut = w.b.String(), w.cut
	}
	return d, nil
}

// errCapped ends a patch at the dashboard's bound.
var errCapped = errors.New("patch cut at its bound")

type capWriter struct {
	b   strings.Builder
	max int
	cut bool
}

func (w *capWriter) Write(p []byte) (int, error) {
	if room := w.max - w.b.Len(); len(p) > room {
		w.b.Write(p[:max(room, 0)])
		w.cut = true
		return 0, errCapped
	}
	return w.b.Write(p)
}

// Diff prints what session n changed: a header (the two snapshots compared, the files left out
// of the snapshot), then the unified diff, or git's --stat summary.
func Diff(ctx context.Context, env *Env, opts DiffOptions, asJSON bool) error {
	r, _, err := open(ctx, env, opts.Dir, openOptions{unlocked: true})
	if err != nil {
		return err
	}
	defer r.close()
	d, err := r.loadDiff(ctx, opts.Session, 0)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(env.Stdout, d)
	}
	w := newLineSanitizer(env.Stdout)
	fmt.Fprintf(w, "# session %d: the chamber %s, compared with %s\n", d.Session, d.Snapshot, d.Since)
	for _, s := range d.Skipped {
		fmt.Fprintln(w, skippedLine(s))
	}
	if len(d.Files) == 0 {
		fmt.Fprintln(w, "# no file changed")
	}
	if opts.Stat {
		err = d.repo.Stat(ctx, w, d.a, d.b)
	} else {
		err = d.repo.Patch(ctx, w, d.a, d.b)
	}
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return &Error{Msg: "cannot compare the snapshots", Err: err}
	}
	return nil
}

// skippedLine is the diff's header line for a file left out of the snapshot. The name is the
// session's: quoted when it holds what would break the line (a newline forging lines of the
// diff, an escape sequence), as it is otherwise.
func skippedLine(s snapshot.Skip) string {
	name := fileName(s.Path)
	if s.Size > 0 {
		return fmt.Sprintf("# not in the snapshot: %s (%s, %s)", name, humanSize(s.Size), s.Why)
	}
	return fmt.Sprintf("# not in the snapshot: %s (%s)", name, s.Why)
}

// fileName is a name of the chamber's as cryochamber prints it: quoted (Go's escapes) when it
// holds a control character, an escape sequence or invalid UTF-8, as it is otherwise.
func fileName(p string) string {
	if q := strconv.Quote(p); q[1:len(q)-1] != p {
		return q
	}
	return p
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// RollbackOptions are the options of `cryochamber rollback`.
type RollbackOptions struct {
	Dir string
	To  int // the session whose snapshot is restored
}

// Rollback puts the chamber's files back as they were after session To, under the chamber's
// lock (refused while a session runs). The chamber as it was is snapshotted first and the
// result after, so another rollback undoes this one; the next session's prompt says so.
func Rollback(ctx context.Context, env *Env, opts RollbackOptions) error {
	r, done, err := open(ctx, env, opts.Dir, openOptions{command: "rollback"})
	if err != nil {
		return err
	}
	if done {
		return failErr("wait until the session has ended (`cryochamber status` shows it), then run the rollback again",
			"rollback refused: the chamber is in use")
	}
	defer r.close()
	if r.st.Phase == PhaseRunning {
		return failErr(fmt.Sprintf("run `cryochamber wake --dir %s` to recover it first", r.dir),
			"rollback refused: session %d did not finish (its process died)", r.st.Session)
	}
	if r.fs == nil {
		return &Error{Msg: "rollback refused", Err: r.fsErr}
	}
	repo, err := r.snapRepo()
	if err != nil {
		return &Error{Msg: "rollback refused", Err: err, Hint: "install git (snapshots are kept in a git repository in the private state directory)"}
	}
	entries, err := repo.Entries()
	if err != nil {
		return &Error{Msg: "cannot read the snapshots", Err: err}
	}
	_, target := snapshot.AfterSession(entries, opts.To)
	if target == nil {
		return failErr(fmt.Sprintf("`cryochamber history --dir %s` lists the sessions; snapshots older than snapshot_keep are dropped", r.dir),
			"there is no snapshot of the chamber after session %d", opts.To)
	}
	opt := r.snapshotOptions()
	cctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
	defer cancel()
	// The chamber as it is now: what the rollback replaces stays in the history.
	if _, err := repo.Take(cctx, r.fs, opt, snapshot.Request{Kind: snapshot.KindPresent, Session: r.st.Session, Now: r.now(), IfChanged: true}); err != nil {
		return &Error{Msg: "rollback refused: the chamber as it is now could not be snapshotted first", Err: err}
	}
	res, err := repo.Restore(cctx, r.fs, opt, target.Tree)
	if err != nil {
		return &Error{Msg: "the rollback stopped part way", Err: err, Hint: fmt.Sprintf("run it again; `cryochamber diff --dir %s --session %d` shows what that session's snapshot holds", r.dir, opts.To)}
	}
	after, err := repo.Take(cctx, r.fs, opt, snapshot.Request{Kind: snapshot.KindRollback, Session: r.st.Session, To: opts.To, Now: r.now()})
	if err != nil {
		r.warnf("the chamber after the rollback could not be snapshotted: %v", err)
	}
	if err := r.store.write(rolledBackName, []byte(strconv.Itoa(opts.To)+"\n"), nil); err != nil {
		r.warnf("the next session will not be told of the rollback: %v", err)
	}
	r.printf("rolled the chamber %s back to after session %d: %d file(s) written, %d removed", r.dir, opts.To, len(res.Written), len(res.Removed))
	for _, p := range res.Problems {
		r.warnf("%s", termtext.OneLine(p, 0)) // they name the session's files
	}
	if after != nil {
		// Files snapshots cannot hold (too large, FIFOs, hard links) are never removed: a
		// rollback could not give them back.
		for _, s := range after.Skipped {
			if s.Size > 0 {
				r.printf("  not in any snapshot, left as it is: %s (%s, %s)", fileName(s.Path), humanSize(s.Size), s.Why)
			} else {
				r.printf("  not in any snapshot, left as it is: %s (%s)", fileName(s.Path), s.Why)
			}
		}
	}
	if after != nil && after.Tree != target.Tree {
		r.warnf("the chamber does not hold exactly the files of session %d's snapshot (see the problems above)", opts.To)
	}
	if r.st.Session > 0 {
		r.printf("undo with: cryochamber rollback --dir %s --to-session %d", r.dir, r.st.Session)
	}
	if len(res.Problems) > 0 {
		return failErr("", "the rollback left %d problem(s)", len(res.Problems))
	}
	return nil
}

// lineSanitizer passes text through termtext.Line a line at a time: a diff is the agent's
// text, and may hold escape sequences meant for the operator's terminal.
type lineSanitizer struct {
	w   io.Writer
	buf []byte
	err error
}

func newLineSanitizer(w io.Writer) *lineSanitizer { return &lineSanitizer{w: w} }

func (s *lineSanitizer) Write(p []byte) (int, error) {
	s.buf = append(s.buf, p...)
	for {
		i := bytes.IndexByte(s.buf, '\n')
		if i < 0 {
			break
		}
		s.emit(s.buf[:i])
		s.buf = s.buf[i+1:]
	}
	return len(p), s.err
}

func (s *lineSanitizer) emit(line []byte) {
	if s.err == nil {
		_, s.err = io.WriteString(s.w, termtext.Line(string(line))+"\n")
	}
}

// Flush writes a last line without its newline.
func (s *lineSanitizer) Flush() error {
	if len(s.buf) > 0 {
		s.emit(s.buf)
		s.buf = nil
	}
	return s.err
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

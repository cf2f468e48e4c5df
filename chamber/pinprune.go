package chamber

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/internal/atomicfile"
	"github.com/cryochamber/cryochamber/internal/flock"
	"github.com/cryochamber/cryochamber/timer"
)

// Old pinned copies (issue 23's leftover, docs/RELIABILITY.md "Ways a plan can stop"). Every
// build that pins itself (start, reload, the re-pin of repin.go) leaves a copy in the state
// directory's bin/, one per build, shared by the chambers; nothing removed them. A copy is what
// a dead-man or alert timer armed earlier runs by its path: removing one that something still
// names would make that dead-man fail without a word, the worst outcome here. So a copy is
// removed only when it is proven unused, and any doubt keeps it:
//
//   - the newest keepCopies copies, the chamber's own, and a copy made or reused less than
//     pruneGrace ago are kept whatever else;
//   - a copy is kept when its name appears in what the timer manager may run (every unit file,
//     and the ExecStart= of every loaded cryochamber service as the manager holds it: timer.RunText),
//     in any chamber's pin.json or state.json, or is the program of a running process;
//   - a copy found unused is only marked; it is removed at a later prune, pruneGrace after it was
//     first found unused, if it is still unused then. A process that took the copy in hand in the
//     instant of one look (a timer started from a unit rewritten in that instant) has written it
//     down, or is still running, by the next look;
//   - when any of these cannot be read (a chamber's file unreadable, or an entry of chambers/
//     that is not a readable directory; the manager not answering, a backend that cannot list
//     what it runs; no /proc), nothing is removed;
//   - nothing is removed either when any chamber of the state directory uses a backend that
//     cannot list what it runs, whichever chamber prunes: a job script of Slurm's in
//     $STATE/slurm (it execs a copy by its path, sbatch keeps its own copy of a queued job's
//     script, and the compute nodes' processes are not in this /proc), or a chamber whose
//     state.json or accepted cryo.toml says backend slurm or launchd (pinprune_blind.go).
//
// The looks take their time (a /proc scan, the manager up to busTimeout, every chamber's files)
// without bin/.lock, which pinBinary waits for (from inside a wake's claim): a prune stopped
// with Ctrl-Z must not hang the wakes. pinBinary sets a copy's time whenever it hands it out,
// under bin/.lock; the prune takes that lock only for its last instant, looks at each copy's
// time again and renames away only one not handed out since the looks began. A copy is removed
// by renaming its directory to .prune-<name> first, then removing that: a prune killed at any
// point leaves every copy under its own name whole, and the next prune removes what it left
// under the other name. bin/.prune.lock keeps to one prune at a time. A prune runs at most once
// per command, when a command pinned a new copy (pruneDue: start, reload, a re-pin), under the
// chamber's lock, after the command's work: no look happens between commands that pin, so a
// copy is removed by the first pinning command at least pruneGrace after a look found it
// unused.

const (
	keepCopies  = 2              // the newest copies, kept whatever else
	pruneGrace  = 24 * time.Hour // see above
	binLock     = ".lock"        // flock(2) of bin/: pinBinary against the prune's renames
	pruneMarks  = ".unused.json" // copy name → when it was first found unused
	prunePrefix = ".prune-"      // a copy being removed
)

// The locks' timing (see above).
const (
	pruneLock   = ".prune.lock"   // flock(2) of bin/: one prune at a time, held across its looks
	binLockWait = 5 * time.Second // the longest pinBinary waits for bin/.lock (pins.go)
)

// copyName reports whether name is the directory of a pinned copy (16 hex digits: pinBinary).
func copyName(name string) bool {
	if len(name) != 16 {
		return false
	}
	for _, c := range name {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// pruneCopies removes the pinned copies nothing can run any more (see above). It never fails the
// command: what it could not do is said on stderr, and the copies stay.
func (r *runner) pruneCopies() {
	if !r.pruneDue || r.unlocked || r.lock == nil || r.env.StateDir == "" {
		return
	}
	r.pruneDue = false
	bin := filepath.Join(r.env.StateDir, "bin")
	// One prune at a time (the marks, the renames); never the lock pinBinary waits for, which
	// is held only for the last instant (see below).
	pl, err := flock.Try(filepath.Join(bin, pruneLock))
	if err != nil {
		return // another prune: it looks for us
	}
	defer pl.Unlock()
	ents, err := os.ReadDir(bin)
	if err != nil {
		return
	}
	now := r.now()
	type cand struct {
		name string
		mod  time.Time
	}
	var all []cand
	for _, e := range ents {
		switch name := e.Name(); {
		case strings.HasPrefix(name, prunePrefix):
			// Left by a prune that was killed: proven unused when it was renamed.
			if err := os.RemoveAll(filepath.Join(bin, name)); err != nil {
				r.warnf("cannot remove %s: %v", filepath.Join(bin, name), err)
			}
		case copyName(name) && e.IsDir():
			all = append(all, cand{name, copyTime(bin, name)})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].mod.After(all[j].mod) })
	own := ""
	if p := r.pin(); p != nil && p.Copy != "" {
		own = filepath.Base(filepath.Dir(p.Copy))
	}
	var cands []string
	for i, c := range all {
		if i < keepCopies || c.name == own || now.Sub(c.mod) < pruneGrace {
			continue
		}
		cands = append(cands, c.name)
	}
	marks := map[string]time.Time{}
	if data, err := store(bin).read(pruneMarks, maxStateSize); err == nil {
		_ = json.Unmarshal(data, &marks)
	}
	if len(cands) == 0 {
		if len(marks) > 0 {
			_ = os.Remove(filepath.Join(bin, pruneMarks))
		}
		return
	}
	// Slurm runs copies where no look here can see them (pinprune_blind.go): every copy stays.
	if blind, err := slurmJobs(r.env.StateDir); blind || err != nil {
		if err != nil {
			r.warnf("old copies of cryochamber in %s are kept: %v", bin, err)
		}
		return
	}
	// The looks, in this order: the processes, then the timer manager, then the chambers' files
	// (a copy moves from a chamber's files to a unit, never back, and from a unit to a process).
	running, err := runningCopies(bin)
	if err != nil {
		return // no process table to read (not Linux): every copy stays
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*busTimeout)
	defer cancel()
	var text string
	if err := r.withBackend(ctx, func(be timer.Backend) (err error) { text, err = timer.RunText(ctx, be); return err }); err != nil {
		if !errors.Is(err, timer.ErrCannotTell) {
			r.warnf("old copies of cryochamber in %s are kept: the timer manager could not say what it runs (%v)", bin, err)
		}
		return
	}
	states, blind, err := chamberFiles(r.env.StateDir)
	if err != nil {
		r.warnf("old copies of cryochamber in %s are kept: %v", bin, err)
		return
	}
	if blind {
		return // a chamber on launchd or Slurm: what it runs cannot be listed
	}
	if r.st != nil {
		text += "\n" + r.st.Binary // this command's own, perhaps not saved yet
	}
	text += "\n" + states
	next := map[string]time.Time{}
	var unused []string // unused at two looks pruneGrace apart
	for _, c := range cands {
		if running[c] || strings.Contains(text, c) {
			continue // used: its mark, if any, is dropped
		}
		first, ok := marks[c]
		if !ok || first.After(now) {
			next[c] = now // unused for the first time: removed at a prune pruneGrace from now
			continue
		}
		next[c] = first
		if now.Sub(first) >= pruneGrace {
			unused = append(unused, c)
		}
	}
	// The looks above took their time without bin/.lock, so that no pin waits on them; a copy
	// handed out since they began was touched by pinBinary under the lock. Under the lock, a copy
	// touched since is kept; one not touched cannot be handed out before it is renamed away.
	var gone []string
	if len(unused) > 0 {
		r.env.checkpoint("prune-looked") // the tests pause here: a pin in this instant goes through
		l, err := flock.WaitFor(filepath.Join(bin, binLock), binLockWait)
		if err != nil {
			unused = nil // a pin that does not let go: the next prune looks again (the marks stay)
		}
		for _, c := range unused {
			if _, err := os.Lstat(filepath.Join(bin, c)); errors.Is(err, os.ErrNotExist) {
				delete(next, c) // gone already
				continue
			}
			if now.Sub(copyTime(bin, c)) < pruneGrace {
				delete(next, c) // handed out again since the looks: in use
				continue
			}
			dir := filepath.Join(bin, c)
			if err := os.Rename(dir, filepath.Join(bin, prunePrefix+c)); err != nil {
				r.warnf("cannot remove the old copy %s: %v", dir, err)
				continue
			}
			gone = append(gone, c)
		}
		l.Unlock()
	}
	for _, c := range gone {
		first := next[c]
		delete(next, c)
		dir, renamed := filepath.Join(bin, c), filepath.Join(bin, prunePrefix+c)
		r.env.checkpoint("copy-renamed")
		if err := os.RemoveAll(renamed); err != nil {
			r.warnf("cannot remove %s: %v (the next prune tries again)", renamed, err)
		}
		r.printf("removed the old copy of cryochamber %s: no timer, chamber or process has used it since %s", dir, first.UTC().Format(time.RFC3339))
	}
	if err := atomicfile.Write(filepath.Join(bin, pruneMarks), mustJSON(next), 0o600); err != nil {
		r.warnf("cannot record the unused copies in %s: %v", bin, err)
	}
}

// copyTime is when the copy name in bin was made or last handed out (pinBinary sets it); the
// zero time when it cannot be read (then only its marks keep it).
func copyTime(bin, name string) time.Time {
	if fi, err := os.Lstat(filepath.Join(bin, name, "cryochamber")); err == nil {
		return fi.ModTime()
	}
	if fi, err := os.Lstat(filepath.Join(bin, name)); err == nil {
		return fi.ModTime()
	}
	return time.Time{}
}

func mustJSON(v any) []byte {
	data, _ := json.MarshalIndent(v, "", "  ")
	return append(data, '\n')
}

// chamberFiles returns the pin.json and state.json of every chamber of the state directory,
// one after the other, and whether one of them (its state.json or accepted cryo.toml) uses a
// backend that cannot list what it runs (blindBackend). An error when any of them cannot be
// read for another reason than its absence, or an entry of chambers/ is not a directory (a
// symlink to one is followed): any doubt keeps every copy.
func chamberFiles(stateDir string) (text string, blind bool, err error) {
	root := filepath.Join(stateDir, chambersDir)
	ents, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("list %s: %w", root, err)
	}
	var b strings.Builder
	for _, e := range ents {
		dir := filepath.Join(root, e.Name())
		if fi, err := os.Stat(dir); err != nil {
			return "", false, fmt.Errorf("read %s: %w", dir, err)
		} else if !fi.IsDir() {
			return "", false, fmt.Errorf("read %s: not a directory", dir)
		}
		for _, name := range []string{pinName, stateName, acceptedConfig} {
			p := filepath.Join(dir, name)
			// Bounded as every reader of these files is: one too large is a doubt.
			data, err := store(dir).read(name, maxStateSize)
			switch {
			case errors.Is(err, os.ErrNotExist):
				continue
			case err != nil:
				return "", false, fmt.Errorf("read %s: %w", p, err)
			}
			if name != acceptedConfig {
				b.Write(data)
				b.WriteByte('\n')
			}
			if name == pinName {
				continue
			}
			be, err := backendIn(name, data)
			if err != nil {
				return "", false, fmt.Errorf("read %s: %w", p, err)
			}
			blind = blind || blindBackend(be)
		}
	}
	return b.String(), blind, nil
}

// runningCopies returns the copies in bin that a running process runs (Linux: /proc/PID/exe).
// Elsewhere it cannot tell, and says so.
func runningCopies(bin string) (map[string]bool, error) {
	if runtime.GOOS != "linux" {
		return nil, errors.New("no process table")
	}
	if _, err := os.Readlink("/proc/self/exe"); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	prefix := bin + string(filepath.Separator)
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil {
			continue // a kernel thread, gone, or another user's: not ours to run a copy
		}
		if rest, ok := strings.CutPrefix(exe, prefix); ok {
			name, _, _ := strings.Cut(rest, string(filepath.Separator))
			out[strings.TrimPrefix(name, prunePrefix)] = true
		}
	}
	return out, nil
}

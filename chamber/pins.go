package chamber

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/internal/atomicfile"
	"github.com/cryochamber/cryochamber/internal/flock"
	"github.com/cryochamber/cryochamber/internal/program"
)

// Pins: what the operator accepted to run, besides the configuration itself. Every program
// inside the chamber that the accepted configuration may run is pinned by a hash of its
// content (pin.json in the private state), and the cryochamber binary is copied into the user's
// state directory for the dead-man and alert timers (see accept.go for when pins are taken).

// pinFile is what the operator accepted, besides the configuration itself.
type pinFile struct {
	Version  int               `json:"version"`
	Chamber  string            `json:"chamber"`
	ID       string            `json:"id"`
	Config   string            `json:"config"` // sha256 of the accepted cryo.toml
	Agent    string            `json:"agent"`  // the `start --agent` override
	Binary   string            `json:"binary"`
	Copy     string            `json:"binary_copy,omitempty"`    // the pinned copy the dead-man runs
	CopyOf   string            `json:"binary_copy_of,omitempty"` // the stamp of the build copied (repin.go)
	Programs map[string]string `json:"programs,omitempty"`       // absolute path inside the chamber → sha256
	At       time.Time         `json:"at"`
}

// maxProgramSize bounds what is hashed of a program inside the chamber.
const maxProgramSize = 256 << 20

// pin is pin.json, read once per command (nil when missing).
func (r *runner) pin() *pinFile {
	if r.pins != nil {
		return r.pins
	}
	data, err := r.store.read(pinName, 1<<20)
	if err != nil {
		return nil
	}
	var p pinFile
	if json.Unmarshal(data, &p) != nil {
		return nil
	}
	r.pins = &p
	return r.pins
}

// programsInChamber lists the programs this configuration may run that resolve inside the
// chamber: the agent line, every [agents.NAME] command, every allowed_commands entry.
func (r *runner) programsInChamber() []string {
	var progs []string
	add := func(prog string) {
		if prog == "" {
			return
		}
		p, err := program.Look(prog, r.dir, r.capturedPath())
		if err != nil || !inside(r.dir, p) {
			return
		}
		progs = append(progs, p)
	}
	// The files an interpreter in the operator's own lines runs (not a CMD marker's: an allowed
	// interpreter runs what the agent gives it, as the operator allowed).
	addScript := func(c Command) { progs = append(progs, r.commandFiles(c)...) }
	if c, err := r.cfg.AgentLine(r.agentLine()); err == nil {
		add(c.Program())
		addScript(c)
	}
	for _, name := range r.cfg.AllowedList(r.agentLine()) {
		if spec, ok := r.cfg.agentSpec(name); ok {
			add(spec.Command[0])
			addScript(Command{Agent: &spec})
		} else {
			add(name)
		}
	}
	sort.Strings(progs)
	return progs
}

// inside reports whether p is dir or below it.
func inside(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// hashPrograms hashes every program inside the chamber this configuration may run.
func (r *runner) hashPrograms() (map[string]string, error) {
	out := map[string]string{}
	for _, p := range r.programsInChamber() {
		h, err := r.hashProgram(p)
		if err != nil {
			return nil, usageErr("a program the chamber runs must be a regular file in it, not a symlink", "cannot pin %s: %v", p, err)
		}
		out[p] = h
	}
	return out, nil
}

// hashProgram hashes a program inside the chamber, through the confined opener: a symlink (to a
// program outside that could change behind our back) is refused.
func (r *runner) hashProgram(p string) (string, error) {
	if r.fs == nil {
		return "", r.fsErr
	}
	rel, err := filepath.Rel(r.dir, p)
	if err != nil {
		return "", err
	}
	f, err := r.fs.Open(rel)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if n, err := io.Copy(h, io.LimitReader(f, maxProgramSize+1)); err != nil {
		return "", err
	} else if n > maxProgramSize {
		return "", fmt.Errorf("larger than %d bytes", maxProgramSize)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// commandFiles are the files inside the chamber that cmd's interpreter would run
// (Command.Files), as the session opens them (its working directory is the chamber), except
// those not there and directories. They are looked at through the confined opener; one it
// cannot look at (a symlinked directory leading out) is kept, so that pinning it fails loudly.
func (r *runner) commandFiles(cmd Command) []string {
	var out []string
	// A wrapper's program named without a path (`env mytool`) is found on the captured PATH,
	// which may name a directory in the chamber (wrappers.go).
	if p, err := program.Look(cmd.wrapped(), r.dir, r.capturedPath()); cmd.wrapped() != "" && err == nil && inside(r.dir, p) {
		out = append(out, p)
	}
	for _, w := range cmd.Files() {
		if !filepath.IsAbs(w) {
			w = filepath.Join(r.dir, w)
		}
		w = filepath.Clean(w)
		rel, err := filepath.Rel(r.dir, w)
		if err != nil || !inside(r.dir, w) {
			continue
		}
		if r.fs != nil {
			fi, err := r.fs.Lstat(rel)
			if errors.Is(err, os.ErrNotExist) || err == nil && fi.IsDir() {
				continue // nothing there to run: the interpreter says so
			}
		}
		out = append(out, w)
	}
	return out
}

// checkPinned refuses a command whose program p (as resolved), or a file its interpreter runs,
// lies in the chamber and is not what the operator accepted. A file named in the operator's
// line that was not there at start or reload is refused too (an agent could write it).
func (r *runner) checkPinned(p string, cmd Command) error {
	if err := r.checkProgram(p); err != nil {
		return err
	}
	for _, f := range r.commandFiles(cmd) {
		if err := r.checkProgram(f); err != nil {
			return err
		}
	}
	return nil
}

// checkProgram refuses a program inside the chamber that is not the one the operator accepted.
// Programs outside the chamber are the operator's own (on the captured PATH) and not checked.
func (r *runner) checkProgram(p string) error {
	if !inside(r.dir, p) {
		return nil
	}
	want := ""
	if pin := r.pin(); pin != nil {
		want = pin.Programs[p]
	}
	got, err := r.hashProgram(p)
	switch {
	case err != nil:
		return fmt.Errorf("%s cannot be checked against its pin: %w", p, err)
	case want == "":
		return fmt.Errorf("%s is inside the chamber but was not there (or not allowed) when the chamber was started or reloaded", p)
	case got != want:
		return fmt.Errorf("%s changed since the chamber was started or reloaded, and not by cryochamber", p)
	}
	return nil
}

// pinBinary copies the binary at bin into the user's state directory, under a name derived from
// its content (so chambers share one copy per build), and returns the copy's path.
//
// now is the command's clock (Env.Now), and the copy's time is set to it, made or handed out
// again: the prune compares that time with its own Env.Now (pruneGrace, pinprune.go). Left to
// the file system, the time would be the system clock's while the prune's is the command's,
// which a test moves (CRYOCHAMBER_NOW): one clock for both keeps the grace what it says.
func pinBinary(stateDir, bin string, now time.Time) (string, error) {
	if bin == "" || stateDir == "" {
		return "", errors.New("no binary or no state directory")
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	copies := filepath.Join(stateDir, "bin")
	if err := os.MkdirAll(copies, 0o700); err != nil {
		return "", err
	}
	// No copy is handed out while a prune renames it away (pinprune.go); a copy handed out again
	// is touched, so that the prune, which looks at its time again under this lock, keeps it.
	// The prune holds the lock only for that instant; a prune stopped in it (Ctrl-Z) must not
	// hang every wake that pins, so the wait is bounded, and then no copy is handed out: the
	// caller keeps the copy it had, or runs the binary itself (accept.go, repin.go).
	l, err := flock.WaitFor(filepath.Join(copies, binLock), binLockWait)
	if errors.Is(err, flock.ErrBusy) {
		return "", fmt.Errorf("%s stayed locked for %s (a prune of old copies stopped?): %w", filepath.Join(copies, binLock), binLockWait, err)
	}
	if err != nil {
		return "", err
	}
	defer l.Unlock()
	dir := filepath.Join(copies, sha(data)[:16])
	dst := filepath.Join(dir, "cryochamber")
	if fi, err := os.Stat(dst); err == nil && fi.Size() == int64(len(data)) {
		if err := os.Chtimes(dst, now, now); err != nil {
			return "", err // a copy the prune may find old: not handed out
		}
		return dst, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	if err := atomicfile.Write(dst, data, 0o700); err != nil {
		return "", err
	}
	if err := os.Chtimes(dst, now, now); err != nil {
		return "", err
	}
	return dst, nil
}

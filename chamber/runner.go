package chamber

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cryochamber/cryochamber/internal/atomicfile"
	"github.com/cryochamber/cryochamber/internal/confined"
	"github.com/cryochamber/cryochamber/marker"
	"github.com/cryochamber/cryochamber/timer"
)

// runner is one command's hold on a chamber: the lock, the accepted configuration, the state,
// and the chamber directory opened confined.
type runner struct {
	env       *Env
	dir       string // canonical path of the chamber
	id        string
	store     store
	fs        *confined.Dir // the chamber; nil when it cannot be opened (see fsErr)
	fsErr     error         // why the chamber cannot be opened (moved, deleted, not mounted)
	cfg       *Config       // the configuration in force: the one the operator accepted
	cfgErr    error         // why the accepted configuration cannot be read (cfg is then the defaults)
	cfgFix    error         // the accepted configuration was damaged and its second copy is in force
	cfgFixRaw []byte        // that second copy, to repair the first with (degraded.go)
	st        *State
	lock      *Lock // nil when unlocked
	be        timer.Backend
	out       io.Writer
	// deadmanJoin waits for the session's dead-man armed in the background (deadman_async.go).
	deadmanJoin func()

	warnings     []string      // for the next prompt
	drift        *configDrift  // the chamber's cryo.toml, when it differs from the accepted one
	todos        *todoList     // todo.json, read once per command (nil: not read yet)
	pins         *pinFile      // pin.json, read once per command
	envVars      []string      // the environment file, read once per command
	envLoaded    bool          // envVars is loaded
	seal         []byte        // the seal key (outbox.go), read or made once per command
	guardKey     string        // the guardrails that moved or ended the next wake (guardrails.go)
	guardEnded   *choice       // a guardrail ended the plan (guardrails.go)
	usage        *sessionUsage // the session's usage read from the agent CLI's output (ledger.go)
	unknownCost  int           // a session whose cost is unknown while a budget is set (ledger.go)
	saved        []byte        // what the last save wrote (saveChanged compares with it)
	repinned     bool          // this build's copy for the dead-man was checked (repin.go)
	repinChanged bool          // ... and it replaced the copy the timers armed before run
	pruneDue     bool          // a new copy was pinned: old ones are looked at when the command ends (pinprune.go)
	// unlocked: the runner holds no lock (status, validate, log, ...). It writes nothing a
	// holder owns (the state, timers, the log's notes, the history, the spend) and delivers
	// nothing; the dead-man's hung check alone clears it to deliver (fallback.go).
	unlocked bool
}

// finishing is the session being finished: its number, its markers and how its run ended,
// with what its end has recorded of it so far. A command finishes at most one session; the
// value goes from runSession (or a recovery) through the judging, arming and recording of
// its end (hibernate.go, claims.go, history.go, ledger.go, ...).
type finishing struct {
	n int            // the session's number
	m *marker.Result // its markers (nil: it never ran)
	o outcome        // how its run ended

	why          Why            // what woke it (for its records)
	due          *time.Time     // when it was due
	judged       *marker.Result // the markers being judged (a refusal still delivers their REPLYs)
	answered     int            // messages it claimed and answered
	recorded     bool           // it has its history row
	booked       bool           // it is in the spend (ledger.go)
	filesChanged *int           // files it changed, from its snapshot (snapshot.go)
}

// maxJobOutput bounds the file launchd writes a job's output to before it is rotated.
const maxJobOutput = 4 << 20

func (r *runner) now() time.Time { return r.env.Now() }

func (r *runner) printf(format string, args ...any) {
	fmt.Fprintf(r.out, format+"\n", args...)
}

func (r *runner) warnf(format string, args ...any) { r.env.warnf(format, args...) }

// save writes the state (atomically, in the private state directory), then its view in the
// chamber for the agent to read. Only the first can fail the command: a chamber that cannot be
// written (full, read-only, moved) must not stop the state from recording what happened.
func (r *runner) save() error {
	r.repinSelf() // repin.go: before this build's state, a dead-man copy that reads it
	data, err := r.st.marshal(r.now())
	if err != nil {
		return &Error{Msg: "cannot save the state", Err: err}
	}
	if err := r.store.ensure(); err != nil {
		return &Error{Msg: "cannot save the state", Err: err, Hint: "check that " + string(r.store) + " is writable and its disk not full"}
	}
	if err := r.store.write(stateName, data, func() { r.env.checkpoint("state-temp") }); err != nil {
		return &Error{Msg: "cannot save the state", Err: err, Hint: "check that " + string(r.store) + " is writable and its disk not full"}
	}
	r.saved = data
	if r.fs != nil {
		// A view, never read back: no fsync (the state above is the durable copy).
		if err := r.fs.WriteView(StateFile, data, 0o600); err != nil {
			r.warnf("cannot update the view %s in the chamber: %v", StateFile, err)
		}
	}
	return nil
}

// saveChanged saves the state unless it holds what the last save wrote (its time aside): each
// save is two fsyncs, a tenth of a wake.
func (r *runner) saveChanged() error {
	if r.saved != nil {
		if data, err := r.st.marshal(r.st.Updated); err == nil && bytes.Equal(data, r.saved) {
			return nil
		}
	}
	return r.save()
}

// close releases the backend and the lock, and the chamber directory.
func (r *runner) close() {
	r.pruneCopies() // pinprune.go: after the command's work, still under its lock
	r.closeBackend()
	if r.lock != nil {
		r.lock.Unlock()
	}
	if r.fs != nil {
		r.fs.Close()
		r.fs = nil
	}
}

// Timeouts for talking to the OS timer manager: a bus that accepts a connection and never
// answers (a bus daemon that died) must not hang a command.
const (
	connectTimeout = 10 * time.Second // dialling the user manager
	busTimeout     = 5 * time.Second  // one read-only question (status, validate, ps)
)

// backend connects to the OS timer manager on first use, with a timeout. The connection is kept
// for the whole command, across a session of hours: a bus that went away and came back
// meanwhile shows as a dropped connection, and withBackend dials again.
func (r *runner) backend(ctx context.Context) (timer.Backend, error) {
	if r.be != nil {
		return r.be, nil
	}
	name := r.cfg.Backend
	if name == "" {
		name = r.st.Backend
	}
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	be, err := r.env.OpenBackend(cctx, name)
	if err != nil {
		if cctx.Err() != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("the timer manager did not answer within %s: %w", connectTimeout, err)
		}
		return nil, err
	}
	r.be = be
	r.st.Backend = be.Name()
	return be, nil
}

// closeBackend drops the connection to the OS timer manager.
func (r *runner) closeBackend() {
	if r.be != nil {
		_ = r.be.Close()
		r.be = nil
	}
}

// withBackend runs fn against the timer manager and tries again (at most twice, re-dialling,
// after a short pause) when it fails the way a bus that restarted or dropped the connection
// fails. Refusals of a request are returned at once.
func (r *runner) withBackend(ctx context.Context, fn func(timer.Backend) error) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 {
			r.closeBackend()
			select {
			case <-ctx.Done():
				return err
			case <-time.After(time.Duration(250<<attempt) * time.Millisecond):
			}
		}
		var be timer.Backend
		if be, err = r.backend(ctx); err == nil {
			if err = fn(be); err == nil {
				return nil
			}
		}
		if !transientBusError(err) {
			return err
		}
	}
	return err
}

// transientBusError reports an error after which a new connection may succeed (a bus that
// dropped or restarted, a manager that went away): the timer package tells them by type.
func transientBusError(err error) bool { return timer.IsTransient(err) }

// removeStale removes the temporary files a writer left when its process died between
// creating and renaming them. Only the lock holder calls it.
func (r *runner) removeStale() {
	atomicfile.RemoveStale(string(r.store), stateName)
	atomicfile.RemoveStale(string(r.store), todoName)
	atomicfile.RemoveStale(string(r.store), blockName)
	atomicfile.RemoveStale(string(r.store), agentRecordName)
	// A status (which holds no lock) killed while recording the outbox's count; one that is
	// writing it now loses its rename, which costs the next status a listing.
	atomicfile.RemoveStale(string(r.store), outboxCountName)
	// launchd appends every job's output to a file here: keep the last few MiB of it.
	for _, name := range []string{launchdOut, launchdErr, syncLaunchdOut, syncLaunchdErr} {
		if fi, err := os.Stat(r.store.path(name)); err == nil && fi.Size() > maxJobOutput {
			_ = os.Rename(r.store.path(name), r.store.path(name+".1"))
		}
	}
	if r.fs != nil {
		r.fs.RemoveStale(StateFile)
		r.fs.RemoveStale(todoName)
	}
}

// chamberMissing describes a chamber directory that cannot be opened, for messages and alerts.
func (r *runner) chamberMissing() string {
	if r.fsErr == nil {
		return ""
	}
	if errors.Is(r.fsErr, os.ErrNotExist) {
		return fmt.Sprintf("the chamber directory %s is missing (moved, deleted, or on a file system that is not mounted)", r.dir)
	}
	return fmt.Sprintf("the chamber directory %s cannot be opened: %v", r.dir, r.fsErr)
}

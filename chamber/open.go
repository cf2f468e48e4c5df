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
	lock      *Lock // nil for a read-only command
	be        timer.Backend
	out       io.Writer

	warnings    []string       // for the next prompt
	lastMarkers *marker.Result // the markers being judged (a refusal still delivers their REPLYs)
	drift       *configDrift   // the chamber's cryo.toml, when it differs from the accepted one
	todos       *todoList      // todo.json, read once per command (nil: not read yet)
	pins        *pinFile       // pin.json, read once per command
	envVars     []string       // the environment file, read once per command
	envLoaded   bool           // envVars is loaded
	seal        []byte         // the seal key (outbox.go), read or made once per command
	readOnly    bool           // status, validate: never writes, never delivers
	why         Why            // what woke the session being finished (for its records)
	dueAt       *time.Time     // when the session being finished was due
	answered    int            // messages the session being finished claimed and answered
	recorded    bool           // the session being finished has its history row
	guardKey    string         // the guardrails that moved or ended the next wake (guardrails.go)
	guardEnded  *choice        // a guardrail ended the plan (guardrails.go)
	usage       *sessionUsage  // the session's usage read from the agent CLI's output (ledger.go)
	unknownCost int            // a session whose cost is unknown while a budget is set (ledger.go)
	booked      bool           // the session being finished is in the spend (ledger.go)
	saved       []byte         // what the last save wrote (saveChanged compares with it)
	// filesChanged: files the session being finished changed, from its snapshot (snapshot.go)
	filesChanged *int
}

// openOptions say how a command holds a chamber.
type openOptions struct {
	command  string // wake, fallback, cancel, reload, resume, ...: recorded as the holder
	wait     bool   // wait (bounded) for a short holder of the lock instead of giving up
	readOnly bool   // take no lock, write nothing (status, validate)
	degraded bool   // the wake and the dead-man: alert when the private state cannot be used (degraded.go)
}

// open is the one way a command opens an existing chamber: it resolves the path, finds the
// private state, takes the lock (unless read-only), loads the state and the accepted
// configuration, opens the chamber directory confined, and delivers alerts whose delivery is
// due. done is true when another live process holds the lock: that is not a failure, and the
// holder has been named on stdout.
//
// A chamber directory that is missing (moved, deleted, a mount not up yet) still opens, with
// r.fs nil and r.fsErr saying why: the state directory alone is enough to alert.
func open(ctx context.Context, env *Env, dirArg string, o openOptions) (r *runner, done bool, err error) {
	dir, err := AbsDir(dirArg)
	if err != nil {
		return nil, false, err
	}
	id := chamberID(dir)
	s, err := storeFor(env, id)
	if err != nil {
		return nil, false, &Error{Msg: "cannot find the chamber's private state", Err: err}
	}
	if !s.exists() {
		if err := migrateLegacy(env, dir, s); err != nil {
			return nil, false, err
		}
		if !s.exists() {
			return nil, false, notChamber(dir)
		}
	}
	r = &runner{env: env, dir: dir, id: id, store: s, out: env.Stdout, readOnly: o.readOnly}
	// The accepted targets are read before the lock, the state and the chamber: whatever of
	// those cannot be used, the wake and the dead-man still alert with them (degraded.go).
	r.cfg = r.acceptedConfig()
	if o.degraded && r.cfgErr != nil {
		return nil, false, r.refuseDefaults()
	}
	if !o.readOnly {
		lock, err := s.tryLock()
		if errors.Is(err, ErrLocked) && o.wait {
			lock, err = r.waitLock(ctx)
		}
		if errors.Is(err, ErrLocked) {
			fmt.Fprintln(env.Stdout, holderMessage(s, env.Now()))
			return nil, true, nil
		}
		if err != nil {
			if o.degraded {
				r.alertDegraded(ctx, "its lock "+s.path(lockName)+" cannot be taken", err)
			}
			return nil, false, &Error{Msg: "cannot lock the chamber", Err: err, Hint: "check the permissions of " + string(s)}
		}
		r.lock = lock
	}
	if r.st, err = s.load(); err != nil {
		r.close()
		if errors.Is(err, ErrNoState) {
			return nil, false, notChamber(dir)
		}
		if o.degraded {
			r.alertDegraded(ctx, "its state cannot be read", err)
		}
		return nil, false, &Error{Err: err, Hint: "the state is written atomically, so the disk is damaged or it was edited by hand; `cryochamber cancel --dir " + dir + "` then `start` begins again (the log is kept)"}
	}
	// Unit names always come from the path, never from a file.
	r.st.ID = id
	if r.fs, r.fsErr = confined.Open(dir); r.fsErr != nil {
		r.fs = nil
	}
	if r.lock != nil {
		if h := r.st.Holder; h != nil && h.PID != env.PID {
			r.warnf("took over the lock from pid %d (session %d, %s since %s), which died holding it",
				h.PID, h.Session, h.Command, h.Since.Format(time.RFC3339))
		}
		r.removeStale()
		if r.cancelRequested() && (r.st.Phase == PhaseArmed || r.st.Phase == PhasePaused) {
			// A cancel that landed in the last instants of a session's end, after its final
			// check: the timers are gone (cancel removed them); the state says so now.
			r.st.Phase, r.st.Wake, r.st.Timers = PhaseCancelled, nil, Timers{Alert: r.st.Timers.Alert}
			if err := r.save(); err != nil {
				r.warnf("%v", err)
			}
		}
		r.redeliver(ctx)
		if o.degraded {
			r.tellDegraded(ctx) // degraded.go
		}
	}
	return r, false, nil
}

// waitLock waits (at most lockWait, or until ctx ends) for a lock held by something other than
// a running session: a wake must not be lost to a short holder (the dead-man check, cancel, a
// redelivery) that fired at the same moment, as both timers do after a boot.
func (r *runner) waitLock(ctx context.Context) (*Lock, error) {
	deadline := time.Now().Add(lockWait)
	for {
		if st, err := r.store.load(); err == nil && st.Phase == PhaseRunning {
			return nil, ErrLocked // a session is running: this wake has nothing to do
		}
		lock, err := r.store.tryLock()
		if !errors.Is(err, ErrLocked) || time.Now().After(deadline) {
			return lock, err
		}
		select {
		case <-ctx.Done():
			return nil, ErrLocked
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// maxJobOutput bounds the file launchd writes a job's output to before it is rotated.
const maxJobOutput = 4 << 20

// lockWait bounds how long a wake waits for a short holder of the lock.
const lockWait = 2 * time.Minute

// holderMessage says who holds the lock, from what the holder recorded in the state.
func holderMessage(s store, now time.Time) string {
	st, err := s.load()
	if err != nil || st.Holder == nil {
		return "another cryochamber process holds the chamber's lock; nothing to do"
	}
	h := st.Holder
	return fmt.Sprintf("session %d is running (pid %d, %s since %s, %s); nothing to do",
		h.Session, h.PID, h.Command, h.Since.Format(time.RFC3339), Relative(h.Since, now))
}

func (r *runner) now() time.Time { return r.env.Now() }

func (r *runner) printf(format string, args ...any) {
	fmt.Fprintf(r.out, format+"\n", args...)
}

func (r *runner) warnf(format string, args ...any) { r.env.warnf(format, args...) }

// save writes the state (atomically, in the private state directory), then its view in the
// chamber for the agent to read. Only the first can fail the command: a chamber that cannot be
// written (full, read-only, moved) must not stop the state from recording what happened.
func (r *runner) save() error {
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
	// launchd appends every job's output to a file here: keep the last few MiB of it.
	for _, name := range []string{launchdOut, launchdErr} {
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

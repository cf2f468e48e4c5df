package chamber

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cryochamber/cryochamber/internal/confined"
)

// openOptions say how a command holds a chamber.
type openOptions struct {
	command  string // wake, fallback, cancel, reload, resume, ...: recorded as the holder
	wait     bool   // wait (bounded) for a short holder of the lock instead of giving up
	unlocked bool   // take no lock, and so write nothing a holder owns (status, validate)
	degraded bool   // the wake and the dead-man: alert when the private state cannot be used (degraded.go)
}

// open is the one way a command opens an existing chamber: it resolves the path, finds the
// private state, takes the lock (unless unlocked), loads the state and the accepted
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
	r = &runner{env: env, dir: dir, id: id, store: s, out: env.Stdout, unlocked: o.unlocked}
	// The accepted targets are read before the lock, the state and the chamber: whatever of
	// those cannot be used, the wake and the dead-man still alert with them (degraded.go).
	r.cfg = r.acceptedConfig()
	if o.degraded && r.cfgErr != nil {
		return nil, false, r.refuseDefaults()
	}
	if !o.unlocked {
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

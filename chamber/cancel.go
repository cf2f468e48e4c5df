package chamber

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cryochamber/cryochamber/sessionlog"
	"github.com/cryochamber/cryochamber/timer"
)

// CancelOptions are the options of `cryochamber cancel`.
type CancelOptions struct {
	Dir string
}

// Cancel removes every timer of the chamber and keeps the log. A running session is not
// killed: it finishes, sees the cancel, and does not re-arm. Once Cancel returns, no session
// ends by arming a timer: the cancel is recorded in the private state directory before any
// timer is removed, and every session looks for it after arming.
func Cancel(ctx context.Context, env *Env, opts CancelOptions) error {
	dir, err := AbsDir(opts.Dir)
	if err != nil {
		return err
	}
	s, err := storeFor(env, chamberID(dir))
	if err != nil {
		return &Error{Msg: "cannot find the chamber's private state", Err: err}
	}
	if err := migrateLegacy(env, dir, s); err != nil {
		return err
	}
	if !s.exists() {
		return cancelOrphan(ctx, env, dir)
	}
	// The tombstone first: a session that arms after this point sees it and disarms.
	if err := s.setFlag(cancelledName, env.Now()); err != nil {
		return &Error{Msg: "cannot record the cancel", Err: err}
	}
	r, _, err := open(ctx, env, dir, openOptions{command: "cancel", unlocked: true})
	if err != nil {
		// The state does not load: still remove every timer, by the ID the path gives, so a
		// broken chamber can always be stopped.
		if rmErr := removeByID(ctx, env, dir); rmErr != nil {
			return &Error{Msg: "could not remove the timers", Err: errors.Join(err, rmErr)}
		}
		fmt.Fprintf(env.Stdout, "removed every timer of %s; its state could not be read (%v)\n", dir, err)
		return nil
	}
	// A wake arming at this very moment can replace our stop jobs with its own (systemd answers
	// "job canceled"): try again a few times. The tombstone makes that wake disarm in any case.
	var disarmErr error
	for attempt := 0; attempt < 4; attempt++ {
		if disarmErr = r.removeTimers(ctx); disarmErr == nil {
			break
		}
		time.Sleep(time.Duration(100<<attempt) * time.Millisecond)
	}
	r.close()
	lock, err := s.tryLock()
	if errors.Is(err, ErrLocked) {
		msg := "timers removed"
		if disarmErr != nil {
			msg = "the running session will remove the timers it arms (" + disarmErr.Error() + ")"
		}
		fmt.Fprintf(env.Stdout, "%s; %s\nit will finish and not re-arm; the log is kept\n", msg, holderMessage(s, env.Now()))
		return nil
	}
	if err != nil {
		return &Error{Msg: "cannot lock the chamber", Err: err}
	}
	lock.Unlock()
	if disarmErr != nil {
		return &Error{Msg: "could not remove every timer", Err: disarmErr, Hint: backendHint(r.cfg.Backend)}
	}
	r, done, err := open(ctx, env, dir, openOptions{command: "cancel"})
	if err != nil || done {
		return err
	}
	defer r.close()
	r.st.Timers = Timers{}
	if r.st.Phase == PhaseRunning {
		// A session died: close its block so the log says what happened, and answer what it
		// claimed (messages get a reply, TODOs their retry items).
		if r.fs != nil {
			if info, err := closeTorn(r); err == nil && info > 0 {
				r.printf("closed the block of crashed session %d", info)
			}
		}
		end := env.Now().UTC().Truncate(time.Second)
		o := outcome{start: end, end: end, exit: 2, reason: EndCrashed, detail: "the session's process died; the chamber was then cancelled"}
		if err := r.finishClaims(&finishing{n: r.st.Session, o: o}, nil); err != nil {
			r.warnf("%v", err)
		}
		r.st.Claimed = nil
	}
	r.st.Phase = PhaseCancelled
	r.st.Wake = nil
	r.st.Holder = nil
	r.st.Paused, r.st.PausedUntil = nil, nil
	if err := r.save(); err != nil {
		return err
	}
	r.heartbeatPause(ctx)  // the monitor expects nothing more
	r.syncDigestTimer(ctx) // takes this chamber out of the user's digest timer
	// The channel secrets `sync --install` captured go with the sync timer.
	if err := os.Remove(r.store.path(filepath.Join("sync", "secrets"))); err != nil && !errors.Is(err, os.ErrNotExist) {
		r.warnf("cannot remove the captured channel secrets: %v", err)
	}
	if n := r.undelivered(); n > 0 {
		r.warnf("%d alert(s) are still undelivered; they are retried by the next command on this chamber (`cryochamber status --dir %s` lists them)", n, dir)
	}
	if r.fs == nil {
		// The chamber itself is gone: `ps` need not list it any more.
		_ = unregister(env.Registry, dir)
		r.printf("cancelled %s: every timer removed; the chamber directory itself is gone (%s)", dir, r.chamberMissing())
		return nil
	}
	r.printf("cancelled %s: every timer removed; the log is kept (cryochamber log --dir %s)", dir, dir)
	return nil
}

// removeTimers removes every timer and watcher of the chamber, the alert timer included.
func (r *runner) removeTimers(ctx context.Context) error {
	return r.withBackend(ctx, func(be timer.Backend) error { return disarmID(ctx, be, r.id) })
}

// cancelOrphan removes the timers of a chamber that has no state (deleted with its timers still
// installed, or never started): its ID is derived from the path, as when it was armed.
func cancelOrphan(ctx context.Context, env *Env, dir string) error {
	be, err := env.OpenBackend(ctx, "")
	if err != nil {
		return notChamber(dir)
	}
	defer be.Close()
	id := chamberID(dir)
	installed, err := be.Installed(ctx)
	if err != nil {
		return &Error{Msg: "cannot list the installed timers", Err: err}
	}
	found := false
	for _, in := range installed {
		if in.ID == id {
			found = true
		}
	}
	if !found {
		return notChamber(dir)
	}
	if err := disarmID(ctx, be, id); err != nil {
		return &Error{Msg: "could not remove every timer of " + id, Err: err}
	}
	_ = unregister(env.Registry, dir)
	fmt.Fprintf(env.Stdout, "removed the timers of %s (%s): the chamber itself is gone\n", dir, id)
	return nil
}

// removeByID removes every timer of the chamber at dir, whatever its files say.
func removeByID(ctx context.Context, env *Env, dir string) error {
	be, err := env.OpenBackend(ctx, "")
	if err != nil {
		return err
	}
	defer be.Close()
	return disarmID(ctx, be, chamberID(dir))
}

// disarmID removes every timer of the chamber whose ID is id: wake, dead-man, alert, the
// inbox watcher and the sync timer.
func disarmID(ctx context.Context, be timer.Backend, id string) error {
	var errs []error
	for _, k := range timer.Kinds {
		errs = append(errs, be.Disarm(ctx, id, k))
	}
	errs = append(errs, be.Unwatch(ctx, id))
	if p, ok := be.(timer.Poller); ok {
		errs = append(errs, p.DisarmPoll(ctx, id))
	}
	return errors.Join(errs...)
}

// cancelRequested reports whether `cancel` ran since the last start.
func (r *runner) cancelRequested() bool { return r.store.flag(cancelledName) }

// honourCancel is a session that finished after a cancel: remove what it armed, answer what it
// claimed, and end cancelled.
func (r *runner) honourCancel(ctx context.Context, f *finishing) error {
	n, o := f.n, f.o
	if err := r.removeTimers(ctx); err != nil {
		r.warnf("%v", err)
	}
	if err := r.finishClaims(f, nil); err != nil {
		r.warnf("%v", err)
	}
	r.st.Timers = Timers{}
	r.st.Phase = PhaseCancelled
	r.st.Wake = nil
	r.st.Holder = nil
	r.st.Claimed = nil
	r.st.Last = r.outcomeRecord(f, "cancelled during the session")
	if err := r.save(); err != nil {
		return err
	}
	r.recordHistory(f, nil, "cancelled")
	r.heartbeatEnd(ctx, n, o.exit != 2 && !o.failed(), "cancelled during the session", nil, true)
	r.printf("the chamber was cancelled during session %d: nothing armed", n)
	return nil
}

// closeTorn closes a block left without its END line, returning its session number (0: none).
func closeTorn(r *runner) (int, error) {
	info, err := sessionlog.CloseTorn(r.logPath(), r.now())
	if err != nil || info == nil {
		return 0, err
	}
	return info.Session, nil
}

package chamber

import (
	"context"
	"fmt"
	"os"
)

// ForgetOptions are the options of `cryochamber forget`.
type ForgetOptions struct {
	Dir   string
	Force bool // forget even with alerts still undelivered
}

// Forget is `cryochamber forget`: it removes the private state of a chamber that is stopped
// (cancelled, complete or failed): history, TODOs, the accepted configuration, the captured
// environment and secrets, sync records. The chamber directory (plan, notes, cryo.log,
// messages) is kept. It refuses an armed, running or paused chamber: `cancel` first. A
// stopped chamber has no timer that could open the state meanwhile; the lock is held to the
// end, so no command of ours works on it while it goes.
func Forget(ctx context.Context, env *Env, opts ForgetOptions) error {
	r, done, err := open(ctx, env, opts.Dir, openOptions{command: "forget"})
	if err != nil {
		return err
	}
	if done {
		return failErr("cancel it first: cryochamber cancel --dir "+opts.Dir, "a session is running")
	}
	defer r.close()
	switch st := r.st; {
	case st.Phase.Active() || st.Phase == PhasePaused:
		return failErr("cancel it first: cryochamber cancel --dir "+r.dir+" (then forget)", "chamber %s is %s: forget removes only a stopped chamber's private state", r.dir, stateWord(st))
	}
	if n := r.undelivered(); n > 0 && !opts.Force {
		return failErr("`cryochamber status --dir "+r.dir+"` lists them; --force forgets them too",
			"%d alert(s) of this chamber are still undelivered", n)
	}
	state := string(r.store)
	if err := os.RemoveAll(state); err != nil {
		return &Error{Msg: "cannot remove the private state " + state, Err: err}
	}
	if err := unregister(env.Registry, r.dir); err != nil {
		r.warnf("cannot remove the chamber from the registry of `cryochamber ps`: %v", err)
	}
	r.printf("forgot %s: removed its private state (%s); the chamber directory, its cryo.log and messages are kept", r.dir, state)
	if r.fs != nil {
		fmt.Fprintf(r.out, "`cryochamber start --dir %s` starts it again as a new chamber\n", r.dir)
	}
	return nil
}

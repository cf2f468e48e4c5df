package chamber

import (
	"context"
	"fmt"
)

// NotifyChannel tells the operator's own alert targets that a channel of `sync` is down (down)
// or back (issue 23, item 15; channel/down.go decides when, once each way). It runs in the sync,
// beside a session that may hold the chamber's lock for hours, so it takes no lock: the accepted
// configuration is read, the notice delivered at once, and recorded in the private state for
// redelivery (by the next lock holder and the alert timer) only if a target failed.
func NotifyChannel(ctx context.Context, env *Env, dir, name string, down bool, failures int, lastErr string) error {
	abs, err := AbsDir(dir)
	if err != nil {
		return err
	}
	id := chamberID(abs)
	s, err := storeFor(env, id)
	if err != nil {
		return err
	}
	r := &runner{env: env, dir: abs, id: id, store: s, out: env.Stdout, readOnly: true}
	r.cfg = r.acceptedConfig()
	if r.st, err = s.load(); err != nil {
		r.st = &State{Chamber: abs, ID: id}
	}
	reason, text := "channel-back", fmt.Sprintf("chamber %s: the %s channel works again: what waited is pulled and published now.", abs, name)
	if down {
		reason = "channel-down"
		text = fmt.Sprintf("chamber %s: the %s channel is down: its last %d polls failed (the latest: %s).\n"+
			"The plan runs on, but the agent's replies are not published and your answers are not pulled until it works again. You will be told once when it does.\n\n"+
			"What to do: fix the cause (an expired password or token, a revoked bot, a server down), then `cryochamber sync --dir %s` to try at once; `cryochamber sync --status --dir %s` shows each channel.",
			abs, name, failures, lastErr, abs, abs)
	}
	a := r.newAlert(r.st.Session, reason, text, "", kindNotice)
	for _, f := range r.cfg.Fallback {
		a.Targets = append(a.Targets, pendingTarget{Action: f.Action, Target: f.Target})
	}
	r.attempt(ctx, a)
	fmt.Fprintf(env.Stdout, "notice (%s): %s\n", reason, a.summary())
	return nil
}

package chamber

import (
	"context"
	"fmt"
)

// ChannelNotice delivers a notice about the chamber's channels (max_per_day bit) to the
// operator's own [[fallback]] targets, with its copy in the outbox, under the chamber's lock
// (waiting, bounded, for a short holder). A session that holds the lock for long makes it
// fail: the sync says so, and the cap's warning stays in `sync --status`.
func ChannelNotice(ctx context.Context, env *Env, dir, reason, text string) error {
	r, done, err := open(ctx, env, dir, openOptions{command: "sync", wait: true})
	if err != nil {
		return err
	}
	if done {
		return &Error{Msg: "a session holds the chamber's lock"}
	}
	defer r.close()
	r.notify(ctx, r.st.Session, reason, text)
	return r.saveChanged()
}

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
	r := &runner{env: env, dir: abs, id: id, store: s, out: env.Stdout, unlocked: true}
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

package chamber

import (
	"context"
	"fmt"

	"github.com/cryochamber/cryochamber/internal/confined"
)

// Notice is the one way `sync` tells the operator about the chamber's channels (max_per_day
// bit, a channel down or back): to the operator's own [[fallback]] targets, at once, with its
// copy in the outbox when the chamber can be opened. It runs beside a session that may hold
// the chamber's lock for hours, so it takes no lock (waiting for it would lose the notice): the
// accepted configuration is read, the notice delivered, and recorded in the private state for
// redelivery (by the next lock holder and the alert timer) only while a target has not had it.
func (s *Sync) Notice(ctx context.Context, reason, text string) error {
	r := s.r
	if r.fs == nil && r.fsErr == nil {
		if r.fs, r.fsErr = confined.Open(r.dir); r.fsErr != nil {
			r.fs = nil
		}
	}
	a := r.newAlert(r.st.Session, reason, text, "", kindNotice)
	for _, f := range r.cfg.Fallback {
		a.Targets = append(a.Targets, pendingTarget{Action: f.Action, Target: f.Target})
	}
	r.attempt(ctx, a)
	fmt.Fprintf(r.env.Stdout, "notice (%s): %s\n", reason, a.summary())
	return nil
}

// ChannelDown tells the operator that a channel of `sync` is down (down) or back (issue 23,
// item 15; channel/down.go decides when, once each way), through Notice.
func (s *Sync) ChannelDown(ctx context.Context, name string, down bool, failures int, lastErr string) error {
	dir := s.r.dir
	reason, text := "channel-back", fmt.Sprintf("chamber %s: the %s channel works again: what waited is pulled and published now.", dir, name)
	if down {
		reason = "channel-down"
		text = fmt.Sprintf("chamber %s: the %s channel is down: its last %d polls failed (the latest: %s).\n"+
			"The plan runs on, but the agent's replies are not published and your answers are not pulled until it works again. You will be told once when it does.\n\n"+
			"What to do: fix the cause (an expired password or token, a revoked bot, a server down), then `cryochamber sync --dir %s` to try at once; `cryochamber sync --status --dir %s` shows each channel.",
			dir, name, failures, lastErr, dir, dir)
	}
	return s.Notice(ctx, reason, text)
}

package chamber

import "context"

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

package chamber

import (
	"context"
	"errors"
	"fmt"

	"github.com/cryochamber/cryochamber/sessionlog"
)

// LogOptions are the options of `cryochamber log`.
type LogOptions struct {
	Dir     string
	Session int  // 0: the whole log
	Follow  bool // keep printing what is appended
	Numbers bool // number each line within its block (the numbers marker errors use)
}

// PrintLog prints the log, one session, or follows it. It reads without the lock: only whole
// lines are ever appended, so a reader never sees half a line.
func PrintLog(ctx context.Context, env *Env, opts LogOptions) error {
	r, _, err := open(ctx, env, opts.Dir, openOptions{unlocked: true})
	if err != nil {
		return err
	}
	r.close()
	dir := r.dir
	if r.fsErr != nil {
		return &Error{Msg: r.chamberMissing()}
	}
	err = sessionlog.Copy(ctx, r.logPath(), env.Stdout, sessionlog.CopyOptions{Session: opts.Session, Follow: opts.Follow, Numbers: opts.Numbers})
	switch {
	case errors.Is(err, sessionlog.ErrNotFound):
		return usageErr("`cryochamber status --dir "+dir+"` shows the latest session number", "session %d is not in cryo.log", opts.Session)
	case errors.Is(err, sessionlog.ErrNoBlocks):
		return failErr("the first session is written by `cryochamber start --dir "+dir+"`", "cryo.log has no session yet")
	case err != nil:
		return &Error{Msg: fmt.Sprintf("cannot read %s/%s", dir, LogFile), Err: err}
	}
	return nil
}

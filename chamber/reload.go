package chamber

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/cryochamber/cryochamber/validate"
)

// ReloadOptions are the options of `cryochamber reload`.
type ReloadOptions struct {
	Dir string
}

// Reload accepts the chamber's current cryo.toml, the programs inside it and the environment,
// after the operator changed them: it captures PATH, HOME, agent_env and the alert secrets
// again, pins the configuration and the programs, and refreshes the armed timers. It runs no
// session.
func Reload(ctx context.Context, env *Env, opts ReloadOptions) error {
	r, done, err := open(ctx, env, opts.Dir, openOptions{command: "reload"})
	if err != nil {
		return err
	}
	if done {
		return failErr("run reload again when it has finished", "the chamber is busy")
	}
	defer r.close()
	if r.fs == nil {
		return &Error{Msg: r.chamberMissing(), Hint: "nothing to reload; if it moved: cryochamber cancel --dir " + r.dir + ", then start it at its new place"}
	}
	raw, err := readConfig(r.fs)
	if err != nil {
		return &Error{Kind: Usage, Msg: "cannot read cryo.toml", Err: err, Hint: "cryo.toml must be a regular file in the chamber"}
	}
	cfg, err := ParseConfig(filepath.Join(r.dir, ConfigFile), raw, env.Local)
	if err != nil {
		return &Error{Kind: Usage, Err: err, Hint: "fix cryo.toml; the accepted configuration stays in force meanwhile"}
	}
	changed := configDiff(r.cfg, cfg)
	r.cfg = cfg
	missing, err := r.captureEnv()
	if err != nil {
		return err
	}
	for _, k := range missing {
		r.warnf("agent_env names %s, which is not set in this environment: the agent will not get it", k)
	}
	if r.st.Binary == "" || !exists(r.st.Binary) || env.Binary != "" && checkBinary(env.Binary) == nil {
		r.st.Binary = env.Binary // reload is how an upgraded binary is accepted
	}
	if err := r.accept(raw); err != nil {
		return &Error{Msg: "cannot record the accepted configuration", Err: err}
	}
	r.st.ConfigSeen = ""
	if len(changed) > 0 {
		r.printf("accepted cryo.toml (changed: %s), the programs in the chamber and the environment (PATH, HOME, agent_env)", strings.Join(changed, ", "))
	} else {
		r.printf("accepted cryo.toml, the programs in the chamber and the environment (PATH, HOME, agent_env)")
	}
	if r.st.Phase.Active() || r.st.Phase == PhasePaused {
		r.syncTimer(ctx)
	}
	r.syncDigestTimer(ctx) // digest.go
	if r.st.Phase == PhaseArmed && r.st.Wake != nil && r.st.Wake.After(env.Now()) {
		if err := r.arm(ctx, validate.New(r.out), *r.st.Wake); err != nil {
			return &Error{Msg: "the timers could not be refreshed", Err: err, Hint: "cryochamber status shows what is armed"}
		}
	}
	return r.save()
}

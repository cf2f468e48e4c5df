package chamber

import (
	"context"
	"path/filepath"

	"github.com/cryochamber/cryochamber/validate"
)

// ReloadOptions are the options of `cryochamber reload`.
type ReloadOptions struct {
	Dir string
	Yes bool // accept changes to the configuration or the pinned programs (--yes)
}

// Reload accepts the chamber's current cryo.toml, the programs inside it and the environment,
// after the operator changed them: it captures PATH, HOME, agent_env and the alert secrets
// again, pins the configuration and the programs, and refreshes the armed timers. It runs no
// session. It first shows every changed key and pin; a change (other than timezone) is
// accepted only with opts.Yes, and without it nothing at all is written.
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
	// What would change, shown before anything is written: the agent can edit cryo.toml and
	// the programs in its chamber, so a change the operator did not make must be seen, and
	// confirmed with --yes, before it is in force (configdiff.go).
	changes := configChanges(r.cfg, cfg)
	r.cfg = cfg
	r.envLoaded, r.envVars = true, []string{"PATH=" + cleanPath(r.env.Getenv("PATH")).kept} // the PATH the programs are looked up on, not yet written
	programs, err := r.hashPrograms()
	if err != nil {
		return err
	}
	var oldPrograms map[string]string
	if p := r.pin(); p != nil {
		oldPrograms = p.Programs
	}
	progChanges := programChanges(oldPrograms, programs)
	confirm := len(progChanges) > 0
	if len(changes) > 0 {
		r.printf("cryo.toml changes:")
		for _, c := range changes {
			r.printf("  %s", c)
			confirm = confirm || c.needsYes()
		}
	}
	if len(progChanges) > 0 {
		r.printf("programs whose pin changes:")
		for _, c := range progChanges {
			r.printf("  %s", c)
		}
	}
	for _, w := range r.agentLineWarnings(r.agentLine()) {
		r.warnf("%s", w)
	}
	if confirm && !opts.Yes {
		return failErr("read the changes above; if you made them: cryochamber reload --yes --dir "+r.dir,
			"reload refused: the changes above need your confirmation (the agent can edit cryo.toml and the programs in its chamber); nothing was accepted")
	}
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
	if len(changes) > 0 || len(progChanges) > 0 {
		r.printf("accepted cryo.toml (%d changes), the programs in the chamber (%d pins changed) and the environment (PATH, HOME, agent_env)", len(changes), len(progChanges))
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

package chamber

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/cryochamber/cryochamber/agent"
	"github.com/cryochamber/cryochamber/internal/confined"
	"github.com/cryochamber/cryochamber/sessionlog"
	"github.com/cryochamber/cryochamber/timer"
)

// StartOptions are the options of `cryochamber start`.
type StartOptions struct {
	Plan    string // path of the plan file; its directory becomes the chamber
	Agent   string // overrides cryo.toml's agent
	Backend string // overrides cryo.toml's backend
	Force   bool   // start even if plan.md is still init's template
}

// Start makes the plan's directory a chamber, accepts its configuration, runs session 1 now
// and hibernates.
func Start(ctx context.Context, env *Env, opts StartOptions) error {
	if opts.Plan == "" {
		return usageErr("cryochamber start path/to/plan.md", "start needs the plan file")
	}
	planAbs, err := filepath.Abs(opts.Plan)
	if err != nil {
		return err
	}
	fi, err := os.Stat(planAbs)
	if err != nil {
		return usageErr(fmt.Sprintf("create a chamber with `cryochamber init %s` and write the plan in %s", filepath.Dir(planAbs), filepath.Join(filepath.Dir(planAbs), DefaultPlan)),
			"plan file %s does not exist", planAbs)
	}
	if fi.IsDir() {
		return usageErr("give the plan file, not its directory: cryochamber start "+filepath.Join(planAbs, DefaultPlan), "%s is a directory", planAbs)
	}
	dir, err := AbsDir(filepath.Dir(planAbs))
	if err != nil {
		return err
	}
	planName := filepath.Base(planAbs)
	if err := checkBinary(env.Binary); err != nil {
		return err
	}
	fs, err := confined.Open(dir)
	if err != nil {
		return &Error{Msg: "cannot open the chamber", Err: err}
	}
	defer fs.Close()
	plan, err := fs.ReadFile(planName, 16<<20)
	if err != nil {
		return usageErr("the plan must be a regular file in the chamber (not a symlink)", "cannot read the plan: %v", err)
	}
	if bytes.Equal(plan, planTemplate) && !opts.Force {
		return usageErr(fmt.Sprintf("write your plan in %s (or pass --force to run the template as it is)", planAbs),
			"%s is still the template that `cryochamber init` wrote", planAbs)
	}
	raw, err := readConfig(fs)
	if err != nil {
		return &Error{Kind: Usage, Msg: "cannot read cryo.toml", Err: err, Hint: "cryo.toml must be a regular file in the chamber"}
	}
	cfg, err := ParseConfig(filepath.Join(dir, ConfigFile), raw, env.Local)
	if err != nil {
		return &Error{Kind: Usage, Err: err, Hint: "fix cryo.toml (`cryochamber init` in an empty directory shows every key with its default)"}
	}
	if opts.Backend != "" {
		cfg.Backend = opts.Backend
	}
	id := chamberID(dir)
	s, err := storeFor(env, id)
	if err != nil {
		return &Error{Msg: "cannot create the chamber's private state", Err: err}
	}
	// The units name the environment file in the state directory: a path they cannot carry is
	// refused before session 1, not after it.
	if _, err := timer.EscapeGlobPath(s.path(EnvFileName)); err != nil {
		return usageErr("set XDG_STATE_HOME (or HOME) to a directory whose path has no newline or control character",
			"the state directory %s cannot be named in a timer unit: %v", string(s), err)
	}
	if err := migrateLegacy(env, dir, s); err != nil {
		return err
	}
	lock, err := s.tryLock()
	if errors.Is(err, ErrLocked) {
		return failErr("wait for it to finish, or `cryochamber cancel --dir "+dir+"`", "%s", holderMessage(s, env.Now()))
	}
	if err != nil {
		return &Error{Msg: "cannot lock the chamber", Err: err}
	}
	st, err := s.load()
	switch {
	case errors.Is(err, ErrNoState):
		st = &State{Phase: PhaseComplete}
		// No state, but maybe a log (a chamber moved here, or started over): session numbers
		// continue after the log's latest block.
		if info, err := sessionlog.Latest(filepath.Join(dir, LogFile), -1); err == nil {
			st.Session = info.Session
			st.LogOffset = info.Offset
		}
	case err != nil:
		lock.Unlock()
		return &Error{Err: err, Hint: "the state is written atomically, so the disk is damaged or it was edited by hand; remove " + s.path(stateName) + " to start over (the log is kept)"}
	}
	r := &runner{env: env, dir: dir, id: id, store: s, fs: fs, cfg: cfg, st: st, lock: lock, out: env.Stdout}
	defer r.close()

	switch {
	case st.Phase == PhaseRunning:
		// A session died holding the lock: finish it the way wake would, and do not start another.
		r.printf("this chamber has an unfinished session %d; recovering it instead of starting", st.Session)
		r.cfg = r.acceptedConfig()
		_, err := r.recover(ctx)
		return err
	case st.Phase == PhaseArmed && !r.cancelRequested():
		next := "unknown"
		if st.Wake != nil {
			next = st.Wake.In(cfg.Location).Format(time.RFC3339) + " (" + Relative(*st.Wake, env.Now()) + ")"
		}
		return failErr("to start over: cryochamber cancel --dir "+dir+" && cryochamber start "+planAbs,
			"chamber %s is already active: session %d done, next wake %s", dir, st.Session, next)
	case st.Phase == PhasePaused:
		return failErr("cryochamber resume --dir "+dir, "chamber %s is paused with its schedule kept", dir)
	}

	agentLine := cfg.Agent
	if opts.Agent == "" && st.Agent != "" {
		// The --agent of the last start stays this chamber's agent (a cancel or a completed plan
		// does not forget it); another --agent replaces it.
		opts.Agent = st.Agent
		r.printf("note: running the agent given at the last start (--agent %s); --agent replaces it", st.Agent)
	}
	if opts.Agent != "" {
		agentLine = opts.Agent
	}
	cmd, err := cfg.AgentLine(agentLine)
	if err != nil {
		return usageErr("set `agent` in cryo.toml or pass --agent", "%v", err)
	}
	if err := r.prepareFiles(); err != nil {
		return &Error{Msg: "cannot prepare the chamber", Err: err}
	}
	missing, err := r.captureEnv()
	if err != nil {
		return err
	}
	for _, k := range missing {
		r.warnf("agent_env names %s, which is not set in this environment: the agent will not get it", k)
	}
	for _, w := range r.agentLineWarnings(agentLine) { // python -m without -I/-P (wrappers.go)
		r.warnf("%s", w)
	}
	// The cage every session runs in (sandbox.go): refused now, before anything is armed,
	// rather than found broken at 3 a.m.
	cage, err := r.sessionCage(ctx, cmd, r.agentEnv(), true)
	if err != nil {
		return usageErr(sandboxHint(err), "%v", err)
	}
	// Check the agent the way session 1 will run it: on the captured PATH, headless, answering
	// --version (for the known CLIs), so that a missing install or login is said now; in the
	// cage, as it runs in the chamber.
	if err := agent.CheckIn(ctx, *cmd.Agent, r.agentEnv(), dir, cage); err != nil {
		var ce *agent.CheckError
		if errors.As(err, &ce) {
			return usageErr(ce.Hint, "agent %q cannot run: %v", cmd.Line, ce)
		}
		return usageErr(agentHint(cmd), "agent %q cannot run: %v", cmd.Line, err)
	}
	be, err := r.backend(ctx)
	if err != nil {
		return &Error{Msg: "cannot reach the OS timer manager", Err: err, Hint: backendHint(cfg.Backend)}
	}
	if err := timer.Preflight(ctx, be); err != nil {
		hint := backendHint(cfg.Backend)
		if he, ok := errorsAs[*timer.HintError](err); ok {
			hint = he.Hint
		}
		return &Error{Msg: "no timer could be armed after session 1", Err: err, Hint: hint}
	}
	for _, w := range be.Warnings(ctx) {
		r.warnf("%s", w)
	}
	for _, a := range timer.Advice(be) {
		r.printf("note: %s", a)
	}

	s.clearFlag(cancelledName)
	s.clearFlag(requestName)
	st.Chamber = dir
	st.ID = id
	st.Binary = env.Binary // what the timers run from now on (a manual wake by another build does not change it)
	st.Plan = planName
	st.Agent = opts.Agent
	st.Command = ""
	st.Task = ""
	st.Retries = 0
	st.RetryingSince = nil
	st.Missing = nil
	st.Paused, st.PausedUntil = nil, nil
	st.Timers = Timers{}
	st.Fallbacks = nil
	st.Claimed = nil
	st.ConfigSeen = ""
	r.guardRestart() // max_sessions counts from this start (guardrails.go)
	if err := r.accept(raw); err != nil {
		return &Error{Msg: "cannot record the accepted configuration", Err: err}
	}
	r.recordCLIConfig() // what later sessions' CLI configuration is compared with (cliconfig.go)
	if err := register(env.Registry, dir); err != nil {
		r.warnf("cannot record the chamber for `cryochamber ps`: %v", err)
	}
	r.syncTimer(ctx)
	r.syncDigestTimer(ctx) // digest.go
	r.printf("starting chamber %s (%s) with %s", dir, id, cmd.Line)
	return r.runSession(ctx, st.Session+1, env.Now(), WhyStart)
}

func agentHint(cmd Command) string {
	if cmd.Agent != nil && cmd.Agent.Name != "" {
		return fmt.Sprintf("install the %s CLI so that `%s` is on your PATH, or choose another agent with `agent` in cryo.toml or --agent", cmd.Agent.Name, cmd.Program())
	}
	return "check the agent command line in cryo.toml (`agent`) or --agent; relative paths are relative to the chamber"
}

func backendHint(name string) string {
	if name == "slurm" {
		return slurmHint()
	}
	if name == "launchd" {
		return "launchd agents need a logged-in macOS user session (launchctl print gui/$(id -u))"
	}
	return "user timers need a systemd user manager: check `systemctl --user status`; over ssh, log in with a session (or `loginctl enable-linger $USER`) so that $XDG_RUNTIME_DIR is set"
}

// prepareFiles creates what a started chamber needs: NOTES.md and the mailbox (0700).
func (r *runner) prepareFiles() error {
	for _, d := range []string{inboxDir, archiveDir, outboxDir} {
		if err := r.fs.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	f, err := r.fs.OpenFile(NotesFile, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// captureEnv writes the environment file (PATH, HOME, XDG_STATE_HOME and agent_env) and the
// alert secrets, both 0600 in the private state directory.
func (r *runner) captureEnv() (missing []string, err error) {
	path := cleanPath(r.env.Getenv("PATH")) // only absolute entries (pathclean.go)
	if w := path.warning(); w != "" {
		r.warnf("%s", w)
	}
	vars := []string{"PATH=" + path.kept, "HOME=" + r.env.Getenv("HOME")}
	if v, ok := lookupEnv(r.env.Environ, "XDG_STATE_HOME"); ok && v != "" {
		// The timers must find the same private state as this command.
		vars = append(vars, "XDG_STATE_HOME="+v)
	}
	for _, k := range r.cfg.AgentEnv {
		if slices.Contains(r.cfg.secretNames(), k) {
			return nil, usageErr("remove it from agent_env: alert secrets are captured separately and never given to the agent",
				"agent_env names %s, which cryo.toml also uses as an alert secret", k)
		}
		v, ok := lookupEnv(r.env.Environ, k)
		if !ok {
			missing = append(missing, k)
			continue
		}
		vars = append(vars, k+"="+v)
	}
	data, err := timer.FormatEnvFile(vars)
	if err != nil {
		return nil, usageErr("remove the newline or other control character (a tab included) from that variable, or leave it out of agent_env", "cannot capture the environment: %v", err)
	}
	if err := r.store.ensure(); err != nil {
		return nil, &Error{Msg: "cannot create the chamber's private state directory", Err: err}
	}
	if err := r.store.write(EnvFileName, data, nil); err != nil {
		return nil, &Error{Err: err}
	}
	r.envLoaded, r.envVars = true, vars
	var secrets []string
	for _, k := range r.cfg.secretNames() {
		v, ok := lookupEnv(r.env.Environ, k)
		if !ok || v == "" {
			return nil, usageErr(fmt.Sprintf("export %s before `cryochamber start` (it is captured, mode 0600, outside the chamber, and never given to the agent)", k),
				"cryo.toml names %s (%s), but it is not set", k, r.cfg.secretPurpose(k))
		}
		secrets = append(secrets, k+"="+v)
	}
	data, err = timer.FormatEnvFile(secrets)
	if err != nil {
		return nil, usageErr("the secret must be one line", "cannot capture the alert secrets: %v", err)
	}
	if err := r.store.write(SecretsFile, data, nil); err != nil {
		return nil, &Error{Err: err}
	}
	return missing, nil
}

// secretNames are the variables only cryochamber may see.
func (c *Config) secretNames() []string {
	var names []string
	if c.Email != nil && c.Email.PasswordEnv != "" {
		names = append(names, c.Email.PasswordEnv)
	}
	if c.Webhook != nil && c.Webhook.SecretEnv != "" {
		names = append(names, c.Webhook.SecretEnv)
	}
	names = append(names, c.heartbeatSecretNames()...)
	return append(names, c.ChannelSecretNames()...)
}

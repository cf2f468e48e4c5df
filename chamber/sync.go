package chamber

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"

	"github.com/cryochamber/cryochamber/fallback"
	"github.com/cryochamber/cryochamber/timer"
)

// Sync is a chamber as `cryochamber sync` holds it: without the lock (a session may run for
// hours meanwhile; the channels keep their own lock, package channel), with the configuration
// the operator accepted and the private state the channels keep their records in. It is the
// one place besides the runner's own that knows where sync's private files are, which secret a
// channel gets (secretEnv, the same ranking as alert delivery) and how the sync timer is armed
// (armSync, as start and reload arm it). It never writes the chamber's state.
type Sync struct {
	r *runner
}

// OpenSync opens the chamber at dir for sync. It fails when the chamber was never started.
func OpenSync(env *Env, dir string) (*Sync, error) {
	abs, err := AbsDir(dir)
	if err != nil {
		return nil, err
	}
	if env.StateDir == "" {
		return nil, &Error{Kind: Usage, Msg: "no state directory", Hint: "set HOME (or XDG_STATE_HOME)"}
	}
	id := chamberID(abs)
	s, err := storeFor(env, id)
	if err != nil {
		return nil, &Error{Kind: Usage, Msg: "no state directory", Hint: "set HOME (or XDG_STATE_HOME)"}
	}
	if !s.exists() {
		return nil, notChamber(abs)
	}
	r := &runner{env: env, dir: abs, id: id, store: s, out: env.Stdout, unlocked: true}
	if r.st, err = s.load(); err != nil {
		r.st = &State{Chamber: abs, ID: id}
	}
	if r.cfg, r.cfgErr = r.loadAccepted(); r.cfgErr != nil {
		r.cfg, _ = ParseConfig(ConfigFile, nil, env.Local)
	}
	return &Sync{r: r}, nil
}

// Close drops the connection to the timer manager and closes the chamber, if they were opened.
func (s *Sync) Close() { s.r.close() }

// Dir is the chamber's canonical path; ID names its units and its private state.
func (s *Sync) Dir() string { return s.r.dir }
func (s *Sync) ID() string  { return s.r.id }

// StateDir is the chamber's private state directory, where package channel keeps what each
// channel synced (in its sync directory).
func (s *Sync) StateDir() string { return string(s.r.store) }

// Last is the latest session's outcome, for the summary a channel publishes (nil: none yet).
func (s *Sync) Last() *Outcome { return s.r.st.Last }

// Config is the cryo.toml the operator accepted at start or reload, which is what decides who
// may write to the agent and where its words go. The chamber's own copy is only compared, to
// say when an edit waits for `reload`.
func (s *Sync) Config() (*Config, error) {
	r := s.r
	if r.cfgErr != nil {
		return nil, &Error{Msg: "cannot read the accepted configuration", Err: r.cfgErr,
			Hint: "run `cryochamber reload --dir " + r.dir + "` to accept cryo.toml again"}
	}
	cfg := r.cfg
	if cfg.Channels == nil || cfg.Channels.Email == nil && cfg.Channels.GitHub == nil && cfg.Channels.Zulip == nil {
		return nil, &Error{Kind: Usage, Msg: "no channel in the accepted cryo.toml",
			Hint: "add [channels.email], [channels.github] or [channels.zulip] to cryo.toml (`cryochamber init` in an empty directory shows them), then run `cryochamber reload --dir " + r.dir + "`"}
	}
	if own, err := LoadConfig(r.dir, r.env.Local); err == nil && !reflect.DeepEqual(own.Channels, cfg.Channels) {
		fmt.Fprintf(r.env.Stderr, "cryochamber: warning: [channels] in %s differs from the accepted one, which is what sync uses; run `cryochamber reload --dir %s` to accept the change\n",
			filepath.Join(r.dir, ConfigFile), r.dir)
	}
	return cfg, nil
}

// Secret resolves a channel secret when the channel first needs it: the variable envName from
// secretEnv (what `sync --install` captured, then what start captured, then this process's
// environment: the order alert delivery uses), or what command prints, run with that same
// environment (the chamber's PATH).
func (s *Sync) Secret(what, envName string, command []string) func(context.Context) (string, error) {
	r := s.r
	return func(ctx context.Context) (string, error) {
		environ := r.secretEnv(syncSecretsName)
		if envName != "" {
			if v, ok := lookupEnv(environ, envName); ok && v != "" {
				return v, nil
			}
			return "", fmt.Errorf("%s: %s is not set: export it and run `cryochamber sync --install --dir %s` (it is kept, mode 0600, outside the chamber)", what, envName, r.dir)
		}
		v, err := fallback.PasswordFrom(ctx, environ, "", command)
		if err != nil {
			return "", fmt.Errorf("%s: %w", what, err)
		}
		return v, nil
	}
}

// Install captures the channels' secrets and arms the sync timer, the way start does.
func (s *Sync) Install(ctx context.Context, cfg *Config) error {
	r := s.r
	if _, err := os.Stat(r.store.path(EnvFileName)); err != nil {
		return &Error{Kind: Usage, Msg: "the chamber's environment file is missing (" + err.Error() + ")", Hint: "start the chamber (or run `cryochamber reload`) first"}
	}
	if err := s.captureSecrets(cfg); err != nil {
		return err
	}
	if err := r.armSync(ctx); err != nil {
		return &Error{Msg: "cannot arm the sync timer", Err: err}
	}
	every := cfg.Channels.PollInterval.D
	fmt.Fprintf(r.env.Stdout, "sync timer armed: every %v (`cryochamber sync --dir %s` syncs now; `sync --status` shows how the last one went)\n", every, r.dir)
	if r.be != nil {
		for _, w := range r.be.Warnings(ctx) {
			fmt.Fprintf(r.env.Stderr, "cryochamber: warning: %s\n", w)
		}
	}
	return nil
}

// captureSecrets writes the channels' environment secrets, taken from this process's
// environment, to sync/secrets (0600, outside the chamber). A secret missing here but captured
// before is kept.
func (s *Sync) captureSecrets(cfg *Config) error {
	r := s.r
	for _, d := range []string{string(r.store), r.store.path(syncDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return &Error{Err: err}
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return &Error{Err: err}
		}
	}
	before := r.readEnvFile(syncSecretsName)
	names := cfg.ChannelSecretNames()
	if e := cfg.Email; e != nil && cfg.Channels.Email != nil && e.PasswordEnv != "" && !slices.Contains(names, e.PasswordEnv) {
		names = append(names, e.PasswordEnv)
	}
	var vars []string
	for _, k := range names {
		v, ok := lookupEnv(r.env.Environ, k)
		if !ok || v == "" {
			v, ok = lookupEnv(before, k)
		}
		if !ok || v == "" {
			return &Error{Kind: Usage, Msg: "cryo.toml names " + k + " for a channel, but it is not set",
				Hint: "export " + k + " and run `cryochamber sync --install` again (it is kept, mode 0600, outside the chamber, and never given to the agent)"}
		}
		vars = append(vars, k+"="+v)
	}
	data, err := timer.FormatEnvFile(vars)
	if err != nil {
		return &Error{Kind: Usage, Msg: "cannot capture the channel secrets", Err: err, Hint: "a secret must be one line"}
	}
	if err := r.store.write(syncSecretsName, data, nil); err != nil {
		return &Error{Msg: "cannot capture the channel secrets", Err: err}
	}
	return nil
}

// Remove disarms the sync timer and forgets the captured secrets; what was synced stays
// recorded, so a later install goes on where this one stopped.
func (s *Sync) Remove(ctx context.Context) error {
	r := s.r
	err := r.withBackend(ctx, func(be timer.Backend) error {
		p, ok := be.(timer.Poller)
		if !ok {
			return fmt.Errorf("the %s backend has no sync timer", be.Name())
		}
		return p.DisarmPoll(ctx, r.id)
	})
	if err != nil {
		return &Error{Msg: "cannot remove the sync timer", Err: err}
	}
	if err := os.Remove(r.store.path(syncSecretsName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return &Error{Msg: "removed the sync timer, but not the captured secrets", Err: err}
	}
	fmt.Fprintln(r.env.Stdout, "sync timer removed")
	return nil
}

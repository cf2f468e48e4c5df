package chamber

import (
	"slices"
	"strings"

	"github.com/cryochamber/cryochamber/internal/envvars"
	"github.com/cryochamber/cryochamber/timer"
)

// The environment a session and the timers run with: the few variables of this process that
// describe the user and the locale, then what `start` captured in the private state (PATH,
// HOME, XDG_STATE_HOME, agent_env), never the alert secrets.

// agentEnv is the environment every session's agent gets, session 1 included: a few variables
// of this process that describe the user and the locale, then what `start` captured (PATH,
// HOME, agent_env), never the alert secrets. Session 1 runs from your shell and later ones from
// the timer; both get the same recipe, so a session that works now works at 3 a.m.
func (r *runner) agentEnv() []string {
	var base []string
	for _, kv := range r.env.Environ {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "USER", k == "LOGNAME", k == "SHELL", k == "LANG", k == "LANGUAGE", k == "TZ", k == "TMPDIR",
			k == "XDG_RUNTIME_DIR", k == "DBUS_SESSION_BUS_ADDRESS", strings.HasPrefix(k, "LC_"):
			base = append(base, kv)
		}
	}
	return withoutVars(mergeEnv(base, r.capturedEnv()), r.cfg.secretNames())
}

// capturedEnv is the environment file written at start: PATH, HOME and agent_env (read once
// per command).
func (r *runner) capturedEnv() []string {
	if r.envLoaded {
		return r.envVars
	}
	r.envLoaded = true
	r.envVars = r.readEnvFile(EnvFileName)
	return r.envVars
}

// capturedPath is the PATH the timers run with (captured at start).
func (r *runner) capturedPath() string {
	if p, ok := lookupEnv(r.capturedEnv(), "PATH"); ok {
		return p
	}
	return r.env.Getenv("PATH")
}

func (r *runner) launchdEnv() []string {
	var out []string
	for _, kv := range r.capturedEnv() {
		if strings.HasPrefix(kv, "PATH=") || strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "XDG_STATE_HOME=") {
			out = append(out, kv)
		}
	}
	return out
}

// lookupEnv is the one lookup of a variable in an environment list (the last entry wins).
var lookupEnv = envvars.Lookup

// mergeEnv overlays vars on base: later keys win, order of first appearance kept.
func mergeEnv(base, vars []string) []string {
	idx := map[string]int{}
	var out []string
	for _, list := range [][]string{base, vars} {
		for _, kv := range list {
			k, _, _ := strings.Cut(kv, "=")
			if i, ok := idx[k]; ok {
				out[i] = kv
				continue
			}
			idx[k] = len(out)
			out = append(out, kv)
		}
	}
	return out
}

// withoutVars drops the named variables (alert secrets) from env.
func withoutVars(env, names []string) []string {
	if len(names) == 0 {
		return env
	}
	out := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, k) {
			out = append(out, kv)
		}
	}
	return out
}

// secretEnv is the one environment a secret is looked up in, by alert delivery and by sync
// alike, ranked so that what was captured outside the chamber wins over the environment of the
// process that runs now (a timer's, or the shell of an operator who exported an old value):
// this process's environment, overlaid by the environment file start captured, then start's
// secrets file, then the captures named in also (sync/secrets for the channels), each later
// source winning. A changed secret is taken by capturing it again: `reload` for start's,
// `sync --install` for the channels'.
func (r *runner) secretEnv(also ...string) []string {
	env := mergeEnv(r.env.Environ, r.capturedEnv())
	for _, name := range append([]string{SecretsFile}, also...) {
		env = mergeEnv(env, r.readEnvFile(name))
	}
	return env
}

// readEnvFile reads an environment file of the private state (nil when absent or unreadable).
func (r *runner) readEnvFile(name string) []string {
	data, err := r.store.read(name, timer.MaxEnvFile)
	if err != nil {
		return nil
	}
	vars, err := timer.ParseEnvFile(data)
	if err != nil {
		return nil
	}
	return vars
}

package chamber

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/validate"
)

// The agent works in its chamber and may write there (it keeps NOTES.md). So nothing that
// decides what runs outside the agent's sandbox may live only in the chamber:
//
//   - the environment file systemd loads (EnvironmentFile=, before our code runs) and the alert
//     secrets live in the user's state directory, per chamber: Env.StateDir/chambers/<id>/;
//   - the security-relevant part of cryo.toml (which programs run, where alerts go), the agent
//     override, the binary and the ID are pinned there when the operator starts the chamber
//     (or runs `cryochamber reload` after editing cryo.toml), with a copy of the accepted
//     cryo.toml. A wake whose chamber no longer matches its pin refuses, and alerts with the
//     accepted configuration: the edited one may point the alerts somewhere else.

// pinFile is what the operator accepted.
type pinFile struct {
	Version int       `json:"version"`
	Chamber string    `json:"chamber"`
	ID      string    `json:"id"`
	Config  string    `json:"config"` // sha256 of the security-relevant keys of cryo.toml
	Agent   string    `json:"agent"`  // the `start --agent` override
	Binary  string    `json:"binary"`
	At      time.Time `json:"at"`
}

// pinnedKeys is the security-relevant part of cryo.toml: which programs may run, with what
// environment, and where the alerts go.
type pinnedKeys struct {
	Agent           string                `json:"agent"`
	Agents          map[string]AgentTable `json:"agents"`
	AllowedCommands []string              `json:"allowed_commands"`
	AgentEnv        []string              `json:"agent_env"`
	Backend         string                `json:"backend"`
	Fallback        []FallbackEntry       `json:"fallback"`
	FallbackAllow   []string              `json:"fallback_allow"`
	Email           *EmailConfig          `json:"email"`
	Webhook         *WebhookConfig        `json:"webhook"`
}

func (c *Config) pinned() pinnedKeys {
	return pinnedKeys{c.Agent, c.Agents, c.AllowedCommands, c.AgentEnv, c.Backend, c.Fallback, c.FallbackAllow, c.Email, c.Webhook}
}

func (c *Config) pinHash() string {
	data, _ := json.Marshal(c.pinned()) // map keys are sorted by encoding/json
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// pinnedDiff names the keys that differ between two configurations.
func pinnedDiff(a, b *Config) []string {
	pa, pb := a.pinned(), b.pinned()
	fields := map[string][2]any{
		"agent": {pa.Agent, pb.Agent}, "agents": {pa.Agents, pb.Agents}, "allowed_commands": {pa.AllowedCommands, pb.AllowedCommands},
		"agent_env": {pa.AgentEnv, pb.AgentEnv}, "backend": {pa.Backend, pb.Backend}, "fallback": {pa.Fallback, pb.Fallback},
		"fallback_allow": {pa.FallbackAllow, pb.FallbackAllow}, "email": {pa.Email, pb.Email}, "webhook": {pa.Webhook, pb.Webhook},
	}
	var diff []string
	for k, v := range fields {
		x, _ := json.Marshal(v[0])
		y, _ := json.Marshal(v[1])
		if string(x) != string(y) {
			diff = append(diff, k)
		}
	}
	sort.Strings(diff)
	return diff
}

// privateStateDir is the chamber's directory in the user's state directory (0700).
func privateStateDir(env *Env, id string) (string, error) {
	if env.StateDir == "" {
		return "", errors.New("no state directory: set HOME (or XDG_STATE_HOME)")
	}
	d := filepath.Join(env.StateDir, "chambers", id)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", err
	}
	if err := os.Chmod(d, 0o700); err != nil {
		return "", err
	}
	return d, nil
}

func (r *runner) stateFile(name string) string {
	if r.env.StateDir == "" {
		return r.private(name)
	}
	return filepath.Join(r.env.StateDir, "chambers", r.chamberID(), name)
}

// chamberID is derived from the path, never read from timer.json (which the agent could edit).
func (r *runner) chamberID() string { return timer.ID(r.dir) }

// accept pins the current configuration, agent override and binary, and keeps a copy of the
// accepted cryo.toml for alerting. Only `start` and `reload`, run by the operator, call it.
func (r *runner) accept() error {
	d, err := privateStateDir(r.env, r.chamberID())
	if err != nil {
		return err
	}
	raw, err := readBounded(r.path(ConfigFile), maxConfigSize)
	if errors.Is(err, os.ErrNotExist) {
		raw = nil
	} else if err != nil {
		return err
	}
	if err := atomicWrite(filepath.Join(d, "cryo.toml"), raw, 0o600); err != nil {
		return err
	}
	p := pinFile{Version: 1, Chamber: r.dir, ID: r.chamberID(), Config: r.cfg.pinHash(), Agent: r.st.Agent, Binary: r.st.Binary, At: r.now().UTC().Truncate(time.Second)}
	data, _ := json.MarshalIndent(p, "", "  ")
	return atomicWrite(filepath.Join(d, "pin.json"), append(data, '\n'), 0o600)
}

// acceptedConfig is the cryo.toml the operator last accepted (nil if none).
func (r *runner) acceptedConfig() *Config {
	if r.env.StateDir == "" {
		return nil
	}
	raw, err := os.ReadFile(filepath.Join(r.env.StateDir, "chambers", r.chamberID(), "cryo.toml"))
	if err != nil {
		return nil
	}
	c, err := ParseConfig(ConfigFile, raw, r.env.Local)
	if err != nil {
		return nil
	}
	return c
}

// checkPin compares an active chamber with what the operator accepted and returns what
// changed. A stopped chamber has nothing to protect: its next start accepts anew.
func (r *runner) checkPin() []string {
	if r.env.StateDir == "" || !r.st.Phase.Active() {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(r.env.StateDir, "chambers", r.chamberID(), "pin.json"))
	if err != nil {
		return []string{"the accepted configuration is missing (" + err.Error() + ")"}
	}
	var p pinFile
	if err := json.Unmarshal(data, &p); err != nil {
		return []string{"the accepted configuration is unreadable"}
	}
	var changed []string
	if p.Config != r.cfg.pinHash() {
		if acc := r.acceptedConfig(); acc != nil {
			for _, k := range pinnedDiff(acc, r.cfg) {
				changed = append(changed, "cryo.toml "+k)
			}
		}
		if len(changed) == 0 {
			changed = append(changed, "cryo.toml")
		}
	}
	if p.Agent != r.st.Agent {
		changed = append(changed, "timer.json agent")
	}
	if p.Binary != "" && p.Binary != r.st.Binary {
		changed = append(changed, "timer.json binary")
	}
	return changed
}

// refuseTampered stops a chamber whose security-relevant files changed since the operator
// accepted them: nothing stays armed, and the alert goes out with the accepted configuration.
func (r *runner) refuseTampered(changed []string) error {
	msg := fmt.Sprintf("%s changed since the chamber was started or reloaded, and not by cryochamber", strings.Join(changed, ", "))
	if acc := r.acceptedConfig(); acc != nil {
		r.cfg = acc
	}
	r.st.Binary = "" // never arm with a binary path we did not write
	r.st.ID = r.chamberID()
	return r.stopAndAlert(msg)
}

// stopAndAlert stops a chamber that must not run: nothing stays armed, the state says failed,
// and the alert goes out (with whatever configuration r holds: the accepted one when the
// chamber's own cannot be trusted).
func (r *runner) stopAndAlert(msg string) error {
	ctx, cancel := context.WithTimeout(context.Background(), hibernateTimeout)
	defer cancel()
	if err := r.disarmAll(ctx); err != nil {
		r.printf("warning: %v", err)
	}
	r.st.Phase = PhaseFailed
	r.st.Wake = nil
	r.st.Holder = nil
	if err := r.save(); err != nil {
		r.printf("warning: %v", err)
	}
	r.alert(ctx, r.st.Session, "changed", "refused to run: "+msg+". If you made this change, run `cryochamber reload --dir "+r.dir+"` and then `cryochamber start` again.", nil)
	return &Error{Status: 1, Msg: "refused to run: " + msg,
		Hint: "if you made this change: cryochamber reload --dir " + r.dir + ", then cryochamber start " + filepath.Join(r.dir, r.planName()) + "; if not, the agent (or something else) edited files it must not: read cryo.log"}
}

// ReloadOptions are the options of `cryochamber reload`.
type ReloadOptions struct {
	Dir string
}

// Reload accepts the current cryo.toml and environment for a started chamber, after the
// operator edited them: it captures PATH, HOME, agent_env and the alert secrets again, pins the
// configuration, and refreshes the armed timers. It runs no session.
func Reload(ctx context.Context, env *Env, opts ReloadOptions) error {
	dir, err := AbsDir(opts.Dir)
	if err != nil {
		return err
	}
	cfg, st, err := loadForCommand(dir, env)
	if err != nil {
		return err
	}
	lock, err := TryLock(dir)
	if errors.Is(err, ErrLocked) {
		return failErr("run reload again when it has finished", "%s", holderMessage(dir, env.Now()))
	}
	if err != nil {
		return &Error{Status: 1, Err: err}
	}
	r := &runner{env: env, dir: dir, cfg: cfg, st: st, lock: lock, out: env.Stdout}
	defer r.close()
	var changed []string
	if acc := r.acceptedConfig(); acc != nil {
		changed = pinnedDiff(acc, cfg)
	}
	missing, err := r.captureEnv()
	if err != nil {
		return err
	}
	for _, k := range missing {
		r.printf("warning: agent_env names %s, which is not set in this environment: the agent will not get it", k)
	}
	if r.st.Binary == "" {
		r.st.Binary = env.Binary
	}
	r.st.ID = r.chamberID()
	if err := r.accept(); err != nil {
		return &Error{Status: 1, Msg: "cannot record the accepted configuration", Err: err}
	}
	if len(changed) > 0 {
		r.printf("accepted cryo.toml (changed: %s) and the environment (PATH, HOME, agent_env)", strings.Join(changed, ", "))
	} else {
		r.printf("accepted cryo.toml and the environment (PATH, HOME, agent_env)")
	}
	if st.Phase == PhaseArmed && st.Wake != nil && st.Wake.After(env.Now()) {
		rep := validate.New(r.out)
		if err := r.arm(ctx, rep, *st.Wake); err != nil {
			return &Error{Status: 1, Msg: "the timers could not be refreshed", Err: err, Hint: "cryochamber status shows what is armed"}
		}
	}
	return r.save()
}

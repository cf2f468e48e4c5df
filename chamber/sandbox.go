package chamber

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/cryochamber/cryochamber/internal/sandbox"
	"github.com/cryochamber/cryochamber/validate"
)

// SandboxConfig is the [sandbox] table: the cage every session and every allowed CMD runs in
// (internal/sandbox). Like every key, it is in force once accepted (start, reload).
type SandboxConfig struct {
	Mode     string   `toml:"mode" json:"mode"`         // "on" (default) or "off"
	Hide     []string `toml:"hide" json:"hide"`         // invisible to the session, besides DefaultHide
	Writable []string `toml:"writable" json:"writable"` // writable besides the chamber and the CLI's own state
}

// DefaultHide are the user's secrets no session sees, whatever [sandbox] hide adds ("~" is the
// HOME the agent runs with).
var DefaultHide = []string{"~/.ssh", "~/.gnupg", "~/.aws", "~/.config/gcloud", "~/.kube", "~/.docker", "~/.netrc",
	"~/.git-credentials", "~/.config/gh", "~/.password-store", "~/.local/share/keyrings"}

// cliState are the paths each preset CLI writes its own state to (sessions, logs, caches, its
// login), made writable in the cage for the CLI that runs; variables are the CLI's own
// overrides, read from the agent's environment. Found by running each pinned CLI in the cage
// (agents_e2e_test.go): with one of them read-only it fails to start or to answer.
var cliState = map[string][]string{
	"claude":   {"$CLAUDE_CONFIG_DIR|~/.claude", "~/.claude.json", "~/.claude.json.backup"},
	"codex":    {"$CODEX_HOME|~/.codex"},
	"opencode": {"$XDG_DATA_HOME|~/.local/share:opencode", "$XDG_CACHE_HOME|~/.cache:opencode", "$XDG_CONFIG_HOME|~/.config:opencode", "$XDG_STATE_HOME|~/.local/state:opencode"},
}

// SandboxOn reports whether sessions run in the cage (the default).
func (c *Config) SandboxOn() bool { return c.Sandbox == nil || c.Sandbox.Mode != "off" }

// SandboxMechanism is what status reports: the OS's sandbox, or "off".
func (c *Config) SandboxMechanism() string {
	if !c.SandboxOn() {
		return sandbox.Off
	}
	if runtime.GOOS == "darwin" {
		return sandbox.SandboxExec
	}
	return sandbox.Bubblewrap
}

// checkSandbox validates the [sandbox] table (part of Config.check).
func (c *Config) checkSandbox(name string, data []byte) error {
	s := c.Sandbox
	if s == nil {
		return nil
	}
	switch s.Mode {
	case "":
		s.Mode = "on"
	case "on", "off":
	default:
		return &ConfigError{File: name, Line: keyLine(data, "sandbox", "mode"), Key: "sandbox.mode", Msg: fmt.Sprintf("unknown mode %q (want \"on\" or \"off\")", s.Mode)}
	}
	for _, l := range []struct {
		key   string
		paths []string
	}{{"hide", s.Hide}, {"writable", s.Writable}} {
		for _, p := range l.paths {
			if !filepath.IsAbs(p) && p != "~" && !strings.HasPrefix(p, "~/") {
				return &ConfigError{File: name, Line: keyLine(data, "sandbox", l.key), Key: "sandbox." + l.key,
					Msg: fmt.Sprintf("%q must be an absolute path or start with ~/", p)}
			}
			if strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				return &ConfigError{File: name, Line: keyLine(data, "sandbox", l.key), Key: "sandbox." + l.key,
					Msg: fmt.Sprintf("%q has control characters", p)}
			}
		}
	}
	return nil
}

// expandHome makes "~/x" absolute with home; "" when it cannot.
func expandHome(p, home string) string {
	switch {
	case p == "~":
		return home
	case strings.HasPrefix(p, "~/"):
		if home == "" {
			return ""
		}
		return filepath.Join(home, p[2:])
	}
	return filepath.Clean(p)
}

// cliStatePaths are the state paths of the preset CLI a command runs (by its program's name),
// with the agent's environment env.
func cliStatePaths(cmd Command, env []string) []string {
	name := filepath.Base(cmd.Program())
	if cmd.Agent != nil && cmd.Agent.Name != "" {
		if _, ok := cliState[cmd.Agent.Name]; ok {
			name = cmd.Agent.Name
		}
	}
	home, _ := lookupEnv(env, "HOME")
	var out []string
	for _, spec := range cliState[name] {
		// "$VAR|default:sub": $VAR (or default) joined with sub.
		base, sub, _ := strings.Cut(spec, ":")
		v, def, alt := strings.Cut(base, "|")
		p := ""
		if alt {
			if val, ok := lookupEnv(env, strings.TrimPrefix(v, "$")); ok && filepath.IsAbs(val) {
				p = val
			} else {
				p = expandHome(def, home)
			}
		} else {
			p = expandHome(base, home)
		}
		if p == "" {
			continue
		}
		if sub != "" {
			p = filepath.Join(p, sub)
		}
		out = append(out, p)
	}
	return out
}

// sandboxPolicy is the cage of a session running cmd with the agent environment env.
func (r *runner) sandboxPolicy(cmd Command, env []string) sandbox.Policy {
	home, _ := lookupEnv(env, "HOME")
	if home == "" {
		home = r.env.Getenv("HOME")
	}
	p := sandbox.Policy{Chamber: r.dir}
	if home != "" && filepath.IsAbs(home) {
		p.Visible = append(p.Visible, home)
	}
	p.Writable = cliStatePaths(cmd, env)
	var hide, writable []string
	hide = append(hide, DefaultHide...)
	if s := r.cfg.Sandbox; s != nil {
		hide = append(hide, s.Hide...)
		writable = s.Writable
	}
	for _, h := range hide {
		if x := expandHome(h, home); x != "" {
			p.Hide = append(p.Hide, x)
		}
	}
	for _, w := range writable {
		if x := expandHome(w, home); x != "" {
			p.Writable = append(p.Writable, x)
		}
	}
	// The user's session bus, service manager, keyring and agent sockets live in the runtime
	// directory, wherever it points (this process's and the agent's), and the system bus in
	// /run/dbus; a bus named by a path elsewhere is hidden too.
	for _, e := range [][]string{env, r.env.Environ} {
		if v, ok := lookupEnv(e, "XDG_RUNTIME_DIR"); ok && filepath.IsAbs(v) {
			p.Hide = append(p.Hide, v)
		}
		if v, ok := lookupEnv(e, "DBUS_SESSION_BUS_ADDRESS"); ok {
			p.Hide = append(p.Hide, busPaths(v)...)
		}
	}
	p.Hide = append(p.Hide, "/run/user", "/run/dbus", "/var/run/dbus", "/run/systemd/private", "/var/run/systemd/private")
	// Other chambers this user started.
	for _, d := range readRegistry(r.env.Registry) {
		if d != r.dir && filepath.IsAbs(d) {
			p.Hide = append(p.Hide, d)
		}
	}
	if r.env.StateDir != "" {
		p.Protected = append(p.Protected, r.env.StateDir)
	}
	// A private /tmp: shared ones hold other programs' sockets (tmux, X11, ssh-agent).
	p.Scratch = []string{"/tmp", "/var/tmp"}
	if t, ok := lookupEnv(env, "TMPDIR"); ok && filepath.IsAbs(t) && filepath.Clean(t) != "/" && (home == "" || !within(t, home)) {
		p.Scratch = append(p.Scratch, t)
	}
	return p
}

// within reports whether p is dir or lies under it.
func within(dir, p string) bool {
	dir, p = filepath.Clean(dir), filepath.Clean(p)
	return dir == "/" || dir == p || strings.HasPrefix(p, dir+"/")
}

// busPaths are the socket paths a D-Bus address names ("unix:path=/run/user/1000/bus;...").
func busPaths(addr string) []string {
	var out []string
	for _, a := range strings.Split(addr, ";") {
		_, params, ok := strings.Cut(a, ":")
		if !ok {
			continue
		}
		for _, kv := range strings.Split(params, ",") {
			if v, ok := strings.CutPrefix(kv, "path="); ok && filepath.IsAbs(v) {
				out = append(out, v)
			}
		}
	}
	return out
}

// sessionCage is the sandbox session commands run in: nil when [sandbox] mode is "off". It
// fails, with a hint, when the sandbox cannot be set up: then nothing runs unconfined.
func (r *runner) sessionCage(ctx context.Context, cmd Command, env []string) (*sandbox.Cage, error) {
	if !r.cfg.SandboxOn() {
		return nil, nil
	}
	p := r.sandboxPolicy(cmd, env)
	if err := p.Check(); err != nil {
		return nil, &sandbox.Error{Err: err, Hint: "change [sandbox] writable in cryo.toml, then `cryochamber reload`"}
	}
	// The CLI's state directories must exist to be bound writable: the CLI cannot create them
	// in a read-only home.
	for _, w := range cliStatePaths(cmd, env) {
		if !strings.HasSuffix(w, ".json") && !strings.HasSuffix(w, ".backup") {
			_ = os.MkdirAll(w, 0o700)
		}
	}
	switch runtime.GOOS {
	case "linux":
		tool, err := sandbox.Find(r.env.Getenv("PATH"), r.dir)
		if err != nil {
			return nil, err
		}
		if err := sandbox.Probe(ctx, tool); err != nil {
			return nil, err
		}
		return &sandbox.Cage{Mechanism: sandbox.Bubblewrap, Tool: tool, Policy: p}, nil
	case "darwin":
		const tool = "/usr/bin/sandbox-exec"
		if _, err := os.Stat(tool); err != nil {
			return nil, &sandbox.Error{Err: fmt.Errorf("%s is missing", tool), Hint: "set [sandbox] mode = \"off\" in cryo.toml and run `cryochamber reload` to accept the risk of an unconfined agent"}
		}
		return &sandbox.Cage{Mechanism: sandbox.SandboxExec, Tool: tool, Policy: p}, nil
	}
	return nil, &sandbox.Error{Err: fmt.Errorf("no sandbox is known on %s", runtime.GOOS),
		Hint: "set [sandbox] mode = \"off\" in cryo.toml and run `cryochamber reload` to accept the risk of an unconfined agent"}
}

// sandboxHint is the hint of a sandbox error.
func sandboxHint(err error) string {
	var se *sandbox.Error
	if errors.As(err, &se) {
		return se.Hint
	}
	return sandbox.BwrapHint
}

// sandboxOffWarning is what status says every time while the sandbox is off.
func (r *runner) sandboxOffWarning() string {
	return fmt.Sprintf("[sandbox] mode is \"off\": sessions run unconfined, as you, and can read cryochamber's state (alert secrets, seal.key) and start services; set mode = \"on\" and run `cryochamber reload --dir %s`", r.dir)
}

// sandboxCheck is validate's line about the cage: the mechanism, or why the next session will
// not run (step 3: the next command runs only if its cage can be set up).
func (r *runner) sandboxCheck(ctx context.Context, rep *validate.Report) {
	if !r.cfg.SandboxOn() {
		rep.Add(validate.StepCommand, validate.Warn, "%s", r.sandboxOffWarning())
		return
	}
	cmd, err := r.command()
	if err != nil {
		return // step 3 has said why
	}
	if _, err := r.sessionCage(ctx, cmd, r.agentEnv()); err != nil {
		rep.Add(validate.StepCommand, validate.Fail, "%v (hint: %s)", err, sandboxHint(err))
		return
	}
	rep.Add(validate.StepCommand, validate.Pass, "sessions run in the %s sandbox: the chamber writable, cryochamber's state, other chambers and %s hidden",
		r.cfg.SandboxMechanism(), strings.Join(DefaultHide[:3], ", ")+", ...")
}

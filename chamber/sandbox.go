package chamber

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cryochamber/cryochamber/internal/confined"
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

// cliState are the directories each preset CLI keeps its own state in (its login, settings,
// sessions, logs, caches); variables are the CLI's own overrides, read from the agent's
// environment. In the cage each is a copy kept per chamber (cliBinds), writable; found by
// running each pinned CLI in the cage (agents_e2e_test.go). ~/.claude.json stays read-only:
// Claude Code runs without writing it.
var cliState = map[string][]cliDir{
	"claude": {{"$CLAUDE_CONFIG_DIR|~/.claude", []string{".credentials.json", "settings.json", "CLAUDE.md"}}},
	"codex":  {{"$CODEX_HOME|~/.codex", []string{"auth.json", "config.toml", "AGENTS.md", "installation_id"}}},
	"opencode": {
		{"$XDG_DATA_HOME|~/.local/share:opencode", []string{"auth.json"}},
		{"$XDG_CACHE_HOME|~/.cache:opencode", nil},
		{"$XDG_CONFIG_HOME|~/.config:opencode", []string{"opencode.json", "opencode.jsonc", "config.json", "AGENTS.md"}},
		{"$XDG_STATE_HOME|~/.local/state:opencode", nil},
	},
}

// cliDir is one state directory of a CLI: where ("$VAR|default:sub", $VAR or else default,
// joined with sub) and the files copied in from the real one (its login and settings; never
// its session history, which is other sessions' business).
type cliDir struct {
	spec string
	seed []string
}

// maxSeedFile bounds a file of the CLI's own state copied into the chamber's copy.
const maxSeedFile = 4 << 20

// SandboxOn reports whether sessions run in the cage (the default).
func (c *Config) SandboxOn() bool { return c.Sandbox == nil || c.Sandbox.Mode != "off" }

// SandboxMechanism is what status reports: the OS's sandbox, or "off".
func (c *Config) SandboxMechanism() string {
	if !c.SandboxOn() {
		return sandbox.Off
	}
	return sandbox.Mechanism
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

// expandHome makes "~/x" absolute with home; "" when it cannot (no HOME, or a relative one).
func expandHome(p, home string) string {
	if !filepath.IsAbs(home) {
		home = ""
	}
	switch {
	case p == "~":
		return home // "" without one
	case strings.HasPrefix(p, "~/"):
		if home == "" {
			return ""
		}
		return filepath.Join(home, p[2:])
	}
	return filepath.Clean(p)
}

// cliStatePaths are the state directories of the preset CLI a command runs (by its program's
// name), with the agent's environment env, and what is copied in from each.
func cliStatePaths(cmd Command, env []string) ([]string, [][]string) {
	name := filepath.Base(cmd.Program())
	if cmd.Agent != nil && cmd.Agent.Name != "" {
		if _, ok := cliState[cmd.Agent.Name]; ok {
			name = cmd.Agent.Name
		}
	}
	home, _ := lookupEnv(env, "HOME")
	var out []string
	var seeds [][]string
	for _, d := range cliState[name] {
		base, sub, _ := strings.Cut(d.spec, ":")
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
		seeds = append(seeds, d.seed)
	}
	return out, seeds
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
	p.Binds = r.cliBinds(cmd, env, false)
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
	p.Hide = append(p.Hide, rootDaemonSockets...)
	p.Hide = append(p.Hide, slurmSockets(env, r.env.Environ)...) // sandbox_slurm.go
	// Other chambers this user started.
	for _, d := range readRegistry(r.env.Registry) {
		if d != r.dir && filepath.IsAbs(d) {
			p.Hide = append(p.Hide, d)
		}
	}
	if r.env.StateDir != "" {
		p.Protected = append(p.Protected, r.env.StateDir)
	}
	p.Protected = append(p.Protected, managerDirs(env, r.env.Environ)...)
	// A private /tmp: shared ones hold other programs' sockets (tmux, X11, ssh-agent).
	p.Scratch = []string{"/tmp", "/var/tmp"}
	if t, ok := lookupEnv(env, "TMPDIR"); ok && filepath.IsAbs(t) && filepath.Clean(t) != "/" && (home == "" || !within(t, home)) {
		p.Scratch = append(p.Scratch, t)
	}
	// The programs the session runs stay visible where they lie under a scratch directory (a
	// CLI installed under /tmp): the PATH's directories there, read-only. A hidden path still
	// wins over them.
	if pathVar, ok := lookupEnv(env, "PATH"); ok {
		for _, d := range filepath.SplitList(pathVar) {
			for _, sc := range p.Scratch {
				if filepath.IsAbs(d) && within(sc, d) && filepath.Clean(d) != filepath.Clean(sc) {
					p.Visible = append(p.Visible, d)
				}
			}
		}
	}
	return p
}

// managerDirs are where the user's service manager reads units and its environment from
// (systemd: $XDG_CONFIG_HOME/systemd, environment.d, $XDG_DATA_HOME/systemd; launchd:
// ~/Library/LaunchAgents), for each environment given. They are protected: never writable,
// whatever [sandbox] writable covers (~/.config), because a drop-in planted there
// (cryo-*.service.d/x.conf with ExecStartPre=) is loaded by the next wake's daemon-reload and
// runs outside the cage.
func managerDirs(envs ...[]string) []string {
	var out []string
	for _, e := range envs {
		home, _ := lookupEnv(e, "HOME")
		if !filepath.IsAbs(home) {
			home = ""
		}
		xdg := func(v, def string) string {
			if x, ok := lookupEnv(e, v); ok && filepath.IsAbs(x) {
				return x
			}
			if home == "" {
				return ""
			}
			return filepath.Join(home, def)
		}
		if c := xdg("XDG_CONFIG_HOME", ".config"); c != "" {
			out = append(out, filepath.Join(c, "systemd"), filepath.Join(c, "environment.d"))
		}
		if d := xdg("XDG_DATA_HOME", ".local/share"); d != "" {
			out = append(out, filepath.Join(d, "systemd"))
		}
		if home != "" {
			out = append(out, filepath.Join(home, "Library", "LaunchAgents"))
		}
	}
	return out
}

// rootDaemonSockets are the sockets of daemons that act as root for the members of a group
// the user is often in (docker, libvirt, lxd, incus; podman's system service): through one, a
// session could start a container that mounts / and writes anywhere, outside any cage.
var rootDaemonSockets = []string{"/run/docker.sock", "/var/run/docker.sock", "/run/containerd", "/var/run/containerd",
	"/run/libvirt", "/var/run/libvirt", "/run/podman", "/var/run/podman",
	"/var/snap/lxd/common/lxd/unix.socket", "/var/lib/lxd/unix.socket", "/var/lib/incus/unix.socket"}

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

// cliBinds are the per-chamber copies of the CLI's state directories (cliState), shown in
// their place: the CLI finds its login and settings and writes its sessions, and whatever a
// session writes there (a user-level hook in settings.json, a global plugin) stays in this
// chamber's copy, never reaching the CLI the operator runs by hand. prepare (a session about
// to run) creates them and copies in the top-level files of the real directory, afresh each
// session, so that a new login or setting of the operator's reaches the chamber and a
// session's change to them lasts one session.
func (r *runner) cliBinds(cmd Command, env []string, prepare bool) []sandbox.Bind {
	home, _ := lookupEnv(env, "HOME")
	var out []sandbox.Bind
	reals, seeds := cliStatePaths(cmd, env)
	for i, real := range reals {
		name := real
		if home != "" && within(home, real) && real != home {
			name = real[len(home)+1:]
		}
		src := r.store.path(filepath.Join("cli", strings.ReplaceAll(strings.Trim(name, "/"), "/", "_")))
		if prepare {
			if err := seedCLIState(real, src, seeds[i]); err != nil {
				r.warnf("the chamber's copy of %s: %v", real, err)
			}
		}
		out = append(out, sandbox.Bind{Src: src, Dst: real})
	}
	return out
}

// seedCLIState makes the chamber's copy dst of the CLI state directory real: both exist (the
// real one as the mount point; the CLI creates it on its first run anyway), and dst holds the
// real one's files named in seed, as they are now.
//
// dst is the sessions' to write, and this runs outside the cage: every name in it is opened
// through the confined opener (internal/confined), so that what a session left there (a
// symlink, a FIFO, a device, a hard link) is replaced, never read or written through, and a
// directory under a seeded name is removed.
func seedCLIState(real, dst string, seed []string) error {
	if err := os.MkdirAll(real, 0o700); err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	d, err := confined.Open(dst)
	if err != nil {
		return err
	}
	defer d.Close()
	var first error
	for _, name := range seed {
		fi, err := os.Lstat(filepath.Join(real, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxSeedFile {
			// Gone from the real one (a logout): gone from the copy.
			if errors.Is(err, os.ErrNotExist) {
				_ = os.RemoveAll(filepath.Join(dst, name))
			}
			continue
		}
		data, err := readRegular(filepath.Join(real, name), maxSeedFile)
		if err != nil {
			continue
		}
		if old, err := d.ReadFile(name, maxSeedFile); err == nil && string(old) == string(data) {
			continue
		}
		// Replaced, never written through. A directory in the way goes (RemoveAll follows no
		// symlink); anything else is renamed over.
		if fi, err := d.Lstat(name); err == nil && fi.IsDir() {
			_ = os.RemoveAll(filepath.Join(dst, name))
		}
		if err := d.WriteView(name, data, 0o600); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// readRegular reads the regular file p, at most limit bytes, never blocking on a FIFO or
// following a symlink at its last name.
func readRegular(p string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	return io.ReadAll(io.LimitReader(f, limit))
}

// sessionCage is the sandbox session commands run in: nil when [sandbox] mode is "off". It
// fails, with a hint, when the sandbox cannot be set up: then nothing runs unconfined.
// prepare (a session about to run, not a check) makes the chamber's copies of the CLI state.
func (r *runner) sessionCage(ctx context.Context, cmd Command, env []string, prepare bool) (*sandbox.Cage, error) {
	if !r.cfg.SandboxOn() {
		return nil, nil
	}
	if prepare {
		r.cliBinds(cmd, env, true)
	}
	p := r.sandboxPolicy(cmd, env)
	if err := p.Check(); err != nil {
		return nil, &sandbox.Error{Err: err, Hint: "change [sandbox] writable in cryo.toml, then `cryochamber reload`"}
	}
	if !prepare {
		return sandbox.Setup(ctx, r.env.Getenv("PATH"), r.dir, p) // validate: always the trial run
	}
	return r.knownCage(ctx, p) // sandbox_known.go: a session skips the trial once a cage started
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
	if _, err := r.sessionCage(ctx, cmd, r.agentEnv(), false); err != nil {
		rep.Add(validate.StepCommand, validate.Fail, "%v (hint: %s)", err, sandboxHint(err))
		return
	}
	rep.Add(validate.StepCommand, validate.Pass, "sessions run in the %s sandbox: the chamber writable, cryochamber's state, other chambers and %s hidden",
		r.cfg.SandboxMechanism(), strings.Join(DefaultHide[:3], ", ")+", ...")
}

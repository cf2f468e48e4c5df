package chamber

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/sandbox"
)

func TestSandboxConfig(t *testing.T) {
	c, err := ParseConfig("cryo.toml", nil, time.UTC)
	if err != nil || !c.SandboxOn() {
		t.Fatalf("default: on = %v (%v)", c.SandboxOn(), err)
	}
	c, err = ParseConfig("cryo.toml", []byte("[sandbox]\nhide = [\"~/.secrets\", \"/srv/keys\"]\nwritable = [\"~/src/app\"]\n"), time.UTC)
	if err != nil || !c.SandboxOn() || c.Sandbox.Mode != "on" {
		t.Fatalf("hide/writable: %+v (%v)", c.Sandbox, err)
	}
	for data, want := range map[string]string{
		"[sandbox]\nmode = \"maybe\"\n":     `cryo.toml:2: sandbox.mode: unknown mode "maybe"`,
		"[sandbox]\nhide = [\"secrets\"]\n": `cryo.toml:2: sandbox.hide: "secrets" must be an absolute path or start with ~/`,
		"[sandbox]\nwritable = [\"~x\"]\n":  `sandbox.writable: "~x" must be an absolute path`,
		"[sandbox]\nhide = [\"/a\\nb\"]\n":  `sandbox.hide: "/a\nb" has control characters`,
		"[sandbox]\nunknown = 1\n":          `unknown`,
	} {
		_, err := ParseConfig("cryo.toml", []byte(data), time.UTC)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", data, err, want)
		}
	}
}

func TestCLIStatePaths(t *testing.T) {
	claude := Command{Words: []string{"claude"}}
	got, _ := cliStatePaths(claude, []string{"HOME=/h"})
	if !slices.Equal(got, []string{"/h/.claude"}) {
		t.Errorf("claude: %q", got)
	}
	got, _ = cliStatePaths(Command{Words: []string{"/opt/bin/codex"}}, []string{"HOME=/h", "CODEX_HOME=/x/codex"})
	if !slices.Equal(got, []string{"/x/codex"}) {
		t.Errorf("codex with CODEX_HOME: %q", got)
	}
	got, _ = cliStatePaths(Command{Words: []string{"opencode"}}, []string{"HOME=/h", "XDG_CONFIG_HOME=/c", "XDG_DATA_HOME=rel"})
	want := []string{"/h/.local/share/opencode", "/h/.cache/opencode", "/c/opencode", "/h/.local/state/opencode"}
	if !slices.Equal(got, want) {
		t.Errorf("opencode: %q, want %q (a relative XDG_DATA_HOME is ignored)", got, want)
	}
	if got, _ := cliStatePaths(Command{Words: []string{"./agent.sh"}}, []string{"HOME=/h"}); len(got) != 0 {
		t.Errorf("a plain step: %q", got)
	}
}

func TestBusPaths(t *testing.T) {
	got := busPaths("unix:path=/run/user/1000/bus,guid=x;unix:abstract=/tmp/dbus-1;tcp:host=h")
	if !slices.Equal(got, []string{"/run/user/1000/bus"}) {
		t.Errorf("busPaths = %q", got)
	}
}

// The chamber's copy of a CLI's state gets the login and settings afresh each session, replaces
// (never writes through) what a session left there, follows a logout, and never copies the
// CLI's session history.
func TestSeedCLIState(t *testing.T) {
	dir := t.TempDir()
	real, dst, outside := filepath.Join(dir, "real"), filepath.Join(dir, "copy"), filepath.Join(dir, "outside")
	for p, data := range map[string]string{"real/auth.json": "token-1", "real/config.toml": "x=1", "real/state_5.sqlite": "history", "outside": "keep"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	seed := []string{"auth.json", "config.toml", "AGENTS.md"}
	if err := seedCLIState(real, dst, seed); err != nil {
		t.Fatal(err)
	}
	// A session plants a symlink in its copy, and edits a setting.
	_ = os.Remove(filepath.Join(dst, "auth.json"))
	if err := os.Symlink(outside, filepath.Join(dst, "auth.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, "config.toml"), []byte("notify=[\"sh\"]"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(real, "config.toml")); err != nil { // the operator removes it
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(real, "auth.json"), []byte("token-2"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := seedCLIState(real, dst, seed); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "keep" {
		t.Errorf("written through the planted symlink: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "auth.json")); string(b) != "token-2" {
		t.Errorf("auth.json in the copy: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(dst, "config.toml")); err == nil {
		t.Errorf("config.toml, removed from the real one, is still in the copy")
	}
	if _, err := os.Lstat(filepath.Join(dst, "state_5.sqlite")); err == nil {
		t.Errorf("the CLI's history was copied into the chamber's copy")
	}
}

// The chamber's copy of the CLI state is the session's to write, and seedCLIState runs outside
// the cage, in `wake`: what a session leaves there (a FIFO, a symlink to one or to a device, a
// directory under a seeded name) must neither hang the wake nor be read through, and the
// other files are still seeded.
func TestSeedCLIStatePlanted(t *testing.T) {
	dir := t.TempDir()
	real, dst := filepath.Join(dir, "real"), filepath.Join(dir, "copy")
	for _, d := range []string{real, dst} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	seed := []string{"auth.json", "config.toml", "AGENTS.md", "installation_id"}
	for _, n := range seed {
		if err := os.WriteFile(filepath.Join(real, n), []byte("real "+n), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fifo := filepath.Join(dir, "fifo")
	for _, p := range []string{fifo, filepath.Join(dst, "auth.json")} {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(fifo, filepath.Join(dst, "config.toml")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dst, "AGENTS.md", "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- seedCLIState(real, dst, seed) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		// Unblock the reader so that the test ends.
		for _, p := range []string{fifo, filepath.Join(dst, "auth.json")} {
			if f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
		}
		t.Fatal("seedCLIState hangs on a FIFO the session planted in its copy")
	}
	for _, n := range []string{"auth.json", "config.toml", "installation_id"} {
		fi, err := os.Lstat(filepath.Join(dst, n))
		if err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s in the copy: %v %v, want the real one's file", n, fi, err)
			continue
		}
		if b, _ := os.ReadFile(filepath.Join(dst, n)); string(b) != "real "+n {
			t.Errorf("%s in the copy: %q", n, b)
		}
	}
}

// The user manager's unit and environment directories stay out of a session's reach even when
// [sandbox] writable covers ~/.config: a drop-in planted there (cryo-*.service.d/x.conf with
// ExecStartPre=) would be loaded by the daemon-reload of the next wake and run unconfined.
func TestSandboxPolicyUnitDirs(t *testing.T) {
	base := t.TempDir()
	home, cfgHome := filepath.Join(base, "home"), filepath.Join(base, "cfg")
	units := []string{filepath.Join(home, ".config/systemd"), filepath.Join(cfgHome, "systemd"),
		filepath.Join(home, ".config/environment.d"), filepath.Join(home, ".local/share/systemd")}
	for _, d := range append(units, filepath.Join(home, ".config/app")) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := testRunner(t, "agent = \"./agent.sh\"\n[sandbox]\nwritable = [\"~/.config\", \""+cfgHome+"\"]\n", time.Now())
	r.env.Environ = append(r.env.Environ, "HOME="+home, "XDG_CONFIG_HOME="+cfgHome)
	env := []string{"HOME=" + home, "PATH=/usr/bin:/bin"}
	p := r.sandboxPolicy(Command{Words: []string{"./agent.sh"}}, env)
	if err := p.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
	args := strings.Join(sandbox.BwrapArgs(p, []string{"/bin/true"}), "\n")
	for _, u := range units {
		if !strings.Contains(args, "--tmpfs\n"+u+"\n") {
			t.Errorf("%s is not hidden in the cage:\n%s", u, args)
		}
	}
	r.cfg.Sandbox.Writable = []string{"~/.config/systemd/user"}
	if err := r.sandboxPolicy(Command{Words: []string{"./agent.sh"}}, env).Check(); err == nil {
		t.Errorf("a writable unit directory accepted")
	}
}

// The sockets of daemons that act as root for a group the user is often in (docker, libvirt,
// lxd, incus, podman's system service) are hidden: `docker run -v /:/host` through
// /run/docker.sock writes anywhere, outside any cage.
func TestSandboxPolicyHidesRootDaemons(t *testing.T) {
	r := testRunner(t, "agent = \"./agent.sh\"\n", time.Now())
	p := r.sandboxPolicy(Command{Words: []string{"./agent.sh"}}, []string{"HOME=/home/u", "PATH=/usr/bin:/bin"})
	for _, s := range []string{"/run/docker.sock", "/var/run/docker.sock", "/run/containerd", "/run/libvirt", "/var/run/libvirt",
		"/run/podman", "/var/snap/lxd/common/lxd/unix.socket", "/var/lib/lxd/unix.socket", "/var/lib/incus/unix.socket"} {
		if !slices.Contains(p.Hide, s) {
			t.Errorf("%s is not hidden", s)
		}
	}
}

// TestSandboxPolicyHidesSlurmAuth: munged's and sackd's sockets are hidden in the cage (the
// default places, and the socket the cluster's slurm.conf names, found through SLURM_CONF):
// through them a session could sbatch a job that runs outside any cage, or scancel the
// chamber's dead-man job.
func TestSandboxPolicyHidesSlurmAuth(t *testing.T) {
	r := testRunner(t, "agent = \"./agent.sh\"\n", time.Now())
	conf := filepath.Join(t.TempDir(), "slurm.conf")
	if err := os.WriteFile(conf, []byte("ClusterName=c\nAuthType=auth/munge\nAuthInfo=socket=/srv/munge/munge.sock,ttl=60 # ours\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := r.sandboxPolicy(Command{Words: []string{"./agent.sh"}}, []string{"HOME=/home/u", "PATH=/usr/bin:/bin", "SLURM_CONF=" + conf})
	for _, s := range []string{"/run/munge", "/var/run/munge", "/run/slurm", "/srv/munge/munge.sock"} {
		if !slices.Contains(p.Hide, s) {
			t.Errorf("%s is not hidden", s)
		}
	}
}

package binary

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/chamber"
	"github.com/cryochamber/cryochamber/internal/e2e"
	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// awkward holds every character that means something to systemd, a shell or XML.
const awkward = `we ird 100% $HOME ${X} "dq" 'sq' back\slash ünï ✓ [x]*? & <a> ;|$(id)`

// TestInjectionRealRun: a chamber path and an environment value full of characters that mean
// something to systemd (%, $, quotes, backslashes, globs) or a shell (; | $(...)) give units
// that pass `systemd-analyze verify` and that systemd really runs: the second session, started
// by the timer, sees the exact directory and the exact value.
func TestInjectionRealRun(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	dir := filepath.Join(t.TempDir(), awkward)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	agent := `#!/bin/sh
pwd > "pwd-$CRYO_SESSION.txt"
printf '%s' "$AWK" > "env-$CRYO_SESSION.txt"
printf '%s' "$CRYO_DIR" > "crydir-$CRYO_SESSION.txt"
echo "[CRYO:EXIT 0] ok"
if [ "$CRYO_SESSION" = 1 ]; then echo "[CRYO:WAKE +7s]"; fi
`
	fixture.WriteFiles(t, dir, fixture.Files{
		"plan.md":   "x\n",
		"cryo.toml": "agent = \"./agent.sh\"\nagent_env = [\"AWK\"]\nmin_interval = \"1s\"\n",
		"agent.sh":  agent,
	})
	value := awkward + " end"
	env := fixture.Env(m, "AWK="+value)
	if code, out := bin(t, env, dir, "start", filepath.Join(dir, "plan.md")); code != 0 {
		t.Fatalf("start: %d\n%s", code, out)
	}
	verifyInstalledUnits(t, m)

	fixture.WaitFor(t, 40*time.Second, "systemd to run session 2", func() bool {
		st, err := fixture.State(m, dir)
		return err == nil && st.Phase == chamber.PhaseComplete && st.Session == 2
	})
	for _, check := range []struct{ file, want string }{
		{"pwd-2.txt", dir + "\n"},
		{"crydir-2.txt", dir},
		{"env-2.txt", value},
	} {
		got, err := os.ReadFile(filepath.Join(dir, check.file))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != check.want {
			t.Errorf("%s under systemd = %q, want %q", check.file, got, check.want)
		}
	}
}

// TestInjectionNewlineRefused: a newline in a captured environment value is refused at start
// with a clear message, and nothing is armed.
func TestInjectionNewlineRefused(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	dir := filepath.Join(t.TempDir(), "chamber")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fixture.WriteFiles(t, dir, fixture.Files{
		"plan.md":   "x\n",
		"cryo.toml": "agent = \"./agent.sh\"\nagent_env = [\"MULTI\"]\n",
		"agent.sh":  "#!/bin/sh\necho '[CRYO:EXIT 0] ok'\n",
	})
	code, out := bin(t, fixture.Env(m, "MULTI=line one\nline two"), dir, "start", filepath.Join(dir, "plan.md"))
	if code != fixture.ExitUsage {
		t.Fatalf("start exited %d, want %d\n%s", code, fixture.ExitUsage, out)
	}
	for _, want := range []string{"cryochamber: cannot capture the environment", "MULTI", "hint: remove the newline"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if units, _ := filepath.Glob(filepath.Join(m.UnitDir, "cryo-*")); len(units) != 0 {
		t.Fatalf("units installed: %v", units)
	}
	if _, err := os.Stat(filepath.Join(dir, chamber.LogFile)); err == nil {
		t.Fatal("a session ran")
	}
}

// verifyInstalledUnits runs `systemd-analyze --user verify` on every cryo unit the manager has.
func verifyInstalledUnits(t *testing.T, m *systemdtest.Manager) {
	t.Helper()
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		e2e.SkipPart(t, "systemd-analyze", "systemd-analyze is not installed (Debian package systemd): the units are not verified offline: %v", err)
		return
	}
	units, _ := filepath.Glob(filepath.Join(m.UnitDir, "cryo-*"))
	if len(units) < 4 {
		t.Fatalf("want the wake, fallback and inbox units, got %v", units)
	}
	tmp := t.TempDir()
	runtime := filepath.Join(tmp, "runtime")
	if err := os.Mkdir(runtime, 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "systemd-analyze", append([]string{"--user", "--man=no", "verify"}, units...)...)
	cmd.Env = []string{"HOME=" + tmp, "XDG_RUNTIME_DIR=" + runtime, "XDG_CONFIG_HOME=" + filepath.Join(tmp, "config"), "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
	out, err := cmd.CombinedOutput()
	var problems []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line != "" && !strings.Contains(line, "/proc/1/root") && !strings.Contains(line, "running in chroot") {
			problems = append(problems, line)
		}
	}
	if err != nil || len(problems) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, strings.Join(problems, "\n"))
	}
}

// TestPermissionsAndSecrets: .cryo/ is 0700; timer.json, the environment file, the secrets file,
// the prompt, the log and todo.json are 0600. The alert secrets never reach the agent, and no
// secret appears in cryo.log, the prompt, timer.json or the unit files.
func TestPermissionsAndSecrets(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	dir := filepath.Join(t.TempDir(), "chamber")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	agent := `#!/bin/sh
env > agent-env.txt
echo "[CRYO:EXIT 0] ok"
echo '[CRYO:TODO +1h "later"]'
echo "[CRYO:WAKE +2h]"
`
	toml := `agent = "./agent.sh"
agent_env = ["AGENT_TOKEN"]

[[fallback]]
action = "webhook"
target = "http://127.0.0.1:9/never"

[email]
host = "127.0.0.1"
port = 25
tls = "none"
from = "cryo@example.com"
username = "cryo"
password_env = "SMTP_PASSWORD"

[webhook]
secret_env = "HOOK_SECRET"
`
	fixture.WriteFiles(t, dir, fixture.Files{"plan.md": "x\n", "cryo.toml": toml, "agent.sh": agent})
	const token, password, hookSecret = "agent-token-6f1d", "smtp-password-93ab", "hook-secret-c7e2"
	env := fixture.Env(m, "AGENT_TOKEN="+token, "SMTP_PASSWORD="+password, "HOOK_SECRET="+hookSecret)
	if code, out := bin(t, env, dir, "start", filepath.Join(dir, "plan.md")); code != 0 {
		t.Fatalf("start: %d\n%s", code, out)
	}
	// The environment file and the secrets live outside the chamber (the agent may write in it),
	// in the user's state directory.
	priv := filepath.Join(m.Home, ".local", "state", "cryochamber", "chambers", timer.ID(dir))
	modes := map[string]fs.FileMode{
		".cryo":           0o700 | fs.ModeDir,
		priv:              0o700 | fs.ModeDir,
		priv + "/env":     0o600,
		priv + "/secrets": 0o600,
		".cryo/prompt.md": 0o600,
		"timer.json":      0o600,
		"cryo.log":        0o600,
		"todo.json":       0o600,
	}
	for name, want := range modes {
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&(fs.ModePerm|fs.ModeDir) != want {
			t.Errorf("%s mode %v, want %v", name, fi.Mode(), want)
		}
	}
	agentEnv, _ := os.ReadFile(filepath.Join(dir, "agent-env.txt"))
	if !strings.Contains(string(agentEnv), "AGENT_TOKEN="+token) {
		t.Error("the agent did not get agent_env's variable")
	}
	for _, secret := range []string{password, hookSecret} {
		if strings.Contains(string(agentEnv), secret) {
			t.Errorf("the agent's environment holds the alert secret %q", secret)
		}
	}
	// No secret in any file that is not private, nor in the log, prompt, state or units.
	files := []string{"cryo.log", ".cryo/prompt.md", "timer.json", "todo.json"}
	units, _ := filepath.Glob(filepath.Join(m.UnitDir, "cryo-*"))
	for _, f := range files {
		units = append(units, filepath.Join(dir, f))
	}
	for _, f := range units {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{token, password, hookSecret} {
			if strings.Contains(string(data), secret) {
				t.Errorf("%s contains the secret %q", f, secret)
			}
		}
	}
	// The secrets are where they belong.
	secrets, _ := os.ReadFile(filepath.Join(priv, "secrets"))
	if !strings.Contains(string(secrets), password) || !strings.Contains(string(secrets), hookSecret) || strings.Contains(string(secrets), token) {
		t.Errorf("the secrets file holds the wrong variables")
	}
	// Nothing in the chamber holds a secret: the agent can read its chamber.
	_ = filepath.Walk(dir, func(p string, fi fs.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return nil
		}
		data, _ := os.ReadFile(p)
		for _, secret := range []string{password, hookSecret} {
			if strings.Contains(string(data), secret) && !strings.HasSuffix(p, "agent-env.txt") {
				t.Errorf("%s (in the chamber) contains the secret %q", p, secret)
			}
		}
		return nil
	})
	if code, out := bin(t, env, dir, "cancel", "--dir", dir); code != 0 {
		t.Fatal(out)
	}
}

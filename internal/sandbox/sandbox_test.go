package sandbox

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/e2e"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// tree makes a home with a secret, a chamber, a state directory and a scratch directory under
// one root, and the policy a session there gets.
func tree(t *testing.T) (string, Policy) {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"home/.ssh", "home/.claude", "home/chamber", "home/other", "home/.local/state/cryochamber/chambers/x", "tmp", "run/user/1000"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"home/.netrc", "home/.ssh/id_ed25519", "home/.local/state/cryochamber/seal.key", "home/other/secret.txt"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte("secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	home := filepath.Join(root, "home")
	return root, Policy{
		Chamber:   filepath.Join(home, "chamber"),
		Writable:  []string{filepath.Join(home, ".claude"), filepath.Join(home, ".claude.json"), filepath.Join(home, "missing")},
		Hide:      []string{filepath.Join(home, ".ssh"), filepath.Join(home, ".netrc"), filepath.Join(home, ".aws"), filepath.Join(home, "other"), filepath.Join(root, "run/user/1000")},
		Protected: []string{filepath.Join(home, ".local/state/cryochamber")},
		Scratch:   []string{filepath.Join(root, "tmp")},
		Visible:   []string{home, filepath.Join(home, ".ssh"), filepath.Join(home, ".local/state/cryochamber/chambers/x")},
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -update to rewrite):\n--- got\n%s--- want\n%s", name, got, want)
	}
}

// The bubblewrap command line: missing paths left out, from the shallowest path to the
// deepest, the state directory hidden last.
func TestBwrapArgsGolden(t *testing.T) {
	root, p := tree(t)
	args := BwrapArgs(p, []string{"/usr/bin/agent", "-p"})
	golden(t, "bwrap.golden", strings.ReplaceAll(strings.Join(args, "\n"), root, "$ROOT")+"\n")
}

// The Seatbelt profile of the same policy (docs/MACOS.md: scripts/macos-check.sh runs it on a
// Mac).
func TestSeatbeltProfileGolden(t *testing.T) {
	root, p := tree(t)
	golden(t, "seatbelt.golden", strings.ReplaceAll(SeatbeltProfile(p), root, "$ROOT"))
}

func TestCheck(t *testing.T) {
	_, p := tree(t)
	if err := p.Check(); err != nil {
		t.Fatalf("a sound policy refused: %v", err)
	}
	for name, mut := range map[string]func(p *Policy){
		"writable in state": func(p *Policy) { p.Writable = append(p.Writable, filepath.Join(p.Protected[0], "chambers")) },
		"state itself":      func(p *Policy) { p.Writable = append(p.Writable, p.Protected[0]) },
		"chamber in state":  func(p *Policy) { p.Chamber = filepath.Join(p.Protected[0], "c") },
		"relative":          func(p *Policy) { p.Hide = append(p.Hide, "rel/x") },
		"control":           func(p *Policy) { p.Hide = append(p.Hide, "/x\n(allow default)") },
	} {
		q := p
		q.Writable = append([]string(nil), p.Writable...)
		q.Hide = append([]string(nil), p.Hide...)
		mut(&q)
		if err := q.Check(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestFindMissing(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("bubblewrap is Linux's")
	}
	dir := t.TempDir()
	// A bwrap inside the chamber is never taken.
	if err := os.WriteFile(filepath.Join(dir, "bwrap"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := Find(dir, dir)
	if err == nil && p == filepath.Join(dir, "bwrap") {
		t.Fatalf("took %s from inside the chamber", p)
	}
	var se *Error
	if err != nil && (!errors.As(err, &se) || !strings.Contains(se.Hint, "apt install bubblewrap")) {
		t.Fatalf("error %v without the install hint", err)
	}
}

// A tool that cannot create the namespaces (here: one that fails as bwrap does when user
// namespaces are off) is reported with the hint, never skipped.
func TestProbeFails(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "bwrap")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := Probe(context.Background(), fake)
	var se *Error
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "non-privileged user namespaces") || !strings.Contains(se.Hint, "unprivileged_userns_clone=1") || !strings.Contains(se.Hint, `mode = "off"`) {
		t.Fatalf("Probe = %v (hint %q)", err, se)
	}
}

// The real cage: what a shell inside sees and may write.
func TestBwrapReal(t *testing.T) {
	tool := e2e.LookPath(t, "bwrap", "bubblewrap")
	if err := Probe(context.Background(), tool); err != nil {
		e2e.Skipf(t, "bubblewrap cannot run here: %v", err)
	}
	root, p := tree(t)
	script := `
cat "$R/home/.ssh/id_ed25519" 2>/dev/null && echo LEAK-ssh
cat "$R/home/.netrc" 2>/dev/null | grep -q secret && echo LEAK-netrc
ls -A "$R/home/.local/state/cryochamber" | grep -q . && echo LEAK-state
cat "$R/home/other/secret.txt" 2>/dev/null && echo LEAK-other
(echo x > "$R/home/written") 2>/dev/null && echo LEAK-write
echo x > "$R/home/chamber/ok" || echo NO-chamber-write
echo x > "$R/home/.claude/ok" || echo NO-claude-write
echo x > "$R/tmp/ok" || echo NO-scratch-write
test "$(pwd)" = "$R/home/chamber" || echo WRONG-cwd
test "$(ls /proc | grep -c '^[0-9]')" -lt 10 || echo LEAK-pids
true
`
	path, argv := (&Cage{Mechanism: Bubblewrap, Tool: tool, Policy: p}).Wrap([]string{"/bin/sh", "-c", script})
	cmd := exec.Command(path, argv[1:]...)
	cmd.Env = []string{"R=" + root, "PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("in the cage: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(p.Chamber, "ok")); err != nil {
		t.Errorf("the chamber write did not land: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "tmp", "ok")); err == nil {
		t.Errorf("the scratch directory is not private: the write landed outside")
	}
}

// A writable path the session can swap for a symlink (one inside another writable path, or in
// the chamber) is resolved when the cage is built: a symlink planted by the last session must
// not make the next one's cage bind cryochamber's state, another chamber or ~/.ssh writable.
// Check refuses it (the operator hears of it), and the mounts never show it.
func TestSymlinkedWritable(t *testing.T) {
	root, p := tree(t)
	home := filepath.Join(root, "home")
	cache := filepath.Join(home, ".cache")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"state":   filepath.Join(p.Protected[0], "chambers", "x"),
		"other":   filepath.Join(home, "other"),
		"ssh":     filepath.Join(home, ".ssh"),
		"runtime": filepath.Join(root, "run/user/1000"),
	} {
		t.Run(name, func(t *testing.T) {
			link := filepath.Join(cache, name)
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			q := p
			q.Writable = append([]string{cache, link}, p.Writable...)
			if err := q.Check(); err == nil || !strings.Contains(err.Error(), link) {
				t.Errorf("Check = %v, want the symlinked %s refused", err, link)
			}
			args := strings.Join(BwrapArgs(q, []string{"/bin/true"}), " ")
			if strings.Contains(args, "--bind "+target+" ") {
				t.Errorf("the cage binds %s writable:\n%s", target, args)
			}
			if strings.Contains(SeatbeltProfile(q), "(allow file-read* file-write* (subpath \""+target+"\"))") {
				t.Errorf("the Seatbelt profile lets %s be written", target)
			}
		})
	}
	// Named as it is by the operator, a writable path inside a hidden one is shown again (a
	// hidden ~/.config with a writable ~/.config/tool): that is the operator's own choice.
	q := p
	q.Writable = append([]string{filepath.Join(home, "other")}, p.Writable...)
	if err := q.Check(); err != nil {
		t.Errorf("a writable path named inside a hidden one refused: %v", err)
	}
}

// bwrap itself runs outside the cage: it is never taken from a directory a session may write
// (the chamber, a [sandbox] writable path such as ~/go or ~/.cargo whose bin is on PATH, a
// CLI-state copy), where the last session could have planted one that runs unconfined.
func TestSetupSkipsWritableBwrap(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("bubblewrap is Linux's")
	}
	e2e.LookPath(t, "bwrap", "bubblewrap")
	root := t.TempDir()
	chamber, gobin := filepath.Join(root, "chamber"), filepath.Join(root, "go", "bin")
	for _, d := range []string{chamber, gobin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		// A bwrap that runs anything it is given, unconfined.
		if err := os.WriteFile(filepath.Join(d, "bwrap"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := Policy{Chamber: chamber, Writable: []string{filepath.Join(root, "go")}}
	c, err := Setup(context.Background(), gobin+":"+chamber+":/usr/bin:/bin", chamber, p)
	if err != nil {
		e2e.Skipf(t, "bubblewrap cannot run here: %v", err)
	}
	if strings.HasPrefix(c.Tool, root) {
		t.Fatalf("took %s, which a session may write", c.Tool)
	}
}

// TestMain doubles as the `wake` TestStartOutlivesItsThread kills: with $CRYO_TEST_CAGE_SLEEP
// set, the test binary starts a cage running `sleep` with that argument through Cage.Start
// (from a thread other than the main one, which it keeps), and is killed by its own SIGKILL.
func TestMain(m *testing.M) {
	if arg := os.Getenv("CRYO_TEST_CAGE_SLEEP"); arg != "" {
		runtime.LockOSThread()
		c := &Cage{Mechanism: Bubblewrap, Tool: os.Getenv("CRYO_TEST_BWRAP"), Policy: Policy{Chamber: os.TempDir()}}
		path, argv := c.Wrap([]string{"/bin/sleep", arg})
		cmd := exec.Command(path, argv[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(cmd); err != nil {
			os.Exit(3)
		}
		time.Sleep(500 * time.Millisecond)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	if p := os.Getenv("CRYO_TEST_CONNECT"); p != "" {
		if c, err := net.Dial("unix", p); err == nil {
			c.Close()
			fmt.Println("reached")
		} else {
			fmt.Println("refused")
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A hidden socket (a daemon's that acts as root, /run/docker.sock) takes no connection from
// the cage: /dev/null is mounted on it.
func TestBwrapHidesSocket(t *testing.T) {
	tool := e2e.LookPath(t, "bwrap", "bubblewrap")
	if err := Probe(context.Background(), tool); err != nil {
		e2e.Skipf(t, "bubblewrap cannot run here: %v", err)
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, hide := range []bool{false, true} {
		p := Policy{Chamber: filepath.Join(dir)}
		if hide {
			p.Hide = []string{sock}
		}
		path, argv := (&Cage{Mechanism: Bubblewrap, Tool: tool, Policy: p}).Wrap([]string{os.Args[0]})
		cmd := exec.Command(path, argv[1:]...)
		cmd.Env = []string{"CRYO_TEST_CONNECT=" + sock}
		out, err := cmd.CombinedOutput()
		want := map[bool]string{false: "reached", true: "refused"}[hide]
		if err != nil || strings.TrimSpace(string(out)) != want {
			t.Errorf("hidden %v: %v %q, want %s", hide, err, out, want)
		}
	}
}

// sleeping reports whether a process runs `sleep arg`.
func sleeping(arg string) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && string(b) == "/bin/sleep\x00"+arg+"\x00" {
			return true
		}
	}
	return false
}

// Cage.Start enters the Landlock domain on a thread that ends once bubblewrap is started:
// bubblewrap's --die-with-parent must not take that thread's end for its parent's (the cage
// runs on), and the cage still ends with the process that started it: a `wake` killed by
// SIGKILL leaves no session running. (TestExecCageKillsAll covers the timeout.)
func TestStartOutlivesItsThread(t *testing.T) {
	tool := e2e.LookPath(t, "bwrap", "bubblewrap")
	if err := Probe(context.Background(), tool); err != nil {
		e2e.Skipf(t, "bubblewrap cannot run here: %v", err)
	}
	c := &Cage{Mechanism: Bubblewrap, Tool: tool, Policy: Policy{Chamber: t.TempDir()}}
	path, argv := c.Wrap([]string{"/bin/sh", "-c", "sleep 1; echo done"})
	cmd := exec.Command(path, argv[1:]...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := c.Start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil || out.String() != "done\n" {
		t.Fatalf("the cage: %v, %q", err, out.String())
	}

	arg := fmt.Sprintf("%d.5", 4000+os.Getpid()%1000)
	wake := exec.Command(os.Args[0])
	wake.Env = append(os.Environ(), "CRYO_TEST_CAGE_SLEEP="+arg, "CRYO_TEST_BWRAP="+tool)
	if err := wake.Run(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("the helper wake: %v, want it killed", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for sleeping(arg) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if sleeping(arg) {
		t.Fatalf("the cage's `sleep %s` outlived the wake that started it", arg)
	}
}

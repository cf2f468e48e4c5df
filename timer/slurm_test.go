package timer

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/timer/slurmtest"
)

// The job script's words go through sh: whatever a path holds, sh gives back the same words.
func FuzzShellQuote(f *testing.F) {
	for _, s := range []string{"", "a b", "'", "''", `"$(touch /tmp/x)"`, "`id`", "a\nb", "\\", "$HOME", "-c", "*", "!x", "a'b'c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.ContainsRune(s, 0) {
			return
		}
		out, err := exec.Command("/bin/sh", "-c", "printf '%s' "+shellQuote(s)).Output()
		if err != nil {
			t.Fatalf("sh: %v", err)
		}
		if string(out) != s {
			t.Fatalf("sh read %q back as %q", s, out)
		}
	})
}

func TestCheckSbatchArg(t *testing.T) {
	for _, ok := range []string{"--qos=low", "--time=4:00:00", "--mem=2G", "-N1", "--constraint=a,b", "--mail-user=a@b.c"} {
		if err := CheckSbatchArg(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for arg, want := range map[string]string{
		"qos=low":             "is not an sbatch option",
		"--qos=low high":      `contains ' '`,
		"--qos=\"x\"":         `contains '"'`,
		"--qos=x\n#SBATCH -J": `contains '\n'`,
		"--begin=now":         "cryochamber sets --begin itself",
		"--job-name=x":        "cryochamber sets --job-name itself",
		"-Jx":                 "cryochamber sets -J itself",
		"--dependency=none":   "cryochamber sets --dependency itself",
		"--wrap=id":           "cryochamber sets --wrap itself",
		"--output=/tmp/x":     "cryochamber sets --output itself",
		"--export=ALL":        "cryochamber sets --export itself",
		"--qos=$(id)":         `contains '$'`,
		"--wra=id":            "cryochamber sets --wrap itself",
		"--dep=singleton":     "cryochamber sets --dependency itself",
		"--begi=now":          "cryochamber sets --begin itself",
	} {
		err := CheckSbatchArg(arg)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckSbatchArg(%q) = %v, want %q", arg, err, want)
		}
	}
}

// A chamber path with quotes, spaces, a newline and a command substitution reaches the
// program as one argument, unchanged, and runs nothing else.
func TestSlurmScriptQuotesEveryWord(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "it's a \"dir\" $(touch pwned) `touch pwned2`\nx")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	printer := filepath.Join(tmp, "printer")
	if err := os.WriteFile(printer, []byte("#!/bin/sh\nfor a in \"$@\"; do printf '%s\\0' \"$a\"; done > \"$OUT\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(tmp, "args")
	c := Chamber{ID: ID(dir), Dir: dir, Env: []string{"OUT=" + out, "HOME=" + tmp + "/h'o$me"}, Cluster: []string{"--qos=low"}}
	argv := []string{printer, "wake", "--dir", dir}
	data, err := SlurmScript(c, Wake, argv, 0, "/usr/bin/sbatch", filepath.Join(tmp, "wake.sh"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte("#SBATCH --qos=low\n")) || !bytes.Contains(data, []byte("#SBATCH --job-name="+c.ID+"-wake\n")) {
		t.Fatalf("script lacks its #SBATCH lines:\n%s", data)
	}
	cmd := exec.Command("/bin/sh", "-c", string(data))
	cmd.Dir = tmp
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("script: %v\n%s", err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Join(argv[1:], "\x00") + "\x00"; string(got) != want {
		t.Fatalf("the program got %q, want %q", got, want)
	}
	for _, f := range []string{"pwned", "pwned2"} {
		if _, err := os.Stat(filepath.Join(tmp, f)); err == nil {
			t.Fatalf("the script ran a command substitution of the path (%s exists)", f)
		}
	}
	if _, err := SlurmScript(Chamber{ID: c.ID, Dir: dir, Cluster: []string{"--qos=x y"}}, Wake, argv, 0, "/usr/bin/sbatch", "/x.sh", nil); err == nil {
		t.Fatal("an extra argument with a space was written into an #SBATCH line")
	}
}

func newSlurm(t *testing.T, c *slurmtest.Cluster) *slurmBackend {
	t.Helper()
	be, err := NewSlurm(context.Background(), SlurmOptions{JobDir: filepath.Join(t.TempDir(), "jobs"), Environ: append([]string{"PATH=" + os.Getenv("PATH")}, c.Env()...)})
	if err != nil {
		t.Fatal(err)
	}
	return be.(*slurmBackend)
}

func waitFile(t *testing.T, path string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %s", path, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Against a real cluster: an armed job is read back with its begin time, re-arming replaces
// it, RunNow starts it at once, Disarm leaves no job, and a sync chain runs again and again.
func TestSlurmBackend(t *testing.T) {
	cl := slurmtest.Start(t)
	be := newSlurm(t, cl)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "chamber one")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := Chamber{ID: ID(dir), Dir: dir, Env: []string{"PATH=" + os.Getenv("PATH")}}
	touch := func(name string) []string { return []string{"/usr/bin/touch", filepath.Join(dir, name)} }

	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	if err := be.Arm(ctx, c, Job{Kind: Wake, At: at, Argv: touch("woke")}, Job{Kind: Fallback, At: at.Add(time.Hour), Argv: touch("fell")}); err != nil {
		t.Fatal(err)
	}
	v, err := Check(ctx, be, c.ID, Wake, at)
	if err != nil || !v.OK {
		t.Fatalf("Check = %+v, %v", v, err)
	}
	if s := v.String(); !strings.HasPrefix(s, "slurm holds job ") || !strings.Contains(s, "→ next "+at.Format(time.RFC3339)) {
		t.Fatalf("readback says %q", s)
	}
	// Re-arming replaces the pending job: one job of the kind, at the new time.
	at2 := at.Add(time.Minute)
	if err := be.Arm(ctx, c, Job{Kind: Wake, At: at2, Argv: touch("woke")}); err != nil {
		t.Fatal(err)
	}
	jobs, err := be.Jobs(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || jobs[1].Name != c.ID+"-wake" || jobs[1].Begin == nil || !jobs[1].Begin.Equal(at2) {
		t.Fatalf("jobs after re-arming: %+v", jobs)
	}
	ins, err := be.Installed(ctx)
	if err != nil || len(ins) != 1 || ins[0].ID != c.ID || ins[0].Dir != dir || len(ins[0].Kinds) != 2 {
		t.Fatalf("Installed = %+v, %v", ins, err)
	}
	// RunNow: the pending wake begins now.
	if err := be.RunNow(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(dir, "woke"), 30*time.Second)
	if _, ok, err := be.Next(ctx, c.ID, Wake); ok || err != nil {
		t.Fatalf("after its run the wake job is still pending (%v)", err)
	}
	// RunNow without a pending job submits one.
	os.Remove(filepath.Join(dir, "woke"))
	if err := be.RunNow(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(dir, "woke"), 30*time.Second)

	// A job armed for a time already past, behind a running job of its name (singleton): it
	// is read back as armed, due at once, and re-arming does not kill the running one.
	running := filepath.Join(dir, "alert-running")
	if err := be.Arm(ctx, c, Job{Kind: Alert, At: time.Now().UTC(), Argv: []string{"/bin/sh", "-c", "touch \"$0\"; sleep 5; touch \"$0.done\"", running}}); err != nil {
		t.Fatal(err)
	}
	waitFile(t, running, 30*time.Second)
	past := time.Now().Add(-10 * time.Second).UTC().Truncate(time.Second)
	if err := be.Arm(ctx, c, Job{Kind: Alert, At: past, Argv: touch("alerted")}); err != nil {
		t.Fatal(err)
	}
	if v, err := Check(ctx, be, c.ID, Alert, past); err != nil || !v.OK {
		t.Fatalf("a job due at once, behind a running one: %v, %v", v, err)
	}
	waitFile(t, running+".done", 30*time.Second)
	waitFile(t, filepath.Join(dir, "alerted"), 30*time.Second)
	// The same while the partition cannot start jobs: Slurm counts the job's eligible time
	// from its submission, not from the begin time asked for.
	cl.Run("scontrol", "update", "PartitionName=main", "State=DOWN")
	past = time.Now().Add(-10 * time.Second).UTC().Truncate(time.Second)
	if err := be.Arm(ctx, c, Job{Kind: Alert, At: past, Argv: touch("alerted-again")}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // a scheduler pass
	if v, err := Check(ctx, be, c.ID, Alert, past); err != nil || !v.OK {
		t.Fatalf("a job due at once, in a partition that is down: %v, %v", v, err)
	}
	cl.Run("scontrol", "update", "PartitionName=main", "State=UP")
	waitFile(t, filepath.Join(dir, "alerted-again"), 30*time.Second)

	if err := be.Disarm(ctx, c.ID, Fallback); err != nil {
		t.Fatal(err)
	}
	if err := be.Disarm(ctx, c.ID, Fallback); err != nil {
		t.Fatalf("disarming a missing job: %v", err)
	}
	if _, ok, err := Read(ctx, be, c.ID, Fallback); ok || err != nil {
		t.Fatalf("the fallback job is still there after Disarm (%v)", err)
	}

	// The sync chain: each run queues the next one.
	log := filepath.Join(dir, "sync.log")
	if err := be.ArmPoll(ctx, c, time.Second, []string{"/bin/sh", "-c", "echo x >> \"$0\"", log}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(40 * time.Second)
	for {
		data, _ := os.ReadFile(log)
		if bytes.Count(data, []byte("x")) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sync job did not run twice: %q\n%s", data, cl.Logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if ok, err := be.PollArmed(ctx, c.ID); !ok || err != nil {
		t.Fatalf("PollArmed = %v, %v", ok, err)
	}
	if err := be.DisarmPoll(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // a run under way at DisarmPoll cannot queue another
	if jobs, err := be.Jobs(ctx, c.ID); err != nil || len(jobs) != 0 {
		t.Fatalf("jobs left after DisarmPoll: %+v, %v", jobs, err)
	}
}

// With the controller down, squeue --json exits 0 with an empty job list and an "errors"
// entry: that is an unreachable manager, never "no timer" (cancel would say it removed jobs
// that are still pending).
func TestSlurmControllerDown(t *testing.T) {
	cl := slurmtest.Start(t)
	be := newSlurm(t, cl)
	ctx := context.Background()
	dir := t.TempDir()
	c := Chamber{ID: ID(dir), Dir: dir}
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	if err := be.Arm(ctx, c, Job{Kind: Wake, At: at, Argv: []string{"/bin/true"}}); err != nil {
		t.Fatal(err)
	}
	cl.StopController()
	if err := be.Preflight(ctx); err == nil || !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "DOWN") {
		t.Errorf("Preflight with the controller down = %v", err)
	}
	if _, ok, err := be.Read(ctx, c.ID, Wake); !errors.Is(err, ErrUnavailable) || ok {
		t.Errorf("Read with the controller down = %v, %v; want ErrUnavailable", ok, err)
	}
	if err := be.Disarm(ctx, c.ID, Wake); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Disarm with the controller down = %v; want ErrUnavailable", err)
	}
	if _, err := be.Installed(ctx); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Installed with the controller down = %v; want ErrUnavailable", err)
	}
	var he *HintError
	if _, _, err := be.Read(ctx, c.ID, Wake); !errors.As(err, &he) || !strings.Contains(he.Hint, "scontrol ping") {
		t.Errorf("no hint: %v", err)
	}
	cl.StartController()
	if v, err := Check(ctx, be, c.ID, Wake, at); err != nil || !v.OK {
		t.Fatalf("after the restart: %v, %v", v, err)
	}
}

package binary

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/slurmtest"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// End-to-end tests of backend = "slurm" against a private one-node Slurm cluster
// (timer/slurmtest): every session after the first is started by a Slurm batch job.

// slurmEnv is the environment of the commands of a test: a fresh HOME (so the private state
// is the test's) and the cluster's SLURM_CONF.
func slurmEnv(t *testing.T, c *slurmtest.Cluster) []string {
	home := t.TempDir()
	t.Cleanup(c.CancelAll) // before the directories go
	return append([]string{"PATH=" + os.Getenv("PATH"), "TZ=UTC", "LANG=C.UTF-8", "HOME=" + home}, c.Env()...)
}

func slurmChamber(t *testing.T, c *slurmtest.Cluster, agent, toml string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "lab chamber")
	t.Cleanup(c.CancelAll)
	fixture.WriteFiles(t, dir, fixture.Files{
		"plan.md": "x\n",
		// min_interval: the agents ask for wakes seconds away (the default bound is 1m).
		"cryo.toml": "agent = \"./agent.sh\"\nbackend = \"slurm\"\nmin_interval = \"1s\"\n" + toml,
		"agent.sh":  agent,
	})
	return dir
}

// slurmJobs are the jobs of the chamber in dir that the cluster holds (pending or running).
func slurmJobs(t *testing.T, c *slurmtest.Cluster, dir string) []string {
	t.Helper()
	out := c.Run("squeue", "--noheader", "--format=%j %T")
	var jobs []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, timer.ID(dir)+"-") {
			jobs = append(jobs, l)
		}
	}
	return jobs
}

// noJobsLeft: after cancel, a session that was still running finishes (it sees the cancel
// and removes what it armed), and then no job of the chamber is left.
func noJobsLeft(t *testing.T, c *slurmtest.Cluster, dir string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		j := slurmJobs(t, c, dir)
		if len(j) == 0 {
			return
		}
		ending := false // RUNNING, COMPLETING: Slurm shows a job for a moment after its script exits
		for _, l := range j {
			ending = ending || !strings.HasSuffix(l, " PENDING")
		}
		if !ending || time.Now().After(deadline) {
			t.Fatalf("cancel left jobs: %q", j)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func runsOf(dir string) string {
	data, _ := os.ReadFile(filepath.Join(dir, "runs.txt"))
	return string(data)
}

// Two sessions fired by Slurm jobs; validation reads the job back from squeue; status and ps
// show the jobs; cancel leaves none.
func TestSlurmSessionsAndCancel(t *testing.T) {
	t.Parallel()
	c := slurmtest.Start(t)
	env := slurmEnv(t, c)
	agent := `#!/bin/sh
echo "ran $CRYO_SESSION $(tr '\0' '\n' < /proc/$PPID/environ | grep '^SLURM_JOB_ID=')" >> runs.txt
echo "[CRYO:EXIT 0] session $CRYO_SESSION"
if [ "$CRYO_SESSION" -lt 3 ]; then echo "[CRYO:WAKE +3s]"; else echo "[CRYO:WAKE +1h]"; fi
`
	dir := slurmChamber(t, c, agent, "watch_inbox = false\n\n[slurm]\npartition = \"main\"\nextra_args = [\"--time=10:00\"]\n\n# The agent looks at its parent, the wake, by PID: a caged session has a PID namespace of its own\n# (the cage on a compute node: TestSlurmWakeSurvivesControllerRestart runs caged).\n[sandbox]\nmode = \"off\"\n")
	out := fixture.Must(t, 0, env, dir, "start", filepath.Join(dir, "plan.md"))
	if !strings.Contains(out, "slurm holds job ") || !strings.Contains(out, "→ next ") {
		t.Fatalf("start did not read the job back from Slurm:\n%s", out)
	}
	fixture.WaitFor(t, 60*time.Second, "sessions 2 and 3 started by Slurm jobs", func() bool { return strings.Contains(runsOf(dir), "ran 3 ") })
	runs := runsOf(dir)
	for _, l := range strings.Split(strings.TrimSpace(runs), "\n")[1:] {
		if f := strings.Fields(l); len(f) != 3 {
			t.Fatalf("a session after the first did not run in a Slurm job (no SLURM_JOB_ID):\n%s", runs)
		}
	}
	if strings.Contains(runs, "ran 4") {
		t.Fatalf("a session ran that was not due:\n%s", runs)
	}
	// The jobs' output (the wakes' validation) goes to the private state, as launchd's does.
	home := strings.TrimPrefix(env[3], "HOME=")
	jobOut, _ := os.ReadFile(filepath.Join(home, ".local", "state", "cryochamber", "chambers", timer.ID(dir), "launchd.out"))
	if n := strings.Count(string(jobOut), "slurm holds job "); n < 2 {
		t.Errorf("the validation of sessions 2 and 3 did not read their jobs back:\n%s", jobOut)
	}
	// The session armed its next wake and its dead-man as jobs.
	fixture.WaitFor(t, 20*time.Second, "the wake and dead-man jobs of session 3", func() bool {
		j := strings.Join(slurmJobs(t, c, dir), "\n")
		return strings.Contains(j, "-wake PENDING") && strings.Contains(j, "-fallback PENDING") && !strings.Contains(j, "RUNNING")
	})
	stdout := fixture.Must(t, 0, env, dir, "status", "--dir", dir, "--json")
	var st struct {
		Backend string            `json:"backend"`
		Jobs    []timer.SlurmJob  `json:"jobs"`
		Timers  []json.RawMessage `json:"timers"`
	}
	if err := json.Unmarshal([]byte(stdout), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, stdout)
	}
	if st.Backend != "slurm" || len(st.Jobs) != 2 {
		t.Fatalf("status --json: backend %q, jobs %+v", st.Backend, st.Jobs)
	}
	for _, j := range st.Jobs {
		if j.ID == 0 || !strings.HasPrefix(j.Name, timer.ID(dir)+"-") || j.Begin == nil || j.State != "PENDING" {
			t.Errorf("status --json job %+v: want its id, name and begin time", j)
		}
	}
	if out := fixture.Must(t, 0, env, dir, "status", "--dir", dir); !strings.Contains(out, "slurm job") || strings.Contains(out, "MISMATCH") {
		t.Errorf("status:\n%s", out)
	}
	if out := fixture.Must(t, 0, env, dir, "ps", "--backend", "slurm"); !strings.Contains(out, dir) {
		t.Errorf("ps --backend slurm does not list the chamber:\n%s", out)
	}
	fixture.Must(t, 0, env, dir, "cancel", "--dir", dir)
	noJobsLeft(t, c, dir)
}

// A session killed with SIGKILL (the agent kills its wake) is reported by the dead-man job.
func TestSlurmDeadManReportsKilledSession(t *testing.T) {
	t.Parallel()
	c := slurmtest.Start(t)
	env := slurmEnv(t, c)
	hooks := startHooks(t)
	agent := `#!/bin/sh
echo "ran $CRYO_SESSION" >> runs.txt
if [ "$CRYO_SESSION" = 2 ]; then kill -9 $PPID; sleep 1; fi
echo "[CRYO:EXIT 0] session $CRYO_SESSION"
if [ "$CRYO_SESSION" = 1 ]; then echo "[CRYO:WAKE +2s]"; else echo "[CRYO:WAKE +1h]"; fi
`
	dir := slurmChamber(t, c, agent, fmt.Sprintf(`watch_inbox = false
fallback_after = "5s"

[[fallback]]
action = "webhook"
target = %q

[webhook]
timeout = "5s"
retries = 0

# The agent kills its parent, the wake, by PID: a caged session has a PID namespace of its own
# (and cannot signal the wake: the point of the cage).
[sandbox]
mode = "off"
`, hooks.url("/hook")))
	fixture.Must(t, 0, env, dir, "start", filepath.Join(dir, "plan.md"))
	fixture.WaitFor(t, 60*time.Second, "the crashed alert from the dead-man job", func() bool {
		return hooks.count("/hook", `"reason":"crashed"`) == 1
	})
	if !strings.Contains(runsOf(dir), "ran 2") {
		t.Fatalf("session 2 did not run:\n%s", runsOf(dir))
	}
	fixture.Must(t, 0, env, dir, "cancel", "--dir", dir)
}

// A wake pending while slurmctld is down, and past due when it comes back, still runs.
func TestSlurmWakeSurvivesControllerRestart(t *testing.T) {
	t.Parallel()
	c := slurmtest.Start(t)
	env := slurmEnv(t, c)
	agent := `#!/bin/sh
echo "ran $CRYO_SESSION" >> runs.txt
echo "[CRYO:EXIT 0] session $CRYO_SESSION"
if [ "$CRYO_SESSION" = 1 ]; then echo "[CRYO:WAKE +6s]"; else echo "[CRYO:WAKE +1h]"; fi
`
	dir := slurmChamber(t, c, agent, "watch_inbox = false\n")
	fixture.Must(t, 0, env, dir, "start", filepath.Join(dir, "plan.md"))
	c.StopController()
	time.Sleep(8 * time.Second) // the wake falls due while the controller is down
	if strings.Contains(runsOf(dir), "ran 2") {
		t.Fatal("session 2 ran while the controller was down")
	}
	c.StartController()
	fixture.WaitFor(t, 60*time.Second, "session 2 after the controller's restart", func() bool { return strings.Contains(runsOf(dir), "ran 2") })
	fixture.Must(t, 0, env, dir, "cancel", "--dir", dir)
	noJobsLeft(t, c, dir)
}

// A message sent while the chamber sleeps wakes it through a job, long before its wake.
func TestSlurmInboxWake(t *testing.T) {
	t.Parallel()
	c := slurmtest.Start(t)
	env := slurmEnv(t, c)
	agent := `#!/bin/sh
echo "ran $CRYO_SESSION $(tr '\0' '\n' < /proc/$PPID/environ | grep '^SLURM_JOB_ID=')" >> runs.txt
echo "[CRYO:EXIT 0] session $CRYO_SESSION"
echo "[CRYO:WAKE +1h]"
`
	dir := slurmChamber(t, c, agent, "# The agent looks at its parent, the wake, by PID: a caged session has a PID namespace of its own\n# (the cage on a compute node: TestSlurmWakeSurvivesControllerRestart runs caged).\n[sandbox]\nmode = \"off\"\n")
	fixture.Must(t, 0, env, dir, "start", filepath.Join(dir, "plan.md"))
	fixture.Must(t, 0, env, dir, "send", "--dir", dir, "are the simulations done?")
	fixture.WaitFor(t, 60*time.Second, "session 2, woken by the message through a job", func() bool { return strings.Contains(runsOf(dir), "ran 2 ") })
	if f := strings.Fields(strings.Split(strings.TrimSpace(runsOf(dir)), "\n")[1]); len(f) != 3 {
		t.Fatalf("session 2 did not run in a Slurm job:\n%s", runsOf(dir))
	}
	// The session re-armed its wake an hour ahead.
	fixture.WaitFor(t, 20*time.Second, "the re-armed wake job", func() bool {
		return strings.Contains(strings.Join(slurmJobs(t, c, dir), "\n"), "-wake PENDING")
	})
	fixture.Must(t, 0, env, dir, "cancel", "--dir", dir)
	noJobsLeft(t, c, dir)
}

// With the controller down, start refuses before session 1 runs, says why and what to check,
// and neither runs the agent nor leaves a job; a bad [slurm] option is refused the same way.
func TestSlurmStartRefusals(t *testing.T) {
	t.Parallel()
	c := slurmtest.Start(t)
	env := slurmEnv(t, c)
	agent := "#!/bin/sh\necho ran >> runs.txt\necho '[CRYO:EXIT 0] x'\necho '[CRYO:WAKE +1h]'\n"
	dir := slurmChamber(t, c, agent, "[slurm]\nextra_args = [\"--time=1:00:00\", \"--dependency=afterok:1\"]\n")
	out := fixture.Must(t, 2, env, dir, "start", filepath.Join(dir, "plan.md"))
	if !strings.Contains(out, `slurm.extra_args: sbatch option "--dependency=afterok:1": cryochamber sets --dependency itself`) {
		t.Errorf("start with a bad [slurm] option:\n%s", out)
	}
	if err := os.WriteFile(filepath.Join(dir, "cryo.toml"), []byte("agent = \"./agent.sh\"\nbackend = \"slurm\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.StopController()
	code, out := bin(t, env, dir, "start", filepath.Join(dir, "plan.md"))
	if code == 0 || !strings.Contains(out, "cryochamber: no timer could be armed after session 1") || !strings.Contains(out, "hint: check that slurmctld runs (`scontrol ping`)") {
		t.Errorf("start with the controller down: exit %d\n%s", code, out)
	}
	if runsOf(dir) != "" {
		t.Errorf("session 1 ran although no timer could be armed after it:\n%s", runsOf(dir))
	}
	c.StartController()
	if j := slurmJobs(t, c, dir); len(j) != 0 {
		t.Errorf("jobs after the refusals: %q", j)
	}
}

// `ps` asks the default backend for its timers, and each chamber's own backend about that
// chamber: a Slurm chamber beside systemd ones is armed, not "orphaned".
func TestSlurmChamberInPlainPs(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	c := slurmtest.Start(t)
	env := append(fixture.Env(m), c.Env()...)
	t.Cleanup(c.CancelAll)
	agent := "#!/bin/sh\necho '[CRYO:EXIT 0] x'\necho '[CRYO:WAKE +1h]'\n"
	dir := slurmChamber(t, c, agent, "watch_inbox = false\n")
	fixture.Must(t, 0, env, dir, "start", filepath.Join(dir, "plan.md"))
	out := fixture.Must(t, 0, env, dir, "ps", "--json")
	var rows []struct {
		Dir, State, Problem string
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("ps --json: %v\n%s", err, out)
	}
	if len(rows) != 1 || rows[0].Dir != dir || rows[0].State != "armed" {
		t.Fatalf("ps --json (systemd, the default) on a Slurm chamber:\n%s", out)
	}
	fixture.Must(t, 0, env, dir, "cancel", "--dir", dir)
	noJobsLeft(t, c, dir)
}

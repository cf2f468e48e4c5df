package chamber

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/e2e"
	"github.com/cryochamber/cryochamber/internal/sandbox"
	"github.com/cryochamber/cryochamber/timer/slurmtest"
)

// TestCageCannotSubmitSlurmJobs: on a real one-node Slurm cluster, sbatch run by this process
// queues a job, and the same sbatch run in the session's cage (the chamber's policy) cannot:
// it gets no credential. The cluster lives in /srv (the cage's /tmp and /var/tmp are its own),
// where the cage sees it, as it sees a site's slurm.conf.
func TestCageCannotSubmitSlurmJobs(t *testing.T) {
	tool := e2e.LookPath(t, "bwrap", "bubblewrap")
	if err := sandbox.Probe(context.Background(), tool); err != nil {
		e2e.Skipf(t, "bubblewrap cannot run here: %v", err)
	}
	base, err := os.MkdirTemp("/srv", "cryo-slurm-cage-") // /tmp and /var/tmp are the cage's own
	if err != nil {
		e2e.Skipf(t, "no directory outside /tmp for the cluster: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	t.Setenv("TMPDIR", base)
	c := slurmtest.Start(t)
	sbatch, _ := exec.LookPath("sbatch")
	env := []string{"HOME=/root", "PATH=/usr/bin:/bin", "SLURM_CONF=" + c.Conf}
	run := func(path string, argv []string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, path, argv...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	job := []string{"--parsable", "--begin=now+1hour", "--output=/dev/null", "--wrap=true"}
	if out, err := run(sbatch, job); err != nil {
		t.Fatalf("sbatch outside the cage: %v %s", err, out)
	}
	r := testRunner(t, "agent = \"./agent.sh\"\n", time.Now())
	p := r.sandboxPolicy(Command{Words: []string{"./agent.sh"}}, env)
	path, argv := (&sandbox.Cage{Mechanism: sandbox.Bubblewrap, Tool: tool, Policy: p}).Wrap(append([]string{sbatch}, job...))
	if _, err := os.Stat(filepath.Join(c.Dir, "munge.sock")); err != nil {
		t.Fatalf("the cluster's munge socket: %v", err)
	}
	out, err := run(path, argv[1:])
	t.Logf("in the cage: %v %s", err, out)
	if err == nil {
		t.Errorf("sbatch in the cage queued a job: %s", out)
	}
	c.CancelAll()
}

// Package slurmtest starts a private one-node Slurm cluster for tests, so that cryochamber's
// Slurm backend is tested against the real thing: a real munged, slurmctld and slurmd, real
// sbatch, squeue and scancel, jobs that really start at their begin time.
//
// Each Cluster lives in a fresh temporary directory: its own munge key and socket, its own
// slurm.conf (ports picked free, a scheduler that looks every second, state, spool, pid and
// log files), so clusters of parallel tests never meet, and nothing of the machine's own Slurm
// or munge is touched. Clients find it through SLURM_CONF (Env). The daemons talk over
// 127.0.0.1 (NodeAddr, SlurmctldHost's address), so a hostname that does not resolve does not
// matter; Slurm has no setting to listen on loopback only, and every message it accepts needs
// a credential of the cluster's own munge key.
//
// It needs root (slurmd runs jobs as their user), munged, slurmctld, slurmd and sbatch. Where
// any is missing, Start skips the test and says why (internal/e2e: under CRYO_REQUIRE_E2E=1
// that skip is a failure). A cluster that is started but does not come up fails the test.
// Every daemon it starts is ended by the PID in its pid file when the test ends.
package slurmtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/e2e"
)

// Bounds on every wait, so that a broken cluster fails a test instead of hanging it.
const (
	startTimeout = 30 * time.Second
	stopTimeout  = 10 * time.Second
	cmdTimeout   = 30 * time.Second
	pollEvery    = 100 * time.Millisecond
)

// Programs the cluster needs.
var programs = []string{"munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "scontrol", "sinfo"}

// Cluster is one running private cluster.
type Cluster struct {
	Dir  string // the temporary directory holding everything of the cluster
	Conf string // its slurm.conf: SLURM_CONF
	Node string // the node's name (this machine's hostname)
	t    testing.TB
}

// Env is what a client of the cluster needs in its environment.
func (c *Cluster) Env() []string { return []string{"SLURM_CONF=" + c.Conf} }

// Start starts a cluster for t and stops it when t ends.
func Start(t testing.TB) *Cluster {
	t.Helper()
	if runtime.GOOS != "linux" {
		e2e.Skipf(t, "a private Slurm cluster runs on Linux only")
	}
	if os.Geteuid() != 0 {
		e2e.Skipf(t, "a private Slurm cluster needs root (slurmd starts jobs as their user)")
	}
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			e2e.Skipf(t, "%s is not installed (apt-get install slurmctld slurmd slurm-client munge)", p)
		}
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		t.Fatalf("slurmtest: hostname: %v", err)
	}
	host, _, _ = strings.Cut(host, ".")
	dir, err := os.MkdirTemp("", "cryo-slurm-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Dir: dir, Conf: filepath.Join(dir, "slurm.conf"), Node: host, t: t}
	t.Cleanup(func() {
		c.Stop()
		if !t.Failed() {
			os.RemoveAll(dir)
		} else {
			t.Logf("slurmtest: the cluster's files are kept in %s", dir)
		}
	})
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"state", "spool"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	key := make([]byte, 1024)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "munge.key"), key, 0o400); err != nil {
		t.Fatal(err)
	}
	c.run("munged", "--force", "--socket="+c.path("munge.sock"), "--key-file="+c.path("munge.key"),
		"--pid-file="+c.path("munged.pid"), "--log-file="+c.path("munged.log"), "--seed-file="+c.path("munged.seed"))
	ports := freePorts(t, 2)
	conf := fmt.Sprintf(`# A private one-node cluster of slurmtest.
ClusterName=cryotest
SlurmctldHost=%[1]s(127.0.0.1)
SlurmctldPort=%[3]d
SlurmdPort=%[4]d
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=%[2]s/munge.sock
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
StateSaveLocation=%[2]s/state
SlurmdSpoolDir=%[2]s/spool
SlurmctldPidFile=%[2]s/slurmctld.pid
SlurmdPidFile=%[2]s/slurmd.pid
SlurmctldLogFile=%[2]s/slurmctld.log
SlurmdLogFile=%[2]s/slurmd.log
# The scheduler looks every second (the default is up to 60 s between full passes).
SchedulerParameters=sched_interval=1,bf_interval=1,sched_min_interval=100000
ReturnToService=2
MailProg=/bin/true
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
NodeName=%[1]s NodeAddr=127.0.0.1 CPUs=%[5]d RealMemory=1000 State=UNKNOWN
PartitionName=main Nodes=%[1]s Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
`, host, dir, ports[0], ports[1], runtime.NumCPU())
	if err := os.WriteFile(c.Conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	c.StartController()
	c.run("slurmd", "-N", host)
	deadline := time.Now().Add(startTimeout)
	for {
		out, err := c.Cmd("sinfo", "--noheader", "--format=%t").Output()
		if err == nil && strings.TrimSpace(string(out)) == "idle" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slurmtest: the node is not idle after %s (sinfo: %q, %v)\n%s", startTimeout, out, err, c.Logs())
		}
		time.Sleep(pollEvery)
	}
	return c
}

func (c *Cluster) path(name string) string { return filepath.Join(c.Dir, name) }

// Cmd is a Slurm client command against the cluster.
func (c *Cluster) Cmd(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), c.Env()...)
	return cmd
}

// Run runs a Slurm client command and returns its output; an error fails the test.
func (c *Cluster) Run(name string, args ...string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), c.Env()...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		c.t.Fatalf("slurmtest: %s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// run starts a daemon that forks into the background and waits for its pid file.
func (c *Cluster) run(name string, args ...string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), c.Env()...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		c.t.Fatalf("slurmtest: %s: %v\n%s\n%s", name, err, out.String(), c.Logs())
	}
	pidFile := c.path(name + ".pid")
	deadline := time.Now().Add(startTimeout)
	for c.pid(name) == 0 {
		if time.Now().After(deadline) {
			c.t.Fatalf("slurmtest: %s wrote no pid file %s within %s\n%s", name, pidFile, startTimeout, c.Logs())
		}
		time.Sleep(pollEvery)
	}
}

// pid is the live process named in the daemon's pid file, 0 for none.
func (c *Cluster) pid(name string) int {
	data, err := os.ReadFile(c.path(name + ".pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 || syscall.Kill(pid, 0) != nil {
		return 0
	}
	return pid
}

// StartController starts slurmctld (again): its pending jobs come back from StateSaveLocation.
func (c *Cluster) StartController() {
	c.t.Helper()
	_ = os.Remove(c.path("slurmctld.pid"))
	c.run("slurmctld")
	deadline := time.Now().Add(startTimeout)
	for c.Cmd("scontrol", "ping").Run() != nil {
		if time.Now().After(deadline) {
			c.t.Fatalf("slurmtest: slurmctld does not answer after %s\n%s", startTimeout, c.Logs())
		}
		time.Sleep(pollEvery)
	}
}

// StopController stops slurmctld, as a restart of the controller does; the node and munge go on.
func (c *Cluster) StopController() {
	c.t.Helper()
	if err := c.stop("slurmctld"); err != nil {
		c.t.Fatal(err)
	}
}

// stop ends the daemon by the pid in its pid file: SIGTERM, then SIGKILL.
func (c *Cluster) stop(name string) error {
	pid := c.pid(name)
	if pid == 0 {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for _, sig := range []syscall.Signal{syscall.SIGKILL, 0} {
		deadline := time.Now().Add(stopTimeout)
		for syscall.Kill(pid, 0) == nil {
			if time.Now().After(deadline) {
				break
			}
			time.Sleep(pollEvery)
		}
		if syscall.Kill(pid, 0) != nil {
			_ = os.Remove(c.path(name + ".pid"))
			return nil
		}
		if sig != 0 {
			_ = syscall.Kill(pid, sig)
		}
	}
	return fmt.Errorf("slurmtest: %s (pid %d) does not end", name, pid)
}

// Stop ends the daemons, slurmd first (it ends the jobs it runs), munged last.
func (c *Cluster) Stop() {
	for _, name := range []string{"slurmd", "slurmctld", "munged"} {
		if err := c.stop(name); err != nil {
			c.t.Error(err)
		}
	}
}

// Logs is the tail of the daemons' logs, for a failure message.
func (c *Cluster) Logs() string {
	var b strings.Builder
	for _, name := range []string{"munged.log", "slurmctld.log", "slurmd.log"} {
		data, err := os.ReadFile(c.path(name))
		if err != nil {
			continue
		}
		if len(data) > 4000 {
			data = data[len(data)-4000:]
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", name, data)
	}
	return b.String()
}

// freePorts asks the kernel for n free TCP ports on this machine.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// CancelAll cancels every job of the cluster and waits (a while) until none runs, so that a
// test's files are no longer written when its temporary directories are removed.
func (c *Cluster) CancelAll() {
	_ = c.Cmd("scancel", "--quiet", "--user="+strconv.Itoa(os.Getuid())).Run()
	deadline := time.Now().Add(stopTimeout)
	for time.Now().Before(deadline) {
		out, err := c.Cmd("squeue", "--noheader", "--format=%i").Output()
		if err != nil || strings.TrimSpace(string(out)) == "" {
			return
		}
		time.Sleep(pollEvery)
	}
}

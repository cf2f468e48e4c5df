package agent

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain doubles as the `wake` that TestOrphanedAgentGroup kills: with
// $CRYO_TEST_GROUP_FILE set, the test binary runs an agent through Exec, writes the agent's
// Group to that file as soon as it runs, and waits to be killed.
func TestMain(m *testing.M) {
	if out := os.Getenv("CRYO_TEST_GROUP_FILE"); out != "" {
		Exec(context.Background(), Run{
			Invocation: Invocation{Argv: []string{"/bin/sh", "-c", "sleep 300 & sleep 300 & wait"}, Env: []string{testPath}},
			Started: func(g Group) {
				data, _ := json.Marshal(g)
				_ = os.WriteFile(out+".tmp", data, 0o600)
				_ = os.Rename(out+".tmp", out)
			},
		})
		os.Exit(0)
	}
	if name := os.Getenv("CRYO_TEST_ABSTRACT_CONNECT"); name != "" {
		os.Exit(abstractConnect(name))
	}
	os.Exit(m.Run())
}

// TestOrphanedAgentGroup (issue 15, defect 7): when `wake` dies (kill -9) and launchd ends what
// is left of the job's process group, the agent runs on: it has a group of its own. The
// Group that Exec reported when the agent started is what ends it, and only it.
func TestOrphanedAgentGroup(t *testing.T) {
	file := filepath.Join(t.TempDir(), "group.json")
	wake := exec.Command(os.Args[0])
	wake.Env = append(os.Environ(), "CRYO_TEST_GROUP_FILE="+file)
	// The helper leads its own group, as a launchd job does.
	wake.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := wake.Start(); err != nil {
		t.Fatal(err)
	}
	var g Group
	deadline := time.Now().Add(20 * time.Second)
	for {
		data, err := os.ReadFile(file)
		if err == nil && json.Unmarshal(data, &g) == nil {
			break
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(-wake.Process.Pid, syscall.SIGKILL)
			_ = wake.Wait()
			t.Fatal("the helper never reported the agent's group")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(func() { _ = syscall.Kill(-g.PGID, syscall.SIGKILL) })
	if g.PGID == wake.Process.Pid || g.PGID <= 1 || !strings.Contains(g.Start, "/") {
		t.Fatalf("Started reported %+v (the wake is %d)", g, wake.Process.Pid)
	}

	// launchd's end of a job: SIGKILL to the job, SIGKILL to what is left of its group.
	_ = syscall.Kill(-wake.Process.Pid, syscall.SIGKILL)
	_ = wake.Wait()
	time.Sleep(100 * time.Millisecond)
	if !groupAlive(g.PGID) {
		t.Fatal("the agent died with its wake: the orphan this test is about did not happen")
	}

	// Recovery: a wrong start time is another group, left alone.
	other := g
	other.Start += "0"
	if ended, err := EndGroup(other, time.Second); ended || err != nil || !groupAlive(g.PGID) {
		t.Fatalf("EndGroup with another start time = %v, %v; the group alive: %v", ended, err, groupAlive(g.PGID))
	}
	if ended, err := EndGroup(Group{PGID: g.PGID}, time.Second); ended || err == nil || !groupAlive(g.PGID) {
		t.Fatalf("EndGroup without a start time = %v, %v", ended, err)
	}
	ended, err := EndGroup(g, 5*time.Second)
	if err != nil || !ended {
		t.Fatalf("EndGroup = %v, %v", ended, err)
	}
	if groupAlive(g.PGID) {
		t.Fatal("processes of the agent's group are still alive after EndGroup")
	}
	if ended, err := EndGroup(g, time.Second); ended || err != nil {
		t.Errorf("EndGroup of a group that is gone = %v, %v", ended, err)
	}
}

// TestEndGroupLeaderGone: a group whose leader exited while its children run on is still the
// same group (the id is not reused while the group exists) and is ended.
func TestEndGroupLeaderGone(t *testing.T) {
	var g Group
	done := make(chan Result, 1)
	go func() {
		done <- Exec(context.Background(), Run{
			Invocation: Invocation{Argv: []string{"/bin/sh", "-c", "sleep 300 & exit 0"}, Env: []string{testPath}},
			Grace:      time.Hour, // Exec would end the leftovers itself after Grace
			Started:    func(x Group) { g = x },
		})
	}()
	time.Sleep(300 * time.Millisecond)
	if g.PGID == 0 || !groupAlive(g.PGID) {
		t.Fatalf("group %+v not alive", g)
	}
	if _, err := procIdentity(g.PGID); err == nil {
		t.Fatal("the leader is still alive")
	}
	if ended, err := EndGroup(g, 5*time.Second); !ended || err != nil || groupAlive(g.PGID) {
		t.Fatalf("EndGroup = %v, %v, alive %v", ended, err, groupAlive(g.PGID))
	}
	<-done
}

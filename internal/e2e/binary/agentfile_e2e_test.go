package binary

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/chamber"
	"github.com/cryochamber/cryochamber/internal/e2e"
	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// Issue 28, one fsynced save fewer: the agent's start records its process group (with the
// session's dead-man and its block's offset) in agent.json in the private state directory,
// renamed into place without fsync, instead of a second fsynced save of state.json
// (chamber/agentfile.go). These trials kill the wake with SIGKILL while its agent runs, as the
// crash trials do, and check what the next wake makes of what is left.

// agentRecordJSON is agent.json as these tests read it (chamber/agentfile.go writes it).
type agentRecordJSON struct {
	Session int       `json:"session"`
	PID     int       `json:"pid"`
	Since   time.Time `json:"since"`
	Agent   struct {
		PGID  int    `json:"pgid"`
		Start string `json:"start"`
	} `json:"agent"`
	Fallback  *time.Time `json:"fallback"`
	LogOffset int64      `json:"log_offset"`
}

// orphanAgent, in the session that finds the file "orphan", records its pid (the leader of its
// process group) and a child's, waits until its wake has recorded its group (in the file the
// test names in "orphan": agent.json; unconfined, the agent can read it), kills its cryochamber
// parent and waits: an orphan group whose leader and child must both be ended before anything
// else runs.
const orphanAgent = `#!/bin/sh
echo "ran $CRYO_SESSION" >> runs.txt
if [ -e orphan ]; then
	record=$(cat orphan)
	rm orphan
	i=0
	until grep -q "\"pgid\":$$," "$record" 2>/dev/null || [ $i -ge 200 ]; do sleep 0.05; i=$((i+1)); done
	sleep 600 &
	echo $! > child.pid
	echo $$ > agent.pid
	kill -9 $PPID
	wait
	exit 0
fi
echo "[CRYO:EXIT 0] session $CRYO_SESSION"
echo "[CRYO:WAKE +1h]"
`

// orphanTrial starts a chamber, runs session 2 whose agent kills its wake, and returns the
// chamber, its environment and the orphan's pids (leader, child).
func orphanTrial(t *testing.T, m *systemdtest.Manager) (dir string, env []string, leader, child int) {
	t.Helper()
	// Unconfined: the agent kills its cryochamber parent (kill -9 $PPID), which a caged
	// session cannot see; and the cage would end with the wake, leaving no orphan to end.
	dir = fixture.Chamber(t, "agent = \"./agent.sh\"\nwatch_inbox = false\n\n[sandbox]\nmode = \"off\"\n", orphanAgent, nil)
	env = fixture.Env(m)
	fixture.Must(t, 0, env, dir, "start", filepath.Join(dir, "plan.md"))
	fixture.WriteFile(t, filepath.Join(dir, "orphan"), storeFile(m, dir, "agent.json"))
	if code, out := bin(t, env, dir, "wake", "--dir", dir, "--now"); code != -int(syscall.SIGKILL) {
		t.Fatalf("the wake whose agent kills it exited %d, want SIGKILL\n%s", code, out)
	}
	read := func(name string) int {
		var pid int
		fixture.WaitFor(t, 10*time.Second, "the agent's "+name, func() bool {
			data, err := os.ReadFile(filepath.Join(dir, name))
			pid, _ = strconv.Atoi(strings.TrimSpace(string(data)))
			return err == nil && pid > 0
		})
		return pid
	}
	leader, child = read("agent.pid"), read("child.pid")
	t.Cleanup(func() { _ = syscall.Kill(-leader, syscall.SIGKILL) })
	if !fixture.ProcessLives(leader) || !fixture.ProcessLives(child) {
		t.Fatalf("the orphan group %d is not running after the wake was killed", leader)
	}
	return dir, env, leader, child
}

// storeFile is a file of the chamber's private state directory.
func storeFile(m *systemdtest.Manager, dir, name string) string {
	return filepath.Join(filepath.Dir(chamber.StatePath(fixture.StateDir(m), dir)), name)
}

// ranOnce fails the test when a session number ran twice.
func ranOnce(t *testing.T, dir string) {
	t.Helper()
	runs, _ := os.ReadFile(filepath.Join(dir, "runs.txt"))
	seen := map[string]bool{}
	for _, l := range strings.Fields(strings.ReplaceAll(string(runs), "ran", "")) {
		if seen[l] {
			t.Fatalf("session %s ran twice:\n%s", l, runs)
		}
		seen[l] = true
	}
}

// TestOrphanEndedFromAgentRecord: a wake killed with SIGKILL while its agent runs left the
// agent's process group in agent.json, not in state.json (no second fsynced save); the next
// wake ends that group, leader and child, before it does anything else, and no session runs
// twice. The same holds for a state written by an older build, which kept the group in
// state.json's holder.agent (an upgrade while a session runs).
func TestOrphanEndedFromAgentRecord(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	for _, how := range []string{"agent.json", "older build's state.json"} {
		t.Run(strings.ReplaceAll(how, " ", "_"), func(t *testing.T) {
			dir, env, leader, child := orphanTrial(t, m)
			raw, err := os.ReadFile(chamber.StatePath(fixture.StateDir(m), dir))
			if err != nil {
				t.Fatal(err)
			}
			var onDisk map[string]any
			if err := json.Unmarshal(raw, &onDisk); err != nil {
				t.Fatal(err)
			}
			holder, _ := onDisk["holder"].(map[string]any)
			if holder == nil || holder["agent"] != nil || onDisk["phase"] != "running" {
				t.Fatalf("state.json after the kill: phase %v holder %v; want the claim (running, a holder without an agent)", onDisk["phase"], holder)
			}
			rec, err := os.ReadFile(storeFile(m, dir, "agent.json"))
			if err != nil {
				t.Fatalf("no agent.json after the kill: %v", err)
			}
			var side agentRecordJSON
			if err := json.Unmarshal(rec, &side); err != nil || side.Session != 2 || side.Agent.PGID != leader || side.Agent.Start == "" {
				t.Fatalf("agent.json = %s (%v); want session 2's group %d with its start", rec, err, leader)
			}
			// Every reader sees the group, as the second save used to record it.
			if st, err := fixture.State(m, dir); err != nil || st.Holder == nil || st.Holder.Agent == nil || st.Holder.Agent.PGID != leader {
				t.Fatalf("the loaded state's holder: %+v (%v); want the agent's group %d", st.Holder, err, leader)
			}
			if how != "agent.json" {
				// What an older build left: the group in state.json, no agent.json.
				holder["agent"] = map[string]any{"pgid": side.Agent.PGID, "start": side.Agent.Start}
				data, _ := json.MarshalIndent(onDisk, "", "  ")
				if err := os.WriteFile(chamber.StatePath(fixture.StateDir(m), dir), data, 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Remove(storeFile(m, dir, "agent.json")); err != nil {
					t.Fatal(err)
				}
			}
			// Exit status 1: the crashed session is a failure, retried.
			code, out := bin(t, env, dir, "wake", "--dir", dir)
			if code != 1 {
				t.Fatalf("the recovering wake exited %d, want 1 (session 2 failed, retried)\n%s", code, out)
			}
			ended := fmt.Sprintf("recovering: ended the agent that session 2 left running (process group %d)", leader)
			crashed := "recovering: session 2 crashed"
			if i, j := strings.Index(out, ended), strings.Index(out, crashed); i < 0 || j < 0 || i > j {
				t.Fatalf("the recovery did not end the orphan group first (want %q before %q):\n%s", ended, crashed, out)
			}
			fixture.WaitFor(t, 10*time.Second, "the orphan's leader and child to be gone", func() bool {
				return !fixture.ProcessLives(leader) && !fixture.ProcessLives(child)
			})
			fixture.Must(t, 0, env, dir, "wake", "--dir", dir, "--now")
			ranOnce(t, dir)
			fixture.Must(t, 0, env, dir, "cancel", "--dir", dir)
		})
	}
}

// victimGroup starts another program of the user in a process group of its own and returns
// its pid and its identity as agent.Group records it ("<boot>/<start>").
func victimGroup(t *testing.T) (int, string) {
	t.Helper()
	victim := exec.Command("sleep", "600")
	victim.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = victim.Wait(); close(done) }()
	t.Cleanup(func() { _ = victim.Process.Kill(); <-done })
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		e2e.Skipf(t, "no boot id: %v", err)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", victim.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return victim.Process.Pid, strings.TrimSpace(string(boot)) + "/" + fields[19]
}

// TestAgentRecordDamagedOrStale: agent.json is written without fsync, so a power cut can leave
// it missing, empty or torn; and it is never removed, so it may name an earlier claim. None of
// these is an error: the next wake recovers the crashed session from the state alone, warns
// of nothing, signals nothing, and no session runs twice. A record of another session that
// names a live process group (another program of the user) leaves that program alone.
//
// The power cut is played by killing the orphan group before the record is spoilt.
func TestAgentRecordDamagedOrStale(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	for _, how := range []string{"missing", "empty", "garbage", "torn", "another session"} {
		t.Run(strings.ReplaceAll(how, " ", "_"), func(t *testing.T) {
			dir, env, leader, _ := orphanTrial(t, m)
			path := storeFile(m, dir, "agent.json")
			rec, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// The orphan group dies first: after a power cut nothing of the boot that wrote the
			// record runs; and a stale record must not matter whatever runs.
			if err := syscall.Kill(-leader, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			fixture.WaitFor(t, 10*time.Second, "the orphan group to die", func() bool { return !fixture.ProcessLives(leader) })
			victim := 0
			switch how {
			case "another session":
				// Session 1's record, as if left from its run; the group it names is alive.
				var side map[string]any
				if err := json.Unmarshal(rec, &side); err != nil {
					t.Fatal(err)
				}
				pid, start := victimGroup(t)
				victim = pid
				side["session"] = 1
				side["agent"] = map[string]any{"pgid": pid, "start": start}
				rec, _ = json.Marshal(side)
			default:
				rec = map[string][]byte{"empty": nil, "garbage": []byte("\x00\x00\x00\x00\x00\x00"), "torn": rec[:len(rec)/2]}[how]
			}
			if how == "missing" {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(path, rec, 0o600); err != nil {
				t.Fatal(err)
			}
			st, err := fixture.State(m, dir)
			if err != nil {
				t.Fatalf("the state does not load beside a %s agent.json: %v", how, err)
			}
			if st.Holder == nil || st.Holder.Agent != nil {
				t.Fatalf("with a %s agent.json the holder is %+v; want the claim's, without an agent", how, st.Holder)
			}
			code, out := bin(t, env, dir, "wake", "--dir", dir)
			if code != 1 || !strings.Contains(out, "recovering: session 2 crashed") {
				t.Fatalf("the recovering wake beside a %s agent.json exited %d\n%s", how, code, out)
			}
			// (Its one warning is the lock taken over from the killed wake.)
			if strings.Contains(out, "agent.json") || strings.Contains(out, "process group") || strings.Contains(out, "cannot end") {
				t.Fatalf("the recovery beside a %s agent.json warned of it or signalled:\n%s", how, out)
			}
			if victim != 0 && !fixture.ProcessLives(victim) {
				t.Fatalf("the recovery ended process group %d, named by another session's record", victim)
			}
			fixture.Must(t, 0, env, dir, "wake", "--dir", dir, "--now")
			ranOnce(t, dir)
			if st, err := fixture.State(m, dir); err != nil || st.Phase != chamber.PhaseArmed || st.Holder != nil {
				t.Fatalf("after the recovery and a session: %+v %v; want armed, no holder", st, err)
			}
			fixture.Must(t, 0, env, dir, "cancel", "--dir", dir)
		})
	}
}

// straceLine is one line of `strace -f -y`: the thread, the call, its arguments and its result;
// a call that another thread's interrupted is split in two ("<unfinished ...>", then
// "<... resumed>"), and its first half is taken as the call.
var (
	straceLine       = regexp.MustCompile(`^(?:\d+ +)?(\w+)\((.*)\) += (-?\d+)`)
	straceUnfinished = regexp.MustCompile(`^(?:\d+ +)?(\w+)\((.*) <unfinished \.\.\.>$`)
)

// TestFsyncsOfASession counts the fsyncs of a real `wake --now` under strace: its state saves
// take four (the claim and the hibernation, each the file and its directory), the record of the
// agent's start none. Before agent.json, the agent's start was a third save: six.
func TestFsyncsOfASession(t *testing.T) {
	t.Parallel()
	strace := e2e.LookPath(t, "strace", "strace")
	m := systemdtest.Start(t)
	dir := fixture.Chamber(t, "agent = \"./agent.sh\"\nwatch_inbox = false\nmin_interval = \"1s\"\n", orphanAgent, nil)
	env := fixture.Env(m)
	fixture.Must(t, 0, env, dir, "start", filepath.Join(dir, "plan.md"))
	trace := filepath.Join(t.TempDir(), "strace.txt")
	cmd := exec.Command(strace, "-f", "-y", "-qq", "-e", "trace=fsync,fdatasync,rename,renameat,renameat2", "-o", trace,
		fixture.Binary(), "wake", "--dir", dir, "--now")
	cmd.Env, cmd.Dir = env, dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("strace cryochamber wake --now: %v\n%s", err, out)
	}
	store := filepath.Dir(chamber.StatePath(fixture.StateDir(m), dir))
	f, err := os.Open(trace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// fsyncs[name] counts the fsyncs of a save of the store's file name: of its temporary file,
	// and of the store directory after its rename (the latest rename into the store).
	fsyncs, renames, total := map[string]int{}, map[string]int{}, 0
	last := ""
	tmp := regexp.MustCompile(`^\.(.+)\.tmp-[^/]*$`)
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	var lines []string
	for sc.Scan() {
		l := sc.Text()
		lines = append(lines, l)
		var call, args string
		if mm := straceLine.FindStringSubmatch(l); mm != nil && mm[3] == "0" {
			call, args = mm[1], mm[2]
		} else if mm := straceUnfinished.FindStringSubmatch(l); mm != nil {
			call, args = mm[1], mm[2]
		}
		switch call {
		case "fsync", "fdatasync":
			total++
			i, j := strings.Index(args, "<"), strings.LastIndex(args, ">")
			if i < 0 || j < i {
				continue
			}
			path := args[i+1 : j]
			switch {
			case path == store:
				if last != "" {
					fsyncs[last]++
				}
			case filepath.Dir(path) == store:
				if mt := tmp.FindStringSubmatch(filepath.Base(path)); mt != nil {
					fsyncs[mt[1]]++
				}
			}
		case "rename", "renameat", "renameat2":
			// The target is the last quoted path of the call.
			q := regexp.MustCompile(`"([^"]*)"`).FindAllStringSubmatch(args, -1)
			if len(q) == 0 {
				continue
			}
			target := q[len(q)-1][1]
			if strings.HasPrefix(target, store+"/") || !strings.Contains(target, "/") && strings.Contains(args, "<"+store+">") {
				last = filepath.Base(target)
				renames[last]++
			}
		}
	}
	t.Logf("fsyncs by file of the private state: %v; renames: %v; fsyncs of the whole wake: %d", fsyncs, renames, total)
	if fsyncs["state.json"] != 4 || renames["state.json"] != 2 {
		t.Errorf("the state was saved %d times with %d fsyncs; want 2 saves, 4 fsyncs (the claim, the hibernation)\n%s",
			renames["state.json"], fsyncs["state.json"], strings.Join(lines, "\n"))
	}
	if renames["agent.json"] != 1 || fsyncs["agent.json"] != 0 {
		t.Errorf("agent.json was written %d times with %d fsyncs; want once, none", renames["agent.json"], fsyncs["agent.json"])
	}
	if st, err := fixture.State(m, dir); err != nil || st.Phase != chamber.PhaseArmed || st.Session != 2 {
		t.Fatalf("after the traced wake: %+v %v; want armed after session 2", st, err)
	}
}

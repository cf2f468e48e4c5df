package agent

import (
	"errors"
	"strings"
	"syscall"
	"time"
)

// Group identifies the process group of one agent run: Exec starts every agent as the leader
// of a group of its own, so that session_timeout ends all of it. The group is what outlives
// the process that ran Exec when that process dies (kill -9, a crash): under launchd nothing
// else ends it, as launchd only kills what is left of the job's own process group
// (launchd.plist(5), AbandonProcessGroup), and the agent left that group. systemd's control
// group does catch it; a Group is what recovery needs everywhere else.
type Group struct {
	PGID int `json:"pgid"`
	// Start is when the group's leader started, in the kernel's terms and with the boot it
	// belongs to ("<boot>/<start>"), so that a process group id the kernel has given to
	// another group since is not taken for this one. Empty where the OS cannot say.
	Start string `json:"start,omitempty"`
}

// groupPollEnd is how often EndGroup looks whether the group is gone.
const groupPollEnd = 20 * time.Millisecond

// EndGroup ends what is left of g: SIGTERM to the whole group, up to grace for it to go, then
// SIGKILL. It returns false, signalling nothing, when no process of g is left or when the id
// may now name another group: its leader is alive but started at another time, or the machine
// has restarted since g was recorded, or g has no Start to check. A process group id is not
// given to a new process while the group exists, so a group whose leader is gone, in the same
// boot, is still g.
func EndGroup(g Group, grace time.Duration) (bool, error) {
	if g.PGID <= 1 {
		return false, errors.New("no process group to end")
	}
	if !groupAlive(g.PGID) {
		return false, nil
	}
	boot, _, ok := strings.Cut(g.Start, "/")
	if g.Start == "" || !ok {
		return false, errors.New("the group was recorded without its start time: it cannot be told from another group with the same id, so it is left alone")
	}
	if now, err := bootIdentity(); err != nil || now != boot {
		return false, nil // another boot: the id is someone else's now
	}
	if id, err := procIdentity(g.PGID); err == nil && id != g.Start {
		return false, nil // a new leader with this id: another group
	}
	signalGroup(g.PGID, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for groupAlive(g.PGID) && time.Now().Before(deadline) {
		time.Sleep(groupPollEnd)
	}
	if groupAlive(g.PGID) {
		signalGroup(g.PGID, syscall.SIGKILL)
		for i := 0; i < 50 && groupAlive(g.PGID); i++ {
			time.Sleep(groupPollEnd)
		}
	}
	return true, nil
}

// procIdentity is "<boot>/<start>" for a live process: bootIdentity and when it started.
func procIdentity(pid int) (string, error) {
	boot, err := bootIdentity()
	if err != nil {
		return "", err
	}
	start, err := procStart(pid)
	if err != nil {
		return "", err
	}
	return boot + "/" + start, nil
}

package chamber

import (
	"bytes"
	"encoding/json"
	"os"
	"time"

	"github.com/cryochamber/cryochamber/agent"
	"github.com/cryochamber/cryochamber/internal/atomicfile"
)

// What a session records as its agent starts (issue 28: one fsynced save fewer).
//
// A session saves its state three times: the claim (before the agent), the agent's start, and
// the hibernation. The second recorded the agent's process group, so that a recovery after the
// wake was killed ends what it left running (launchd does not clean up a job's other process
// groups), with the session's dead-man and its block's offset, which became known since the
// claim. All three only matter within the boot that wrote them: after a power cut or a kernel
// crash the agent died with the machine (agent.EndGroup refuses a group of another boot),
// systemd's transient timers are gone (the boot unit's wake recovers and arms anew; a launchd
// dead-man that survives only runs that same recovery), and the offset is a hint the log
// reader checks. What a killed wake must leave behind, the page cache keeps: a file renamed
// into place is seen by the next process of the same boot without an fsync.
//
// So the agent's start writes agent.json in the private state directory, atomically (temporary
// file, rename) but without fsync, instead of a second fsynced save of state.json: four fsyncs
// a session instead of six. The record names the claim it completes (session, holder pid and
// start), and the one reader, store.load (state.go), lays it over a running state saved without
// a group: every command then sees the state as the old second save left it (recover ends the
// group, status shows the session's dead-man and the holder's group, the log is read from the
// block's offset). A record that is missing, empty or unparseable (what a power cut can leave
// of a file written without fsync), or that names another claim (a stale one: it is not
// removed when its session ends, which would cost a step at every hibernation; the next
// session's start removes it and writes its own), is no record: the state then says what the
// claim said, exactly what the old state said after a power cut before its second save, and
// after a power cut nothing of the boot that wrote it is running. A state.json that records a
// group itself is complete and the file is ignored: an older build's second save (an upgrade
// mid-session still ends the orphan), or a save of this session after its agent started (it
// carries the same fields, newer). A downgrade mid-session does not: an older build reads no
// agent.json, so its recovery ends no group, and under launchd the orphan agent survives
// (docs/RELIABILITY.md). `ps` caches states against state.json's identity
// (ps_cache.go) and reads none of these fields.
//
// When something else changed since the last save (a warning of a log moved aside, the alert
// timer of a notice that could not be delivered), the agent's start saves state.json as before,
// fsynced: what is durable stays durable.

// agentRecord is agent.json.
type agentRecord struct {
	Session int         `json:"session"`
	PID     int         `json:"pid"`   // the holder that started the agent (Holder.PID)
	Since   time.Time   `json:"since"` // and since when it held the lock (Holder.Since)
	Agent   agent.Group `json:"agent"`
	// Fallback is the state's dead-man timer as the session armed it (Timers.Fallback).
	Fallback  *time.Time `json:"fallback,omitempty"`
	LogOffset int64      `json:"log_offset"` // the session's block in cryo.log (State.LogOffset)
}

// maxAgentRecord bounds the read of agent.json (a record is about 200 bytes).
const maxAgentRecord = 4 << 10

// recordAgent is the agent's Started callback: it records the group the agent leads, with the
// session's dead-man and block offset, in agent.json; or in a durable save of the state when
// the state changed otherwise since its last save, or when agent.json cannot be written.
func (r *runner) recordAgent(g agent.Group) {
	h := r.st.Holder
	if h == nil {
		return
	}
	h.Agent = &g // later saves of this session record it in state.json (then agent.json is ignored)
	if r.agentOnly() {
		rec := agentRecord{Session: r.st.Session, PID: h.PID, Since: h.Since, Agent: g, Fallback: r.st.Timers.Fallback, LogOffset: r.st.LogOffset}
		data, err := json.Marshal(rec)
		if err == nil {
			// The record there is an earlier claim's (this claim records once), which every
			// reader ignores: it goes first, so that the new one is renamed into a free name.
			// Renamed over an existing file, ext4 writes the new file's data out at the rename
			// (auto_da_alloc), which costs about as much as the fsyncs saved (1.3 ms against
			// 1.5 ms measured here; 0.04 ms into a free name).
			_ = os.Remove(r.store.path(agentRecordName))
			err = atomicfile.WriteNoSync(r.store.path(agentRecordName), append(data, '\n'), 0o600, func() { r.env.checkpoint("agent-temp") })
		}
		if err == nil {
			return
		}
		r.warnf("cannot record the agent's process group in %s (%v): it is saved in the state", r.store.path(agentRecordName), err)
	}
	if err := r.save(); err != nil {
		r.warnf("%v", err)
	}
}

// agentOnly reports whether the state differs from what its last save wrote only in what
// agent.json records: the holder's agent group, the dead-man timer, the log offset.
func (r *runner) agentOnly() bool {
	if r.saved == nil || r.st.Holder == nil {
		return false
	}
	var last struct {
		Timers struct {
			Fallback *time.Time `json:"fallback"`
		} `json:"timers"`
		LogOffset int64   `json:"log_offset"`
		Holder    *Holder `json:"holder"`
	}
	if json.Unmarshal(r.saved, &last) != nil || last.Holder == nil {
		return false
	}
	c := *r.st
	h := *c.Holder
	h.Agent = last.Holder.Agent
	c.Holder = &h
	c.Timers.Fallback, c.LogOffset = last.Timers.Fallback, last.LogOffset
	data, err := c.marshal(r.st.Updated) // the time of the last save: only the content is compared
	return err == nil && bytes.Equal(data, r.saved)
}

// withAgent lays agent.json over st, a state just read from state.json, when st is the running
// claim that record completes (see above). It never fails: no usable record is no record.
func (s store) withAgent(st *State) {
	h := st.Holder
	if st.Phase != PhaseRunning || h == nil || h.Agent != nil {
		return
	}
	data, err := s.read(agentRecordName, maxAgentRecord)
	if err != nil {
		return // none (the agent has not started, or an older build ran it), or unreadable
	}
	var rec agentRecord
	if json.Unmarshal(data, &rec) != nil || rec.Agent.PGID <= 1 || rec.LogOffset < 0 {
		return // empty or torn (a power cut): nothing of that boot runs
	}
	if rec.Session != st.Session || rec.Session != h.Session || rec.PID != h.PID || !rec.Since.Equal(h.Since) {
		return // another claim's: an earlier session's, or this session's run before a recovery
	}
	g := rec.Agent
	h.Agent = &g
	st.Timers.Fallback = rec.Fallback
	st.LogOffset = rec.LogOffset
}

package chamber

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/agent"
)

// claimedRunner is a runner whose session 3 is claimed and saved (phase running, a holder
// without an agent), with the session's dead-man armed and its block begun since the claim,
// as a session stands when its agent starts.
func claimedRunner(t *testing.T) *runner {
	t.Helper()
	r := testRunner(t, "agent = \"/bin/true\"\n", t0)
	r.env.PID = 4242
	old := t0.Add(2 * time.Hour)
	r.st.Timers.Fallback = &old
	r.st.LogOffset = 100
	r.st.Holder = &Holder{PID: 4242, Session: 3, Since: t0, Command: "wake"}
	if err := r.save(); err != nil {
		t.Fatal(err)
	}
	deadman := t0.Add(time.Hour)
	r.st.Timers.Fallback = &deadman // startDeadman's join
	r.st.LogOffset = 512            // the block's header
	return r
}

func readStore(t *testing.T, r *runner, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(r.store.path(name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// The agent's start records its group, the session's dead-man and the block's offset in
// agent.json without saving state.json; load lays the record over the claim, so that every
// reader sees what the second save used to write.
func TestRecordAgentWritesTheSideFileOnly(t *testing.T) {
	r := claimedRunner(t)
	claim := readStore(t, r, stateName)
	g := agent.Group{PGID: 777, Start: "boot/123"}
	r.recordAgent(g)
	if got := readStore(t, r, stateName); !bytes.Equal(got, claim) {
		t.Fatalf("state.json was saved again:\n%s\nwant the claim:\n%s", got, claim)
	}
	if strings.Contains(string(claim), `"agent"`) {
		t.Fatalf("the claim records an agent:\n%s", claim)
	}
	st, err := r.store.load()
	if err != nil {
		t.Fatal(err)
	}
	if st.Holder == nil || st.Holder.Agent == nil || *st.Holder.Agent != g {
		t.Fatalf("loaded holder %+v; want the agent group %+v", st.Holder, g)
	}
	if st.Timers.Fallback == nil || !st.Timers.Fallback.Equal(t0.Add(time.Hour)) || st.LogOffset != 512 {
		t.Fatalf("loaded dead-man %v offset %d; want the session's (%s) and the block's (512)", st.Timers.Fallback, st.LogOffset, t0.Add(time.Hour))
	}
	if fi, err := os.Stat(r.store.path(agentRecordName)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("agent.json: %v %v; want mode 0600", fi, err)
	}
}

// When the state changed otherwise since the claim (here a warning: the log moved aside), the
// agent's start saves state.json as before, fsynced, with the group: what is durable stays so.
func TestRecordAgentSavesWhatElseChanged(t *testing.T) {
	r := claimedRunner(t)
	r.st.Warnings = append(r.st.Warnings, "cryo.log could not be used and was moved aside")
	g := agent.Group{PGID: 778, Start: "boot/124"}
	r.recordAgent(g)
	var saved State
	if err := json.Unmarshal(readStore(t, r, stateName), &saved); err != nil {
		t.Fatal(err)
	}
	if saved.Holder == nil || saved.Holder.Agent == nil || *saved.Holder.Agent != g || len(saved.Warnings) != 1 || saved.LogOffset != 512 {
		t.Fatalf("state.json holds %+v, warnings %v, offset %d; want the group, the warning and the block's offset saved", saved.Holder, saved.Warnings, saved.LogOffset)
	}
	if _, err := os.Stat(r.store.path(agentRecordName)); !os.IsNotExist(err) {
		t.Fatalf("agent.json written beside a full save: %v", err)
	}
}

// What load makes of agent.json: a record that completes the running claim is laid over it;
// anything else (missing, empty, torn, another claim's, a state that records a group itself, a
// state that is not running) leaves the state as saved, without an error.
func TestLoadWithAgentRecord(t *testing.T) {
	g := agent.Group{PGID: 777, Start: "boot/123"}
	deadman := t0.Add(time.Hour)
	good := agentRecord{Session: 3, PID: 4242, Since: t0, Agent: g, Fallback: &deadman, LogOffset: 512}
	enc := func(rec agentRecord) string {
		data, _ := json.Marshal(rec)
		return string(data)
	}
	with := func(f func(*agentRecord)) string {
		rec := good
		f(&rec)
		return enc(rec)
	}
	older := agent.Group{PGID: 555, Start: "boot/55"}
	cases := []struct {
		name   string
		file   *string // nil: no agent.json
		state  func(*State)
		want   *agent.Group
		laidOn bool // the dead-man and offset come from the record
	}{
		{"record", ptrStr(enc(good)), nil, &g, true},
		{"missing", nil, nil, nil, false},
		{"empty", ptrStr(""), nil, nil, false},
		{"torn", ptrStr(enc(good)[:20]), nil, nil, false},
		{"garbage", ptrStr("\x00\x00\x00\x00"), nil, nil, false},
		{"null", ptrStr("null"), nil, nil, false},
		{"another session", ptrStr(with(func(r *agentRecord) { r.Session = 2 })), nil, nil, false},
		{"another holder (a recovery's run of the same session)", ptrStr(with(func(r *agentRecord) { r.PID = 4243 })), nil, nil, false},
		{"another claim time", ptrStr(with(func(r *agentRecord) { r.Since = t0.Add(-time.Minute) })), nil, nil, false},
		{"no group", ptrStr(with(func(r *agentRecord) { r.Agent = agent.Group{PGID: 1} })), nil, nil, false},
		{"negative offset", ptrStr(with(func(r *agentRecord) { r.LogOffset = -1 })), nil, nil, false},
		{"older build's state.json with holder.agent", ptrStr(enc(good)), func(s *State) { s.Holder.Agent = &older }, &older, false},
		{"older build's state.json, no record", nil, func(s *State) { s.Holder.Agent = &older }, &older, false},
		{"not running", ptrStr(enc(good)), func(s *State) { s.Phase = PhaseArmed; w := t0; s.Wake = &w }, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := testRunner(t, "agent = \"/bin/true\"\n", t0)
			old := t0.Add(2 * time.Hour)
			st := &State{Version: stateVersion, Phase: PhaseRunning, Session: 3, LogOffset: 100,
				Timers: Timers{Fallback: &old}, Holder: &Holder{PID: 4242, Session: 3, Since: t0, Command: "wake"}}
			if c.state != nil {
				c.state(st)
			}
			data, err := json.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.store.write(stateName, data, nil); err != nil {
				t.Fatal(err)
			}
			if c.file != nil {
				if err := os.WriteFile(r.store.path(agentRecordName), []byte(*c.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := r.store.load()
			if err != nil {
				t.Fatalf("load: %v; a record that cannot be used is no record, never an error", err)
			}
			var agentGot *agent.Group
			if got.Holder != nil {
				agentGot = got.Holder.Agent
			}
			if (agentGot == nil) != (c.want == nil) || agentGot != nil && *agentGot != *c.want {
				t.Fatalf("agent %+v, want %+v", agentGot, c.want)
			}
			wantFB, wantOff := old, int64(100)
			if c.laidOn {
				wantFB, wantOff = deadman, 512
			}
			if got.Timers.Fallback == nil || !got.Timers.Fallback.Equal(wantFB) || got.LogOffset != wantOff {
				t.Fatalf("dead-man %v offset %d, want %s and %d", got.Timers.Fallback, got.LogOffset, wantFB, wantOff)
			}
		})
	}
}

func ptrStr(s string) *string { return &s }

// A record left by a wake killed while writing it (its temporary file) is removed by the next
// holder, like the state's.
func TestRemoveStaleAgentTemp(t *testing.T) {
	r := testRunner(t, "agent = \"/bin/true\"\n", t0)
	tmp := filepath.Join(string(r.store), "."+agentRecordName+".tmp-123")
	if err := os.WriteFile(tmp, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.removeStale()
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("the temporary agent.json is still there: %v", err)
	}
}

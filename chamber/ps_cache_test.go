package chamber

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeStateFile saves st as the chamber's state the way every save does: a new file renamed
// into place.
func writeStateFile(t *testing.T, env *Env, dir string, st *State) {
	t.Helper()
	s, err := storeFor(env, chamberID(dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ensure(); err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.write(stateName, data, nil); err != nil {
		t.Fatal(err)
	}
}

// The state cache answers a state parsed before while its file is the same, and reads a state
// saved since (even at the same size within the same second), and one removed since.
func TestStateCacheFollowsTheFile(t *testing.T) {
	base := t.TempDir()
	env := &Env{StateDir: filepath.Join(base, "state")}
	dir := filepath.Join(base, "chamber")
	wake := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	st := &State{Version: 1, Chamber: dir, ID: chamberID(dir), Phase: PhaseArmed, Session: 3, Wake: &wake}
	writeStateFile(t, env, dir, st)
	c := NewStateCache()
	got, err := c.load(env, dir)
	if err != nil || got.Session != 3 {
		t.Fatalf("first load = %+v, %v; want session 3", got, err)
	}
	again, err := c.load(env, dir)
	if err != nil || again != got {
		t.Fatalf("unchanged file: got a new parse (%p, %p), %v; want the cached one", again, got, err)
	}
	st.Session = 4 // same size, same second: only the new inode tells
	writeStateFile(t, env, dir, st)
	got, err = c.load(env, dir)
	if err != nil || got.Session != 4 {
		t.Fatalf("after a save: %+v, %v; want session 4", got, err)
	}
	s, _ := storeFor(env, chamberID(dir))
	if err := os.Remove(s.path(stateName)); err != nil {
		t.Fatal(err)
	}
	if got, err := c.load(env, dir); err == nil {
		t.Fatalf("after the state was removed: %+v; want an error", got)
	}
	var none *StateCache
	if got, err := none.load(env, dir); err == nil {
		t.Fatalf("nil cache, no state: %+v; want an error", got)
	}
}

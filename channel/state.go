package channel

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/internal/atomicfile"
	"github.com/cryochamber/cryochamber/internal/confined"
	"github.com/cryochamber/cryochamber/internal/flock"
)

// SyncDir is the directory of the sync state inside a chamber's private state directory
// (Env.StateDir/chambers/<id>/sync).
const SyncDir = "sync"

// stateVersion is bumped when the meaning of a field changes.
const stateVersion = 1

// maxStateFile bounds a state file: the maps in it are pruned (see prune).
const maxStateFile = 8 << 20

// Bounds of the per-channel memory.
const (
	keepSeen    = 2000                // remote messages remembered (the cursor covers older ones)
	keepThreads = 500                 // inbox messages whose thread data is kept
	keepSent    = 30 * 24 * time.Hour // outbox items remembered as published
)

// Cursor is where a channel's next pull starts.
type Cursor struct {
	UIDValidity uint32    `json:"uid_validity,omitempty"` // email: the mailbox's UIDVALIDITY
	UID         uint32    `json:"uid,omitempty"`          // email: the last UID read
	Since       time.Time `json:"since,omitempty"`        // github: the latest updated_at read
	// github: where a pull cut short at maxPages stopped (the next page's URL, on the API's
	// host), and the latest updated_at read in its pages; the next poll goes on from there.
	Next   string    `json:"next,omitempty"`
	Latest time.Time `json:"latest,omitempty"`
	LastID int64     `json:"last_id,omitempty"` // zulip: the last message ID read
}

// Seen is one remote message already handled.
type Seen struct {
	Inbox string    `json:"inbox,omitempty"` // the inbox message it became; "" if it was ignored
	At    time.Time `json:"at"`
}

// Pending is an item whose publication started and was not recorded: the sync that pushed it
// may have been killed. The next sync looks for it before publishing it again.
type Pending struct {
	ID  string    `json:"id"`
	Ref string    `json:"ref"`
	At  time.Time `json:"at"`
}

// Thread is an email thread's ends.
type Thread struct {
	Root string `json:"root,omitempty"` // the first Message-ID of the thread
	Last string `json:"last,omitempty"` // the latest one, ours or theirs
}

// State is what one channel of one chamber has synced. Only the holder of the sync lock writes
// it, always atomically.
type State struct {
	Version int    `json:"version"`
	Channel string `json:"channel"`
	// Start is when the channel was first synced: a new channel looks back Lookback from
	// there, and never publishes the outbox's older history.
	Start  time.Time `json:"start"`
	Cursor Cursor    `json:"cursor"`
	// Floor: outbox items named before it are not considered (they were published, or are
	// older than the channel; their records were pruned).
	Floor   time.Time           `json:"floor"`
	Seen    map[string]Seen     `json:"seen,omitempty"`
	Sent    map[string]string   `json:"sent,omitempty"` // outbox item ID → its identity on the service
	Pending *Pending            `json:"pending,omitempty"`
	Threads map[string][]string `json:"threads,omitempty"` // inbox ID → what a reply needs to thread under it
	Thread  Thread              `json:"thread,omitempty"`
	// Pins are the users accepted so far, with the account ID first seen under that name: a
	// login that later belongs to another account (renamed, then taken) is refused.
	Pins map[string]string `json:"pins,omitempty"`

	LastSync   time.Time `json:"last_sync"`
	LastOK     time.Time `json:"last_ok,omitempty"`
	LastError  string    `json:"last_error,omitempty"`
	RetryAfter time.Time `json:"retry_after,omitempty"`
	Pulled     int       `json:"pulled"`
	Pushed     int       `json:"pushed"`
	Ignored    int       `json:"ignored"`

	// max_per_day (issue 22): when the items of the last 24 hours were published, and when
	// the operator was last told that the cap bit.
	Published  []time.Time `json:"published,omitempty"`
	CapNoticed time.Time   `json:"cap_noticed,omitempty"`
	// Failures counts the failed polls in a row; DownTold is set once the operator was told
	// that the channel is down (down.go), until a poll succeeds again.
	Failures int  `json:"failures,omitempty"`
	DownTold bool `json:"down_told,omitempty"`
}

func newState(name string, now time.Time, lookback time.Duration) *State {
	start := now.UTC().Truncate(time.Second)
	return &State{Version: stateVersion, Channel: name, Start: start, Floor: start.Add(-lookback)}
}

func statePath(dir, name string) string { return filepath.Join(dir, name+".json") }

// loadState reads a channel's state; a missing file is a channel never synced (nil, nil).
func loadState(dir, name string) (*State, error) {
	f, err := os.Open(statePath(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := confined.ReadAll(f, f.Name(), maxStateFile)
	if err != nil {
		return nil, err
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	if st.Version != stateVersion || st.Channel != name {
		return nil, fmt.Errorf("%s: version %d of channel %q, want version %d of %q", f.Name(), st.Version, st.Channel, stateVersion, name)
	}
	return &st, nil
}

// save writes the state atomically, mode 0600.
func (st *State) save(dir string) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(statePath(dir, st.Channel), append(data, '\n'), 0o600)
}

// prune bounds the maps: the oldest seen messages and thread data beyond the limits, and the
// records of outbox items older than keepSent (whose names then fall below the floor).
func (st *State) prune(now time.Time) {
	if len(st.Seen) > keepSeen {
		keys := make([]string, 0, len(st.Seen))
		for k := range st.Seen {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return st.Seen[keys[i]].At.After(st.Seen[keys[j]].At) })
		for _, k := range keys[keepSeen:] {
			delete(st.Seen, k)
		}
	}
	if len(st.Threads) > keepThreads {
		ids := make([]string, 0, len(st.Threads))
		for id := range st.Threads {
			ids = append(ids, id)
		}
		sort.Strings(ids) // inbox IDs start with their time
		for _, id := range ids[:len(ids)-keepThreads] {
			delete(st.Threads, id)
		}
	}
	if floor := now.UTC().Add(-keepSent).Truncate(time.Second); floor.After(st.Floor) {
		st.Floor = floor
	}
	prefix := st.Floor.Format(namePrefixLayout)
	for id := range st.Sent {
		if id < prefix && !strings.HasPrefix(id, "session-") {
			delete(st.Sent, id)
		}
	}
}

// namePrefixLayout is how message names begin (message.NewID): their UTC time.
const namePrefixLayout = "20060102T150405"

// takeLock takes the sync lock of one chamber (flock(2) on sync/lock, never removed), without
// waiting: ErrBusy when another sync holds it.
func takeLock(dir string) (*flock.Lock, error) {
	l, err := flock.Try(filepath.Join(dir, "lock"))
	if errors.Is(err, flock.ErrBusy) {
		return nil, ErrBusy
	}
	return l, err
}

// syncRunning reports whether a sync holds the lock in dir: a pending publication then is one
// being made, not one cut short.
func syncRunning(dir string) bool {
	return flock.Held(filepath.Join(dir, "lock"))
}

// privateDir creates dir (and its parents) with mode 0700 and makes sure dir itself is 0700.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if fi.Mode().Perm() != 0o700 {
		return os.Chmod(dir, 0o700)
	}
	return nil
}

// SyncStatus is one channel's last sync, for `status` and the web page.
type SyncStatus struct {
	Channel    string    `json:"channel"`
	LastSync   time.Time `json:"last_sync"`            // the last attempt
	LastOK     time.Time `json:"last_ok,omitempty"`    // the last attempt without an error
	LastError  string    `json:"last_error,omitempty"` // "" when the last attempt succeeded
	RetryAfter time.Time `json:"retry_after,omitempty"`
	Pulled     int       `json:"pulled"`  // messages brought into the inbox, in total
	Pushed     int       `json:"pushed"`  // items published, in total
	Ignored    int       `json:"ignored"` // messages refused (strangers, automatic mail), in total
	Unsent     bool      `json:"unsent"`  // an item's publication was cut short and is retried
	Running    bool      `json:"running"` // a sync of the chamber holds its lock now
}

// LastSync reports each channel's last sync for the chamber whose private state directory is
// chamberState (Env.StateDir/chambers/<timer.ID(dir)>), in channel name order. A chamber never
// synced has none. A state file that cannot be read is reported as that channel's error.
func LastSync(chamberState string) ([]SyncStatus, error) {
	dir := filepath.Join(chamberState, SyncDir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	running := syncRunning(dir)
	var out []SyncStatus
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !e.Type().IsRegular() || !knownChannel(name) {
			continue
		}
		st, err := loadState(dir, name)
		if err != nil {
			out = append(out, SyncStatus{Channel: name, LastError: "cannot read the sync state: " + err.Error()})
			continue
		}
		if st == nil {
			continue
		}
		out = append(out, SyncStatus{
			Channel: name, LastSync: st.LastSync, LastOK: st.LastOK, LastError: st.LastError,
			RetryAfter: st.RetryAfter, Pulled: st.Pulled, Pushed: st.Pushed, Ignored: st.Ignored,
			Unsent: st.Pending != nil && !running, Running: running,
		})
	}
	return out, nil
}

func knownChannel(name string) bool {
	switch name {
	case "email", "github", "zulip":
		return true
	}
	return false
}

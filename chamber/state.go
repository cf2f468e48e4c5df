package chamber

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cryochamber/cryochamber/internal/atomicfile"
)

// StateFile is the name of a chamber's runtime state file.
const StateFile = "timer.json"

// stateVersion is bumped when the meaning of a field changes.
const stateVersion = 1

// maxStateSize bounds timer.json: it holds a few dozen fields.
const maxStateSize = 4 << 20

// Phase is where a chamber is in its life.
type Phase string

const (
	PhaseArmed     Phase = "armed"     // waiting for the OS timer
	PhaseRunning   Phase = "running"   // a session is in progress (or its process died)
	PhaseComplete  Phase = "complete"  // the plan is complete: no WAKE
	PhaseFailed    Phase = "failed"    // refused to hibernate or ran out of retries
	PhaseCancelled Phase = "cancelled" // `cryochamber cancel`
)

// Active reports whether the phase has (or should have) timers armed.
func (p Phase) Active() bool { return p == PhaseArmed || p == PhaseRunning }

// State is timer.json. Only the lock holder writes it, always atomically.
type State struct {
	Version int    `json:"version"`
	Chamber string `json:"chamber"` // absolute path when last armed
	ID      string `json:"id"`
	Backend string `json:"backend,omitempty"`
	Binary  string `json:"binary,omitempty"` // the cryochamber binary the timers run
	Plan    string `json:"plan,omitempty"`   // the plan file's name in the chamber

	Phase   Phase      `json:"phase"`
	Session int        `json:"session"`        // the last session started
	Wake    *time.Time `json:"wake,omitempty"` // when the next session is due (while running: when it was due)
	Reason  string     `json:"reason,omitempty"`
	// PlanWake is the latest WAKE marker's time. A session woken earlier (a TODO, a message)
	// is told it, so that it can keep the schedule.
	PlanWake *time.Time `json:"plan_wake,omitempty"`

	Agent   string `json:"agent,omitempty"`   // `start --agent` override ("" = cryo.toml's agent)
	Command string `json:"command,omitempty"` // the last CMD line ("" = the agent)
	Task    string `json:"task,omitempty"`
	Retries int    `json:"retries,omitempty"` // consecutive failed sessions

	Timers    Timers          `json:"timers"`
	Fallbacks []FallbackEntry `json:"fallbacks,omitempty"` // FALLBACK markers of the latest session
	Plans     []string        `json:"plans,omitempty"`     // PLAN notes of the latest session
	Last      *Outcome        `json:"last,omitempty"`
	Holder    *Holder         `json:"holder,omitempty"`
	Claimed   []string        `json:"claimed,omitempty"` // inbox messages claimed by the running session
	LogOffset int64           `json:"log_offset"`
	Warnings  []string        `json:"warnings,omitempty"` // for the next prompt (e.g. log moved aside)
	LastAlert *AlertRecord    `json:"last_alert,omitempty"`
	Updated   time.Time       `json:"updated"`
}

// Timers are the OS timers armed for the chamber, as last armed and read back.
type Timers struct {
	Wake     *time.Time `json:"wake,omitempty"`
	Fallback *time.Time `json:"fallback,omitempty"`
	Watch    bool       `json:"watch,omitempty"`
}

// Outcome is the result of a finished session.
type Outcome struct {
	Session int       `json:"session"`
	Exit    int       `json:"exit"`
	Summary string    `json:"summary,omitempty"`
	Reason  string    `json:"reason,omitempty"` // no-exit, crashed, timeout, agent-failed, invalid
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
}

// Holder is the process that holds (or last held) the chamber's lock.
type Holder struct {
	PID     int       `json:"pid"`
	Session int       `json:"session"`
	Since   time.Time `json:"since"`
	Command string    `json:"command,omitempty"` // wake, start, fallback
}

// AlertRecord is the last alert and how its delivery went.
type AlertRecord struct {
	At      time.Time `json:"at"`
	Session int       `json:"session"`
	Reason  string    `json:"reason"`
	Results []string  `json:"results,omitempty"`
	OK      bool      `json:"ok"`
}

// ErrNoState means the directory is not a chamber yet (no timer.json).
var ErrNoState = errors.New("no timer.json")

// StateError is a timer.json that cannot be read or parsed.
type StateError struct {
	Path string
	Err  error
}

func (e *StateError) Error() string { return fmt.Sprintf("%s: %v", e.Path, e.Err) }
func (e *StateError) Unwrap() error { return e.Err }

// LoadState reads dir/timer.json. A missing file is ErrNoState.
func LoadState(dir string) (*State, error) {
	path := filepath.Join(dir, StateFile)
	data, err := readBounded(path, maxStateSize)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoState
	}
	if err != nil {
		return nil, &StateError{path, err}
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, &StateError{path, fmt.Errorf("not valid JSON (%v); it is written atomically, so it was edited by hand or the disk is damaged", err)}
	}
	if err := s.check(); err != nil {
		return nil, &StateError{path, err}
	}
	return &s, nil
}

func (s *State) check() error {
	if s.Version != stateVersion {
		return fmt.Errorf("version %d is not %d (written by another cryochamber version?)", s.Version, stateVersion)
	}
	switch s.Phase {
	case PhaseArmed, PhaseRunning, PhaseComplete, PhaseFailed, PhaseCancelled:
	default:
		return fmt.Errorf("unknown phase %q", s.Phase)
	}
	if s.Session < 0 {
		return fmt.Errorf("negative session number %d", s.Session)
	}
	if s.Phase == PhaseArmed && s.Wake == nil {
		return fmt.Errorf("phase armed without a wake time")
	}
	if s.LogOffset < 0 {
		return fmt.Errorf("negative log offset")
	}
	return nil
}

// Save writes the state atomically (temp file, fsync, rename, fsync the directory), mode 0600.
// beforeRename, if set, runs between the synced temp file and the rename (crash tests).
func (s *State) Save(dir string, now time.Time, beforeRename func()) error {
	s.Version = stateVersion
	s.Updated = now.UTC().Truncate(time.Second)
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteHook(filepath.Join(dir, StateFile), append(data, '\n'), 0o600, beforeRename)
}

// Package fakestate is the on-disk state shared by the stand-in launchctl
// (timer/launchctltest/launchctl) and its test helper (timer/launchctltest): which jobs are
// loaded, what their plists said, and what happened to them. It exists only for tests and never
// talks to a real launchd.
package fakestate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// Environment variables the stand-in reads.
const (
	// EnvDir names the directory holding the state and the call log (required).
	EnvDir = "CRYO_FAKE_LAUNCHCTL_DIR"
	// EnvLinger, a number N: a bootout leaves the label registered for N more bootstrap
	// attempts, each answered "Bootstrap failed: 5: Input/output error" (bootout is
	// asynchronous on a real Mac).
	EnvLinger = "CRYO_FAKE_LAUNCHCTL_LINGER"
	// EnvESRCH=1: bootout of a label that is not loaded answers "Boot-out failed: 3: No such
	// process" (exit 3), as it does on macOS 26, instead of 113.
	EnvESRCH = "CRYO_FAKE_LAUNCHCTL_ESRCH"
	// EnvInProgress, a number N: bootout of a loaded job answers "Boot-out failed: 36:
	// Operation now in progress" and launchd still shows the job to the next N prints.
	EnvInProgress = "CRYO_FAKE_LAUNCHCTL_IN_PROGRESS"
)

// File names inside the directory of EnvDir.
const (
	StateFile = "state.json"
	CallsFile = "calls.jsonl" // one JSON array (the arguments after "launchctl") per line
)

// Job is one loaded job, as launchd would hold it after bootstrap.
type Job struct {
	Target           string            `json:"target"` // gui/<uid>/<label>
	Domain           string            `json:"domain"` // gui/<uid>
	Label            string            `json:"label"`
	Path             string            `json:"path"` // the plist it was loaded from
	Program          string            `json:"program"`
	Arguments        []string          `json:"arguments"`
	WorkingDirectory string            `json:"working_directory,omitempty"`
	Stdout           string            `json:"stdout,omitempty"`
	Stderr           string            `json:"stderr,omitempty"`
	Env              map[string]string `json:"env,omitempty"`
	Calendars        []map[string]int  `json:"calendars,omitempty"`
	WatchPaths       []string          `json:"watch_paths,omitempty"`
	RunAtLoad        bool              `json:"run_at_load,omitempty"`
	ProcessType      string            `json:"process_type,omitempty"`

	StartInterval int `json:"start_interval,omitempty"`

	Running  bool `json:"running,omitempty"`
	PID      int  `json:"pid,omitempty"`
	Runs     int  `json:"runs"`
	LastExit *int `json:"last_exit,omitempty"`
}

// State is everything the stand-in remembers between calls.
type State struct {
	Jobs      map[string]*Job `json:"jobs"`                // by target
	Lingering map[string]int  `json:"lingering,omitempty"` // target → bootstraps still refused
	Stopping  map[string]int  `json:"stopping,omitempty"`  // target → prints that still show a job booted out with 36
	Disabled  []string        `json:"disabled,omitempty"`  // targets launchd will not load (print-disabled lists them)
	// DisabledAnswer is what bootstrap of a disabled target answers: 119 (the default) or 5,
	// as it does on many Macs (see the bootstrap-disabled-5 reply).
	DisabledAnswer int `json:"disabled_answer,omitempty"`
	// DisabledLayout is how print-disabled writes a state: "modern" (=> disabled, macOS 14
	// and later; the default) or "legacy" (=> true).
	DisabledLayout string `json:"disabled_layout,omitempty"`
	// NoGUI, when set, makes the gui domain missing, as with nobody logged in to the desktop:
	// "112" or "125" is the status print and bootstrap answer with, "5" makes bootstrap answer
	// a bare 5 (print then answers 125).
	NoGUI  string   `json:"no_gui,omitempty"`
	Killed []string `json:"killed,omitempty"` // targets booted out while running
	Kicked []string `json:"kicked,omitempty"` // targets started by kickstart
	// Bootstraps counts the successful bootstraps of each target.
	Bootstraps map[string]int `json:"bootstraps,omitempty"`
}

// IsDisabled reports whether target was disabled.
func (s *State) IsDisabled(target string) bool { return slices.Contains(s.Disabled, target) }

// Load reads the state in dir; a missing file is an empty state.
func Load(dir string) (*State, error) {
	s := &State{}
	data, err := os.ReadFile(filepath.Join(dir, StateFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if err := json.Unmarshal(data, s); err != nil {
			return nil, fmt.Errorf("%s: %w", StateFile, err)
		}
	}
	if s.Jobs == nil {
		s.Jobs = map[string]*Job{}
	}
	if s.Lingering == nil {
		s.Lingering = map[string]int{}
	}
	if s.Stopping == nil {
		s.Stopping = map[string]int{}
	}
	if s.Bootstraps == nil {
		s.Bootstraps = map[string]int{}
	}
	return s, nil
}

// Save replaces the state in dir (write and rename, so a reader never sees half a file).
func (s *State) Save(dir string) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, StateFile+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, StateFile))
}

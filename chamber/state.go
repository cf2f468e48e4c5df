package chamber

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
	"unicode/utf8"

	"github.com/cryochamber/cryochamber/agent"
)

// StateFile is the name of the view of the state that the chamber holds for the agent to read.
// It is written at every save and never read back: the authoritative state is state.json in the
// private state directory.
const StateFile = "timer.json"

// stateVersion is bumped when the meaning of a field changes.
const stateVersion = 1

// maxStateSize bounds state.json. The writer keeps what it records far below it (see bound),
// so the state a writer saves is always one its reader accepts.
const maxStateSize = 4 << 20

// Bounds on what a state records from markers, so that years of sessions or one session with
// many markers never grow it past what its reader accepts.
const (
	maxPlanBytes  = 64 << 10 // all PLAN notes of a session together
	maxListItems  = 64       // plans, fallbacks, warnings
	maxItemBytes  = 4 << 10  // one warning or fallback message
	maxBatch      = 200      // messages one session claims; the rest wait for the next
	maxStateWarns = 16
)

// Phase is where a chamber is in its life.
type Phase string

const (
	PhaseArmed     Phase = "armed"     // waiting for the OS timer
	PhaseRunning   Phase = "running"   // a session is in progress (or its process died)
	PhaseComplete  Phase = "complete"  // the plan is complete: no WAKE
	PhaseFailed    Phase = "failed"    // refused to hibernate
	PhaseCancelled Phase = "cancelled" // `cryochamber cancel`
	PhasePaused    Phase = "paused"    // `cryochamber pause`: no timers, the schedule kept
)

// Active reports whether the phase has (or should have) timers armed.
func (p Phase) Active() bool { return p == PhaseArmed || p == PhaseRunning }

// State is the chamber's runtime state. Only the lock holder writes it, always atomically.
type State struct {
	Version int    `json:"version"`
	Chamber string `json:"chamber"` // canonical path when started
	ID      string `json:"id"`
	Backend string `json:"backend,omitempty"`
	Binary  string `json:"binary,omitempty"` // the cryochamber binary the wake timer runs
	Plan    string `json:"plan,omitempty"`   // the plan file's name in the chamber

	Phase   Phase      `json:"phase"`
	Session int        `json:"session"`        // the last session started
	Wake    *time.Time `json:"wake,omitempty"` // when the next session is due (while running: when it was due)
	Reason  Why        `json:"reason,omitempty"`
	// PlanWake is the latest WAKE marker's time. A session woken earlier (a TODO, a message)
	// is told it, and keeps it when it prints no WAKE of its own.
	PlanWake *time.Time `json:"plan_wake,omitempty"`

	Agent   string `json:"agent,omitempty"`   // `start --agent` override ("" = cryo.toml's agent)
	Command string `json:"command,omitempty"` // the last CMD line ("" = the agent)
	Task    string `json:"task,omitempty"`
	Retries int    `json:"retries,omitempty"` // consecutive failed sessions
	// RetryingSince is set when the fast retries were used up: the chamber then retries every
	// slow_retry until a session succeeds (and the operator was alerted once).
	RetryingSince *time.Time `json:"retrying_since,omitempty"`
	// Paused is when `pause` stopped the timers; PausedUntil when it resumes by itself.
	Paused      *time.Time `json:"paused,omitempty"`
	PausedUntil *time.Time `json:"paused_until,omitempty"`
	Missing     *time.Time `json:"missing,omitempty"` // the chamber directory was found missing (alerted)

	Timers    Timers          `json:"timers"`
	Fallbacks []FallbackEntry `json:"fallbacks,omitempty"` // FALLBACK markers of the latest session
	Plans     []string        `json:"plans,omitempty"`     // PLAN notes of the latest session
	Last      *Outcome        `json:"last,omitempty"`
	Holder    *Holder         `json:"holder,omitempty"`
	Claimed   []string        `json:"claimed,omitempty"` // inbox messages claimed by the running session
	LogOffset int64           `json:"log_offset"`
	Warnings  []string        `json:"warnings,omitempty"` // for the next prompt (e.g. log moved aside)
	LastAlert *AlertRecord    `json:"last_alert,omitempty"`
	// ConfigSeen is the hash of the chamber's cryo.toml when an edit that is not in force was
	// last reported, so that one edit is reported once.
	ConfigSeen string `json:"config_seen,omitempty"`
	// Rotated is the first month whose outbox items and claimed messages stay in the live
	// mailbox directories: older ones were moved to month directories (rotateMailbox).
	Rotated string      `json:"rotated,omitempty"`
	Guard   *GuardState `json:"guard,omitempty"` // the guardrails' counts and episodes (guardrails.go)
	Updated time.Time   `json:"updated"`
	// Told holds the conditions of the private state the operator was told of, once each
	// (degraded.go: "env" for a missing environment file), until they end.
	Told map[string]time.Time `json:"told,omitempty"`
}

// Why says why a session runs (or the next one will).
type Why string

const (
	WhyStart     Why = "start"     // session 1, or a start after a stop
	WhyPlan      Why = "plan"      // the plan's WAKE
	WhyRetry     Why = "retry"     // a failed session is tried again
	WhyTodo      Why = "todo"      // a TODO is due
	WhyInbox     Why = "inbox"     // a message arrived
	WhyRequested Why = "requested" // send --wake, wake --now
	WhyResume    Why = "resume"    // what fell due during a pause
)

// early reports whether a session that runs for this reason runs before the plan's own wake.
func (w Why) early() bool { return w == WhyTodo || w == WhyInbox || w == WhyRequested }

// Timers are the OS timers armed for the chamber, as last armed and read back.
type Timers struct {
	Wake     *time.Time `json:"wake,omitempty"`
	Fallback *time.Time `json:"fallback,omitempty"`
	Alert    *time.Time `json:"alert,omitempty"` // the retry of undelivered alerts
	Watch    bool       `json:"watch,omitempty"`
	// Zone is the zone the OS reads the wake timer in (launchd: the Mac's own zone): a wake
	// that finds it changed (travel) re-arms.
	Zone string `json:"zone,omitempty"`
}

// Outcome is the result of a finished session.
type Outcome struct {
	Session int       `json:"session"`
	Exit    int       `json:"exit"`
	Summary string    `json:"summary,omitempty"`
	Reason  string    `json:"reason,omitempty"` // no-exit, crashed, timeout, agent-failed, invalid
	Why     Why       `json:"why,omitempty"`    // what woke the session
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
}

// Holder is the process that holds (or last held) the chamber's lock.
type Holder struct {
	PID     int       `json:"pid"`
	Session int       `json:"session"`
	Since   time.Time `json:"since"`
	Command string    `json:"command,omitempty"` // wake, start, fallback
	// Agent is the agent's process group while it runs: a recovery ends what a wake that died
	// left running (launchd does not clean a job's other process groups). Recorded in
	// agent.json as the agent starts, and read from there by load (agentfile.go); state.json
	// holds it only when saved later in the session, or by an older build.
	Agent *agent.Group `json:"agent,omitempty"`
}

// AlertRecord is the last alert and how its delivery went.
type AlertRecord struct {
	At      time.Time `json:"at"`
	Session int       `json:"session"`
	Reason  string    `json:"reason"`
	Results []string  `json:"results,omitempty"`
	OK      bool      `json:"ok"`
}

// ErrNoState means the directory is not a chamber yet.
var ErrNoState = errors.New("no state")

// StateError is a state that cannot be read or parsed.
type StateError struct {
	Path string
	Err  error
}

func (e *StateError) Error() string { return fmt.Sprintf("%s: %v", e.Path, e.Err) }
func (e *StateError) Unwrap() error { return e.Err }

// parseState checks and decodes a state file's content.
func parseState(path string, data []byte) (*State, error) {
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, &StateError{path, fmt.Errorf("not valid JSON (%v); it is written atomically, so it was edited by hand or the disk is damaged", err)}
	}
	if err := s.check(); err != nil {
		return nil, &StateError{path, err}
	}
	return &s, nil
}

// load reads the authoritative state. A missing file is ErrNoState.
func (s store) load() (*State, error) {
	data, err := s.read(stateName, maxStateSize)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoState
	}
	if err != nil {
		return nil, &StateError{s.path(stateName), err}
	}
	st, err := parseState(s.path(stateName), data)
	if err == nil {
		s.withAgent(st) // agentfile.go: the running agent's group, recorded without fsync
	}
	return st, err
}

// LoadState reads the state of the chamber at dir from the user's state directory stateDir
// (Env.StateDir): for tests and tools that inspect a chamber from outside.
func LoadState(stateDir, dir string) (*State, error) {
	abs, err := AbsDir(dir)
	if err != nil {
		return nil, err
	}
	return store(fmtStore(stateDir, chamberID(abs))).load()
}

// StatePath is where the state of the chamber at the canonical path dir lives.
func StatePath(stateDir, dir string) string {
	return store(fmtStore(stateDir, chamberID(dir))).path(stateName)
}

func fmtStore(stateDir, id string) string { return stateDir + "/chambers/" + id }

func (s *State) check() error {
	if !readableVersion(s.Version) { // stateformat.go
		return fmt.Errorf("version %d is not %d (written by another cryochamber version?)", s.Version, writtenVersion())
	}
	switch s.Phase {
	case PhaseArmed, PhaseRunning, PhaseComplete, PhaseFailed, PhaseCancelled, PhasePaused:
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
	for _, c := range s.Claimed {
		if !validMessageName(c) {
			return fmt.Errorf("claimed %q is not a message name", c)
		}
	}
	return nil
}

// bound trims what the state records from markers and events to its limits: a state this
// program writes is always one it can read back.
func (s *State) bound() {
	s.Plans = boundList(s.Plans, maxListItems, maxPlanBytes)
	s.Warnings = boundList(s.Warnings, maxStateWarns, maxStateWarns*maxItemBytes)
	if len(s.Fallbacks) > maxListItems {
		s.Fallbacks = s.Fallbacks[:maxListItems]
	}
	for i := range s.Fallbacks {
		s.Fallbacks[i].Message = clipBytes(s.Fallbacks[i].Message, maxItemBytes)
	}
}

// boundList keeps the first items of list that fit in n items and total bytes, and says so when
// it dropped some.
func boundList(list []string, n, total int) []string {
	var out []string
	used := 0
	for i, it := range list {
		it = clipBytes(it, maxItemBytes*4)
		if len(out) == n-1 && i < len(list)-1 || used+len(it) > total {
			return append(out, fmt.Sprintf("(%d more not kept)", len(list)-i))
		}
		used += len(it)
		out = append(out, it)
	}
	return out
}

// clipBytes cuts s to at most n bytes on a rune boundary.
func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// marshal renders the state as saved.
func (s *State) marshal(now time.Time) ([]byte, error) {
	s.Version = writtenVersion() // stateformat.go
	s.Updated = now.UTC().Truncate(time.Second)
	s.bound()
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, err
	}
	if len(data) >= maxStateSize {
		return nil, fmt.Errorf("the state would be %d bytes, more than its reader accepts (%d)", len(data), maxStateSize)
	}
	return append(data, '\n'), nil
}

// ReadStateFile reads and checks a state file at path (tests, tools, the bad-input catalogue).
func ReadStateFile(path string) (*State, error) {
	data, err := store(filepath.Dir(path)).read(filepath.Base(path), maxStateSize)
	if err != nil {
		return nil, &StateError{path, err}
	}
	return parseState(path, data)
}

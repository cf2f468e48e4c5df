// Package validate holds the report of the eight pre-hibernate checks of SPEC section 6, and the
// two checks that only look at the host (7: the log is writable, 8: free disk space).
//
// Steps 1 to 6 are judged by the chamber's lifecycle, which knows the markers and the timers:
// it runs the steps in order, arms the timers between steps 3 and 4, records each result here,
// and decides what a failure means. Nothing in this package arms, removes or repairs anything.
// The same report is printed by `wake`, `start` and `validate`, as text or JSON; a report that
// refuses never says the plan is complete.
package validate

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cryochamber/cryochamber/internal/confined"
	"github.com/cryochamber/cryochamber/internal/termtext"
)

// Status is the result of one check.
type Status string

const (
	Pass Status = "pass"
	Fail Status = "fail"
	Warn Status = "warn"
	Skip Status = "skip"
)

// Step is one of the eight checks, numbered as SPEC section 6 numbers them.
type Step int

// The eight checks, in order.
const (
	StepMarkers  Step = 1 // markers parsed
	StepWake     Step = 2 // WAKE in the future (within late_grace: now)
	StepCommand  Step = 3 // the next command is allowed and resolves
	StepTimer    Step = 4 // the OS timer was registered
	StepReadback Step = 5 // the OS reports the timer's next elapse equal to WAKE
	StepFallback Step = 6 // the dead-man timer was registered
	StepLog      Step = 7 // the log is still writable
	StepDisk     Step = 8 // free disk space
	// StepHeartbeat is shown by `validate` only, when [heartbeat] is set: the off-machine
	// monitor's timeout as it holds it (never a reason to refuse a hibernation).
	StepHeartbeat Step = 9
)

// Steps names the eight checks, in order.
var Steps = [...]string{
	1: "markers parsed",
	2: "wake in the future",
	3: "command runnable",
	4: "timer registered",
	5: "timer matches wake",
	6: "fallback timer registered",
	7: "log writable",
	8: "disk space",
	9: "heartbeat monitor",
}

// Check is one step's result.
type Check struct {
	Step   Step   `json:"step"`
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
}

// ExitInfo is the EXIT marker of the block that was checked.
type ExitInfo struct {
	Code    int    `json:"code"`
	Summary string `json:"summary"`
}

// FallbackInfo is one FALLBACK marker.
type FallbackInfo struct {
	Action  string `json:"action"`
	Target  string `json:"target"`
	Message string `json:"message"`
}

// Report is the outcome of a validation run. Its JSON form is `validate --json`.
type Report struct {
	OK           bool           `json:"ok"`
	PlanComplete bool           `json:"plan_complete"`
	Session      int            `json:"session"`
	Exit         *ExitInfo      `json:"exit"`
	Wake         *string        `json:"wake"`
	Cmd          *string        `json:"cmd"`
	Plans        []string       `json:"plans"`
	Fallbacks    []FallbackInfo `json:"fallbacks"`
	Errors       []string       `json:"errors"`
	Warnings     []string       `json:"warnings"`
	Checks       []Check        `json:"checks"`

	// Print, when set, receives each check as it is added, so a long step is visible while
	// it runs.
	Print io.Writer `json:"-"`
}

// New returns an empty report that prints each check to w (nil: silent).
func New(w io.Writer) *Report {
	return &Report{Plans: []string{}, Fallbacks: []FallbackInfo{}, Errors: []string{}, Warnings: []string{}, Checks: []Check{}, Print: w}
}

// Add records the result of a step. A Fail makes the report not OK; a Warn adds a warning.
func (r *Report) Add(step Step, status Status, format string, args ...any) Check {
	c := Check{Step: step, Name: Steps[step], Status: status, Detail: termtext.Line(fmt.Sprintf(format, args...))}
	r.Checks = append(r.Checks, c)
	switch status {
	case Fail:
		r.Errors = append(r.Errors, fmt.Sprintf("step %d (%s): %s", step, c.Name, c.Detail))
	case Warn:
		r.Warnings = append(r.Warnings, fmt.Sprintf("step %d (%s): %s", step, c.Name, c.Detail))
	}
	if r.Print != nil {
		fmt.Fprintln(r.Print, c.String())
	}
	return c
}

// Failed reports whether any step failed.
func (r *Report) Failed() bool {
	for _, c := range r.Checks {
		if c.Status == Fail {
			return true
		}
	}
	return false
}

// SetWake records the wake time in the report (RFC 3339 UTC).
func (r *Report) SetWake(t time.Time) {
	s := t.UTC().Format(time.RFC3339)
	r.Wake = &s
}

// String is the one-line text form of a check.
func (c Check) String() string {
	s := fmt.Sprintf("step %d %-26s %s", c.Step, c.Name, strings.ToUpper(string(c.Status)))
	if c.Detail != "" {
		s += "  " + c.Detail
	}
	return s
}

// WriteText prints every check, then the verdict.
func (r *Report) WriteText(w io.Writer) {
	for _, c := range r.Checks {
		fmt.Fprintln(w, c.String())
	}
	r.WriteVerdict(w)
}

// WriteVerdict prints the one-line conclusion.
func (r *Report) WriteVerdict(w io.Writer) {
	switch {
	case !r.OK:
		fmt.Fprintf(w, "refused: %d problem(s)\n", len(r.Errors))
	case r.PlanComplete:
		fmt.Fprintln(w, "ok: plan complete, nothing to arm")
	default:
		fmt.Fprintln(w, "ok: may hibernate")
	}
}

// WriteJSON prints the report as one JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Finish sets OK from the checks. A report that refuses is never "plan complete".
func (r *Report) Finish() {
	r.OK = !r.Failed()
	if !r.OK {
		r.PlanComplete = false
	}
}

// LogWritable is step 7: the log can still be appended to. It opens for append without writing,
// so checking never changes the log; a missing log counts as writable when its directory is.
func LogWritable(path string) (Status, string) {
	f, err := confined.OpenIn(path, os.O_WRONLY|os.O_APPEND, 0)
	if err == nil {
		f.Close()
		return Pass, path
	}
	if os.IsNotExist(err) {
		if err := syscall.Access(filepath.Dir(path), 2 /* W_OK */); err != nil {
			return Fail, fmt.Sprintf("cannot create %s: %v", path, err)
		}
		return Pass, path + " (not created yet)"
	}
	return Fail, fmt.Sprintf("cannot append to %s: %v", path, err)
}

// FreeDisk is step 8: free space for an unprivileged user on the file system of dir.
func FreeDisk(dir string, min int64) (Status, string) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return Warn, fmt.Sprintf("cannot read free space: %v", err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	if free < min {
		return Warn, fmt.Sprintf("%s free, below min_free_disk %s", HumanBytes(free), HumanBytes(min))
	}
	return Pass, fmt.Sprintf("%s free", HumanBytes(free))
}

// HumanBytes prints a byte count in binary units.
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

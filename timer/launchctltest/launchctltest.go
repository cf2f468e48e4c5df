// Package launchctltest gives tests a stand-in launchctl: it builds the program in
// timer/launchctltest/launchctl into a temporary directory, with its own state directory, and
// lets the test read what was called and loaded, and set up what a real Mac would do by itself
// (a job running, a label disabled).
//
// It never runs a real launchctl and never touches ~/Library. Where the go command is missing,
// New skips the test and says why.
package launchctltest

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/cryochamber/cryochamber/timer/launchctltest/fakestate"
)

// Job is one loaded job as the stand-in holds it.
type Job = fakestate.Job

// The stand-in's knobs, set through the environment launchctl runs with (see Env).
const (
	EnvLinger     = fakestate.EnvLinger
	EnvESRCH      = fakestate.EnvESRCH
	EnvInProgress = fakestate.EnvInProgress
)

const pkg = "github.com/cryochamber/cryochamber/timer/launchctltest/launchctl"

// Fake is one stand-in launchctl with its own state.
type Fake struct {
	Bin      string // the directory holding the launchctl binary
	Path     string // absolute path of the binary
	StateDir string // state.json and calls.jsonl

	t testing.TB
}

// New builds the stand-in for t. Everything it creates lives in t's temporary directories.
func New(t testing.TB) *Fake {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the go command is not on PATH, so the stand-in launchctl cannot be built: %v", err)
	}
	f := &Fake{Bin: t.TempDir(), StateDir: t.TempDir(), t: t}
	f.Path = filepath.Join(f.Bin, "launchctl")
	cmd := exec.Command(goBin, "build", "-o", f.Path, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the stand-in launchctl: %v\n%s", err, out)
	}
	return f
}

// Env is the environment to run the stand-in with: PATH holding only its directory, the state
// directory, and extra (for example EnvLinger+"=1").
func (f *Fake) Env(extra ...string) []string {
	return append([]string{"PATH=" + f.Bin, fakestate.EnvDir + "=" + f.StateDir}, extra...)
}

// Calls returns the arguments of every call so far, oldest first.
func (f *Fake) Calls() [][]string {
	f.t.Helper()
	file, err := os.Open(filepath.Join(f.StateDir, fakestate.CallsFile))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	defer file.Close()
	var calls [][]string
	sc := bufio.NewScanner(file)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var c []string
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			f.t.Fatalf("%s: %v", fakestate.CallsFile, err)
		}
		calls = append(calls, c)
	}
	if err := sc.Err(); err != nil {
		f.t.Fatal(err)
	}
	return calls
}

// Subcommands returns the calls as "verb target" strings (the first two arguments), which is
// what most tests compare.
func (f *Fake) Subcommands() []string {
	var out []string
	for _, c := range f.Calls() {
		if len(c) > 2 {
			c = c[:2]
		}
		out = append(out, strings.Join(c, " "))
	}
	return out
}

// ResetCalls forgets the calls so far.
func (f *Fake) ResetCalls() {
	f.t.Helper()
	if err := os.Remove(filepath.Join(f.StateDir, fakestate.CallsFile)); err != nil && !os.IsNotExist(err) {
		f.t.Fatal(err)
	}
}

// State returns everything the stand-in holds now.
func (f *Fake) State() *fakestate.State {
	f.t.Helper()
	s, err := fakestate.Load(f.StateDir)
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// Job returns the loaded job of a target (gui/<uid>/<label>).
func (f *Fake) Job(target string) (*Job, bool) {
	f.t.Helper()
	j, ok := f.State().Jobs[target]
	return j, ok
}

// Loaded returns the targets that are loaded.
func (f *Fake) Loaded() []string {
	f.t.Helper()
	var out []string
	for t := range f.State().Jobs {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// SetRunning marks a loaded job as running with pid (0: stopped), as if its calendar had fired.
func (f *Fake) SetRunning(target string, pid int) {
	f.t.Helper()
	f.update(func(s *fakestate.State) {
		j := s.Jobs[target]
		if j == nil {
			f.t.Fatalf("SetRunning: %s is not loaded", target)
		}
		j.Running, j.PID = pid > 0, pid
		if pid > 0 {
			j.Runs++
		}
	})
}

// Disable marks target disabled, as `launchctl disable` does: print-disabled lists it and
// bootstrap refuses it with answer (119 "Service is disabled", or 5 as many Macs say).
func (f *Fake) Disable(target string, answer int) {
	f.t.Helper()
	if answer != 5 && answer != 119 {
		f.t.Fatalf("Disable: a disabled label is answered with 5 or 119, not %d", answer)
	}
	f.update(func(s *fakestate.State) {
		s.Disabled = append(s.Disabled, target)
		s.DisabledAnswer = answer
	})
}

// SetDisabledLayout chooses how print-disabled writes a state: "modern" (=> disabled) or
// "legacy" (=> true).
func (f *Fake) SetDisabledLayout(layout string) {
	f.t.Helper()
	f.update(func(s *fakestate.State) { s.DisabledLayout = layout })
}

// SetNoGUI removes the gui domain, as when nobody is logged in to the Mac's desktop: code
// "112" or "125" is what print and bootstrap answer, "5" makes bootstrap answer a bare 5.
// "" brings the domain back.
func (f *Fake) SetNoGUI(code string) {
	f.t.Helper()
	switch code {
	case "", "112", "125", "5":
	default:
		f.t.Fatalf("SetNoGUI(%q): want 112, 125, 5 or empty", code)
	}
	f.update(func(s *fakestate.State) { s.NoGUI = code })
}

// Bootstraps returns how many times each target was loaded.
func (f *Fake) Bootstraps() map[string]int {
	f.t.Helper()
	return f.State().Bootstraps
}

func (f *Fake) update(fn func(*fakestate.State)) {
	f.t.Helper()
	s := f.State()
	fn(s)
	if err := s.Save(f.StateDir); err != nil {
		f.t.Fatal(err)
	}
}

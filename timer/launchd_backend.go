package timer

// The launchd backend: LaunchAgent plists in ~/Library/LaunchAgents, driven with launchctl
// (bootstrap, bootout, print, kickstart) in the gui/<uid> domain. It has no build tags: it only
// runs a program called launchctl, so Linux tests drive it with a stand-in
// (timer/launchctltest). It never touches another domain or another user's agents.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/internal/atomicfile"
)

// LaunchdOptions says where the agents live and how to reach launchd. The caller (main) fills
// it from the environment; this package never reads the environment or the clock itself.
type LaunchdOptions struct {
	AgentsDir string         // ~/Library/LaunchAgents
	UID       int            // the domain is gui/<UID>
	Launchctl string         // path or name of launchctl (default "launchctl", looked up on Env's PATH)
	Location  *time.Location // the Mac's time zone, in which StartCalendarInterval is read
	Env       []string       // the environment launchctl runs with (tests put the stand-in on PATH)
	Now       func() time.Time
}

// defaultPath is searched for launchctl when Env has no PATH (it lives in /bin on macOS).
const defaultPath = "/bin:/usr/bin:/sbin:/usr/sbin"

// Bounds on launchctl: every call and every wait ends.
const (
	launchctlTimeout = 30 * time.Second // one launchctl call
	maxLaunchctlOut  = maxPrintOutput   // bytes kept of each output stream
)

// Exit statuses of launchctl (each is the error number it prints: "Bootstrap failed: 5: ...").
const (
	lcNoSuchProcess   = 3   // bootout: "No such process" (not loaded, older releases)
	lcIOError         = 5   // bootstrap: "Input/output error", the label is still loaded (or the plist is refused)
	lcInProgress      = 36  // bootout: "Operation now in progress", the job is still stopping
	lcAlreadyProgress = 37  // bootstrap: "Operation already in progress"
	lcNotFound        = 113 // print, kickstart, bootout: "Could not find service"
	lcDisabled        = 119 // bootstrap: "Service is disabled"
	lcNoDomainAction  = 125 // bootstrap: "Domain does not support specified action" (no GUI session)
)

// defaultBootstrapDelays are the pauses between bootstrap attempts answered with
// "5: Input/output error": bootout is asynchronous, and launchd refuses to load a label it has
// not finished unloading. Seen in the wild: one retry a second or two later succeeds.
var defaultBootstrapDelays = []time.Duration{
	200 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 3 * time.Second,
}

// defaultUnloadPolls are the pauses while waiting for a job that bootout left stopping.
var defaultUnloadPolls = []time.Duration{
	100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
	time.Second, 2 * time.Second,
}

type launchdBackend struct {
	o   LaunchdOptions
	bin string // absolute path of launchctl

	bootstrapDelays []time.Duration
	unloadPolls     []time.Duration
}

// NewLaunchd returns the launchd backend. It checks that launchctl exists (the error then wraps
// ErrUnavailable) and that the options are complete; it does not talk to launchd yet.
func NewLaunchd(ctx context.Context, o LaunchdOptions) (Backend, error) {
	switch {
	case o.AgentsDir == "" || !filepath.IsAbs(o.AgentsDir):
		return nil, fmt.Errorf("launchd: agents directory %q is not an absolute path", o.AgentsDir)
	case o.UID < 0:
		return nil, fmt.Errorf("launchd: invalid uid %d", o.UID)
	case o.Location == nil:
		return nil, errors.New("launchd: no time zone given (LaunchdOptions.Location)")
	case o.Now == nil:
		return nil, errors.New("launchd: no clock given (LaunchdOptions.Now)")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	name := o.Launchctl
	if name == "" {
		name = "launchctl"
	}
	bin, err := lookPath(name, o.Env)
	if err != nil {
		return nil, fmt.Errorf("%w: launchctl not found: launchd agents need macOS (%v)", ErrUnavailable, err)
	}
	return &launchdBackend{o: o, bin: bin, bootstrapDelays: defaultBootstrapDelays, unloadPolls: defaultUnloadPolls}, nil
}

// lookPath finds name as exec.LookPath would, but on the PATH of env (the environment
// launchctl will run with), not on this process's.
func lookPath(name string, env []string) (string, error) {
	isExec := func(p string) bool {
		fi, err := os.Stat(p)
		return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
	}
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			return "", fmt.Errorf("%q is not an absolute path", name)
		}
		if !isExec(name) {
			return "", fmt.Errorf("%s is not an executable file", name)
		}
		return name, nil
	}
	path := defaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v // the last one wins, as in exec
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue // a relative PATH entry would depend on the working directory
		}
		if p := filepath.Join(dir, name); isExec(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("no %s on PATH %s", name, path)
}

func (b *launchdBackend) Name() string { return "launchd" }

// String says which launchctl and domain the backend uses (for logs and tests).
func (b *launchdBackend) String() string { return "launchd " + b.domain() + " via " + b.bin }

func (b *launchdBackend) Close() error { return nil }

func (b *launchdBackend) domain() string         { return "gui/" + strconv.Itoa(b.o.UID) }
func (b *launchdBackend) target(l string) string { return b.domain() + "/" + l }
func (b *launchdBackend) plistPath(l string) string {
	return filepath.Join(b.o.AgentsDir, LaunchdPlistName(l))
}

// lcResult is one launchctl call's outcome.
type lcResult struct {
	args           []string
	code           int
	stdout, stderr []byte
}

// msg is launchctl's own words, for error messages: stderr (else stdout), trimmed and bounded.
func (r *lcResult) msg() string {
	s := bytes.TrimSpace(r.stderr)
	if len(s) == 0 {
		s = bytes.TrimSpace(r.stdout)
	}
	if len(s) > 300 {
		s = append(s[:300:300], "..."...)
	}
	return strings.Join(strings.Fields(strings.ToValidUTF8(string(s), "?")), " ")
}

func (r *lcResult) Error() string {
	m := r.msg()
	if m == "" {
		m = "no message"
	}
	return fmt.Sprintf("launchctl %s: exit status %d: %s", strings.Join(r.args, " "), r.code, m)
}

// notFound reports launchd's answer for a label that is not loaded: 113 "Could not find
// service" (print, kickstart, bootout), or 3 "No such process" (bootout on older releases).
func (r *lcResult) notFound() bool {
	if r.code == lcNotFound || r.code == lcNoSuchProcess {
		return true
	}
	return r.code != 0 && bytes.Contains(r.stderr, []byte("Could not find service"))
}

// limitedBuffer keeps the first max bytes written to it and counts the rest.
type limitedBuffer struct {
	bytes.Buffer
	max     int
	dropped int
}

func (w *limitedBuffer) Write(p []byte) (int, error) {
	if room := w.max - w.Len(); room < len(p) {
		if room > 0 {
			w.Buffer.Write(p[:room])
		}
		w.dropped += len(p) - max(room, 0)
		return len(p), nil
	}
	return w.Buffer.Write(p)
}

// run calls launchctl. A non-zero exit is not an error here (the caller reads r.code); err is
// for a launchctl that could not run or did not finish.
func (b *launchdBackend) run(ctx context.Context, args ...string) (*lcResult, error) {
	ctx, cancel := context.WithTimeout(ctx, launchctlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.bin, args...)
	cmd.Env = b.o.Env
	if cmd.Env == nil {
		cmd.Env = []string{} // never this process's environment by accident
	}
	var out, errOut limitedBuffer
	out.max, errOut.max = maxLaunchctlOut, 64<<10
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := &lcResult{args: args, stdout: out.Bytes(), stderr: errOut.Bytes()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
		r.code = ee.ExitCode()
	case ctx.Err() != nil:
		return nil, fmt.Errorf("launchctl %s: %w", strings.Join(args, " "), ctx.Err())
	default:
		return nil, fmt.Errorf("launchctl %s: %w", strings.Join(args, " "), err)
	}
	if out.dropped > 0 {
		return nil, fmt.Errorf("launchctl %s: more than %d bytes of output", strings.Join(args, " "), maxLaunchctlOut)
	}
	return r, nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// print describes a loaded job; nil when launchd does not know the label.
func (b *launchdBackend) print(ctx context.Context, label string) (*launchctlJob, error) {
	r, err := b.run(ctx, "print", b.target(label))
	if err != nil {
		return nil, err
	}
	if r.notFound() {
		return nil, nil
	}
	if r.code != 0 {
		return nil, r
	}
	j, err := parseLaunchctlPrint(r.stdout)
	if err != nil {
		return nil, fmt.Errorf("launchctl print %s: %w", b.target(label), err)
	}
	if j.Target != b.target(label) {
		return nil, fmt.Errorf("launchctl print %s: describes %s instead", b.target(label), j.Target)
	}
	return j, nil
}

// bootout unloads a job that is not running and waits until launchd has let go of it. A
// label that is not loaded is not an error.
func (b *launchdBackend) bootout(ctx context.Context, label string) error {
	r, err := b.run(ctx, "bootout", b.target(label))
	if err != nil {
		return err
	}
	switch {
	case r.code == 0 || r.notFound():
		return nil
	case r.code != lcInProgress:
		return r
	}
	// 36 "Operation now in progress": launchd is still stopping the job. Wait until it is gone,
	// so that the bootstrap that follows does not meet the old job.
	for _, d := range b.unloadPolls {
		if err := sleep(ctx, d); err != nil {
			return err
		}
		j, err := b.print(ctx, label)
		if err != nil {
			return err
		}
		if j == nil {
			return nil
		}
	}
	return fmt.Errorf("%w; %s is still loaded after waiting (see `launchctl print %s`)", r, label, b.target(label))
}

// bootstrap loads a plist, retrying while launchd still holds the label (bootout is
// asynchronous) or is busy with it.
func (b *launchdBackend) bootstrap(ctx context.Context, label, path string) error {
	var r *lcResult
	var waited time.Duration
	for attempt := 0; ; attempt++ {
		var err error
		r, err = b.run(ctx, "bootstrap", b.domain(), path)
		if err != nil {
			return err
		}
		if r.code == 0 {
			return nil
		}
		if (r.code != lcIOError && r.code != lcAlreadyProgress) || attempt == len(b.bootstrapDelays) {
			break
		}
		if err := sleep(ctx, b.bootstrapDelays[attempt]); err != nil {
			return fmt.Errorf("%w (retrying: %w)", r, err)
		}
		waited += b.bootstrapDelays[attempt]
	}
	switch r.code {
	case lcIOError, lcAlreadyProgress:
		return fmt.Errorf("%w (still refused after %d attempts over %s): launchd may still hold %s, "+
			"or refuses the plist; check `launchctl print %s` and `plutil -lint %q`, run "+
			"`launchctl bootout %s`, then arm again", r, len(b.bootstrapDelays)+1, waited, label,
			b.target(label), path, b.target(label))
	case lcDisabled:
		return fmt.Errorf("%w: the agent was disabled on this Mac; allow it with `launchctl enable %s` "+
			"(or in System Settings, Login Items) and arm again", r, b.target(label))
	}
	if r.notFound() || r.code == lcNoDomainAction {
		return fmt.Errorf("%w (is this user logged in to the Mac's desktop? agents in %s exist only in a GUI login session)", r, b.domain())
	}
	return r
}

// Slots.
//
// Every job has two labels, `<label>` and `<label>.alt`, because launchd cannot replace a job
// that is running without killing it: bootout stops a running job (SIGTERM to its process
// group), and a loaded job is only changed by unloading it. The wake that re-arms its own
// timer runs *as* that job, so booting it out would kill the session halfway through its
// hibernation, launchctl included, and leave no timer. So a job is armed in a slot that is not
// running; the plist file of the other slot is removed and that job unloaded if it is idle.
// A running one stays loaded (launchd cannot let it go yet); it is unloaded by the next
// Arm or Disarm, or at logout, and if its calendar fires before that, `wake` finds nothing due.
// The current slot is the one whose plist file exists.

type slot struct {
	label string
	path  string
	file  os.FileInfo   // nil without a plist file
	job   *launchctlJob // nil when not loaded
}

func (b *launchdBackend) slotLabels(label string) [2]string {
	return [2]string{label, label + altSuffix}
}

// fileSlot reports the current slot from the files alone: the one with a plist file, the newer
// one if a crash between writing one and removing the other left both.
func (b *launchdBackend) fileSlot(label string) (string, bool) {
	best := ""
	var bestTime time.Time
	for _, l := range b.slotLabels(label) {
		fi, err := os.Lstat(b.plistPath(l))
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if best == "" || fi.ModTime().After(bestTime) {
			best, bestTime = l, fi.ModTime()
		}
	}
	return best, best != ""
}

// slots reads both slots of a job: their files and what launchd says about them.
func (b *launchdBackend) slots(ctx context.Context, label string) ([2]*slot, error) {
	var out [2]*slot
	for i, l := range b.slotLabels(label) {
		s := &slot{label: l, path: b.plistPath(l)}
		if fi, err := os.Lstat(s.path); err == nil {
			s.file = fi
		} else if !errors.Is(err, os.ErrNotExist) {
			return out, fmt.Errorf("inspect %s: %w", s.path, err)
		}
		j, err := b.print(ctx, l)
		if err != nil {
			return out, err
		}
		s.job = j
		out[i] = s
	}
	return out, nil
}

func (s *slot) running() bool { return s.job != nil && s.job.Running() }

// install writes a job's plist into a slot that is not running, (re)loads it, then retires the
// other slot. build renders the agent for a given label.
func (b *launchdBackend) install(ctx context.Context, label string, build func(label string) (*launchdAgent, error)) error {
	// Render (and so validate) before touching anything.
	var data [2][]byte
	for i, l := range b.slotLabels(label) {
		a, err := build(l)
		if err != nil {
			return err
		}
		if data[i], err = a.encode(); err != nil {
			return err
		}
	}
	ss, err := b.slots(ctx, label)
	if err != nil {
		return err
	}
	// A running job whose file already says the same thing needs nothing (the inbox watcher
	// that started this very wake, being watched again).
	for i, s := range ss {
		if s.running() && s.file != nil {
			if cur, err := os.ReadFile(s.path); err == nil && bytes.Equal(cur, data[i]) {
				return nil
			}
		}
	}
	// Both running happens for a moment after a re-arm: the slot just loaded runs at load
	// (RunAtLoad), finds the lock held and exits. Wait for that, boundedly.
	for _, d := range b.unloadPolls {
		if !ss[0].running() || !ss[1].running() {
			break
		}
		if err := sleep(ctx, d); err != nil {
			return err
		}
		if ss, err = b.slots(ctx, label); err != nil {
			return err
		}
	}
	ti := 0
	if ss[0].running() {
		ti = 1
	}
	tgt, other := ss[ti], ss[1-ti]
	if tgt.running() {
		return fmt.Errorf("both %s and %s are running; arm again when one has finished", ss[0].label, ss[1].label)
	}
	if err := os.MkdirAll(b.o.AgentsDir, 0o755); err != nil {
		return fmt.Errorf("create agents directory: %w", err)
	}
	if err := atomicfile.Write(tgt.path, data[ti], 0o644); err != nil {
		return err
	}
	if tgt.job != nil {
		if err := b.bootout(ctx, tgt.label); err != nil {
			return err
		}
	}
	if err := b.bootstrap(ctx, tgt.label, tgt.path); err != nil {
		return err
	}
	return b.retire(ctx, other)
}

// retire removes a slot's plist file and unloads its job unless it is running.
func (b *launchdBackend) retire(ctx context.Context, s *slot) error {
	if s.file != nil {
		if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", s.path, err)
		}
		if err := atomicfile.SyncDir(b.o.AgentsDir); err != nil {
			return err
		}
	}
	if s.job != nil && !s.running() {
		return b.bootout(ctx, s.label)
	}
	return nil
}

// uninstall retires both slots of a job.
func (b *launchdBackend) uninstall(ctx context.Context, label string) error {
	ss, err := b.slots(ctx, label)
	if err != nil {
		return err
	}
	for _, s := range ss {
		if err := b.retire(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// Arm loads each job's plist in turn: launchd has no reload to share.
func (b *launchdBackend) Arm(ctx context.Context, c Chamber, jobs ...Job) error {
	for _, j := range jobs {
		if err := b.arm(ctx, c, j); err != nil {
			return err
		}
	}
	return nil
}

func (b *launchdBackend) arm(ctx context.Context, c Chamber, j Job) error {
	if err := checkID(c.ID); err != nil {
		return err
	}
	if err := checkKind(j.Kind); err != nil {
		return err
	}
	return b.install(ctx, LaunchdLabel(c.ID, j.Kind), func(l string) (*launchdAgent, error) {
		return timerAgent(c, j, l, b.o.Location)
	})
}

// Next reads the calendar launchd has loaded for the timer and computes its next match after
// Now in Location. launchd has no year: for a timer more than a year ahead this is an earlier
// yearly match, which `wake` ignores when it fires (compare month, day, hour and minute).
func (b *launchdBackend) Next(ctx context.Context, id string, k Kind) (time.Time, bool, error) {
	if err := checkID(id); err != nil {
		return time.Time{}, false, err
	}
	if err := checkKind(k); err != nil {
		return time.Time{}, false, err
	}
	label, ok := b.fileSlot(LaunchdLabel(id, k))
	if !ok {
		return time.Time{}, false, nil
	}
	j, err := b.print(ctx, label)
	if err != nil || j == nil {
		return time.Time{}, false, err
	}
	switch len(j.Calendars) {
	case 0:
		return time.Time{}, false, fmt.Errorf("launchctl print %s shows no calendar trigger", b.target(label))
	case 1:
	default:
		return time.Time{}, false, fmt.Errorf("launchctl print %s shows %d calendar triggers, cryochamber writes one", b.target(label), len(j.Calendars))
	}
	t, ok := NextCalendar(j.Calendars[0], b.o.Location, b.o.Now())
	if !ok {
		return time.Time{}, false, fmt.Errorf("launchctl print %s: calendar %s never occurs", b.target(label), j.Calendars[0])
	}
	return t.UTC(), true, nil
}

func (b *launchdBackend) Disarm(ctx context.Context, id string, k Kind) error {
	if err := checkID(id); err != nil {
		return err
	}
	if err := checkKind(k); err != nil {
		return err
	}
	return b.uninstall(ctx, LaunchdLabel(id, k))
}

func (b *launchdBackend) Watch(ctx context.Context, c Chamber, dir string, wakeArgv []string) error {
	if err := checkID(c.ID); err != nil {
		return err
	}
	return b.install(ctx, LaunchdInboxLabel(c.ID), func(l string) (*launchdAgent, error) {
		return watchAgent(c, dir, wakeArgv, l)
	})
}

func (b *launchdBackend) Unwatch(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	return b.uninstall(ctx, LaunchdInboxLabel(id))
}

// RunNow starts the wake job now with `launchctl kickstart` (without -k: a session that is
// running already is left alone, and launchd does not start a second one).
func (b *launchdBackend) RunNow(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	wake := LaunchdLabel(id, Wake)
	label, ok := b.fileSlot(wake)
	if !ok {
		return fmt.Errorf("start %s: no such agent in %s (is the chamber started?)", wake, b.o.AgentsDir)
	}
	r, err := b.run(ctx, "kickstart", b.target(label))
	if err != nil {
		return err
	}
	if r.notFound() {
		return fmt.Errorf("%w: %s is not loaded (arm the chamber again, or `launchctl bootstrap %s %q`)", r, label, b.domain(), b.plistPath(label))
	}
	if r.code != 0 {
		return r
	}
	return nil
}

// plistRole tells what an agent file name stands for.
func plistRole(name string) (id string, k Kind, watch, ok bool) {
	rest, ok := strings.CutPrefix(name, LabelPrefix)
	if !ok {
		return "", "", false, false
	}
	if rest, ok = strings.CutSuffix(rest, ".plist"); !ok {
		return "", "", false, false
	}
	rest = strings.TrimSuffix(rest, altSuffix)
	i := strings.LastIndexByte(rest, '.')
	if i < 0 || checkID(rest[:i]) != nil {
		return "", "", false, false
	}
	switch job := rest[i+1:]; job {
	case inboxJob:
		return rest[:i], "", true, true
	default:
		if checkKind(Kind(job)) != nil {
			return "", "", false, false
		}
		return rest[:i], Kind(job), false, true
	}
}

// Installed scans AgentsDir for cryochamber's plists and groups them by chamber. The chamber
// directory comes from the `--dir` argument of an agent (else its WorkingDirectory), the wake
// agent's first.
func (b *launchdBackend) Installed(ctx context.Context) ([]Installed, error) {
	ents, err := os.ReadDir(b.o.AgentsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", b.o.AgentsDir, err)
	}
	byID := map[string]*Installed{}
	dirs := map[string]map[string]string{} // id → job → directory
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !e.Type().IsRegular() {
			continue
		}
		id, k, watch, ok := plistRole(e.Name())
		if !ok {
			continue
		}
		in := byID[id]
		if in == nil {
			in = &Installed{ID: id}
			byID[id] = in
			dirs[id] = map[string]string{}
		}
		job := string(k)
		if watch {
			in.Watch, job = true, inboxJob
		} else if !containsKind(in.Kinds, k) {
			in.Kinds = append(in.Kinds, k)
		}
		if d := agentDir(filepath.Join(b.o.AgentsDir, e.Name())); d != "" {
			dirs[id][job] = d
		}
	}
	out := make([]Installed, 0, len(byID))
	for id, in := range byID {
		for _, job := range []string{string(Wake), string(Fallback), inboxJob} {
			if in.Dir == "" {
				in.Dir = dirs[id][job]
			}
		}
		sort.Slice(in.Kinds, func(i, j int) bool { return kindIndex(in.Kinds[i]) < kindIndex(in.Kinds[j]) })
		out = append(out, *in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// agentDir reads a plist and returns the chamber directory it runs in, or "".
func agentDir(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPlist+1))
	if err != nil {
		return ""
	}
	a, err := decodeAgent(data)
	if err != nil {
		return ""
	}
	if d := dirArg(a.ProgramArguments); d != "" {
		return d
	}
	return a.WorkingDirectory
}

// Warnings says when AgentsDir is not where launchd looks: launchd loads agents at login only
// from ~/Library/LaunchAgents, so agents elsewhere would be lost at the next login.
func (b *launchdBackend) Warnings(ctx context.Context) []string {
	d := filepath.Clean(b.o.AgentsDir)
	if filepath.Base(d) == "LaunchAgents" && filepath.Base(filepath.Dir(d)) == "Library" {
		return nil
	}
	return []string{fmt.Sprintf("agents directory %s is not ~/Library/LaunchAgents: launchd will not load "+
		"these timers again after a logout or a restart", d)}
}

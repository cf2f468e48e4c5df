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
	"github.com/cryochamber/cryochamber/internal/confined"
)

// LaunchdOptions says where the agents live and how to reach launchd. The caller (main) fills
// it from the environment; this package never reads the environment or the clock itself.
type LaunchdOptions struct {
	AgentsDir string // ~/Library/LaunchAgents
	UID       int    // the domain is gui/<UID>
	Launchctl string // path or name of launchctl (default "launchctl", looked up on Env's PATH)
	// Localtime is the link that names the Mac's time zone, /etc/localtime: launchd reads
	// StartCalendarInterval in that zone, whatever $TZ says (see SystemZone). It is read at
	// every use, so a Mac that changed zone (travel) is seen by the next command.
	Localtime string
	Env       []string // the environment launchctl runs with (tests put the stand-in on PATH)
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
// The answers themselves, with where each was seen, are replayed by the stand-in
// (timer/launchctltest/fakestate/replies.go).
const (
	lcNoSuchProcess   = 3   // bootout: "No such process" (not loaded)
	lcIOError         = 5   // bootstrap: "Input/output error": the label is still loaded, or disabled, or no GUI session, or the plist is refused
	lcInProgress      = 36  // bootout: "Operation now in progress", the job is still stopping
	lcAlreadyProgress = 37  // bootstrap: "Operation already in progress"
	lcNoDomain        = 112 // print: "Could not find domain for user gui: 501" (no GUI session)
	lcNotFound        = 113 // print, kickstart, bootout: "Could not find service"
	lcDisabled        = 119 // bootstrap: "Service is disabled"
	lcNoDomainAction  = 125 // bootstrap, print, kickstart: "Domain does not support specified action" (no GUI session)
)

// launchdArmGuard is how far ahead of now a calendar must fire for Arm to load it: the job
// must be loaded, and read back, before its minute starts, or launchd's next match is a year
// later. FireAt plans further ahead (launchdPlanLead), so that a time it planned is never
// refused by the Arm that follows it.
const (
	launchdArmGuard = 3 * time.Second
	launchdPlanLead = 15 * time.Second
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
	case o.Localtime == "" || !filepath.IsAbs(o.Localtime):
		return nil, fmt.Errorf("launchd: time zone link %q is not an absolute path (LaunchdOptions.Localtime)", o.Localtime)
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
// for a launchctl that could not run or did not finish, or printed more than it may.
func (b *launchdBackend) run(ctx context.Context, args ...string) (*lcResult, error) {
	return b.exec(ctx, true, args)
}

// probe calls launchctl for its exit status and stderr only: stdout beyond a few KiB is
// dropped without error (`launchctl print gui/501` describes the whole domain, over 100 KiB).
func (b *launchdBackend) probe(ctx context.Context, args ...string) (*lcResult, error) {
	return b.exec(ctx, false, args)
}

func (b *launchdBackend) exec(ctx context.Context, strict bool, args []string) (*lcResult, error) {
	ctx, cancel := context.WithTimeout(ctx, launchctlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.bin, args...)
	cmd.Env = b.o.Env
	if cmd.Env == nil {
		cmd.Env = []string{} // never this process's environment by accident
	}
	var out, errOut limitedBuffer
	out.max, errOut.max = maxLaunchctlOut, 64<<10
	if !strict {
		out.max = 4 << 10
	}
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
	if out.dropped > 0 && strict {
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

// print describes a loaded job; nil when launchd does not know the label. With no GUI session
// the error wraps ErrNoSession.
func (b *launchdBackend) print(ctx context.Context, label string) (*launchctlJob, error) {
	r, err := b.run(ctx, "print", b.target(label))
	if err != nil {
		return nil, err
	}
	if r.noDomain() {
		return nil, b.noSession(r)
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

// noDomain reports launchd's answers for a gui/<uid> domain that does not exist: nobody is
// logged in to the Mac's desktop as this user (an SSH session alone has only user/<uid>).
// 112 "Could not find domain for user gui: 501" (print) and 125 "Domain does not support
// specified action" (bootstrap, print, kickstart); see the stand-in's replies for where each
// was seen. A 5 can mean the same, but also other things: bootstrap asks (sessionMissing).
func (r *lcResult) noDomain() bool {
	return r.code == lcNoDomain || r.code == lcNoDomainAction ||
		r.code != 0 && bytes.Contains(r.stderr, []byte("Could not find domain for user gui"))
}

// noSession is the error for a missing GUI session, with what to do about it.
func (b *launchdBackend) noSession(r *lcResult) error {
	return &HintError{
		Err: fmt.Errorf("%w: %v: launchd has no %s domain, which exists only while user %d is logged in to this Mac's desktop (an SSH login is not enough)",
			ErrNoSession, r, b.domain(), b.o.UID),
		Hint: "log in to this Mac's desktop as this user (in person or with Screen Sharing) and run the command again; " +
			"for a Mac nobody logs in to, see docs/MACOS.md (a LaunchDaemon with UserName)",
	}
}

// sessionMissing asks launchd whether the GUI domain exists (`launchctl print gui/<uid>`).
// It is true only for the answers that say so; anything else is not evidence either way.
func (b *launchdBackend) sessionMissing(ctx context.Context) (*lcResult, bool) {
	r, err := b.probe(ctx, "print", b.domain())
	if err != nil || r.code == 0 {
		return nil, false
	}
	return r, r.noDomain()
}

// disabled reads `launchctl print-disabled gui/<uid>`: the labels launchd was told not to load.
// It is nil when launchctl cannot tell.
func (b *launchdBackend) disabled(ctx context.Context) map[string]bool {
	r, err := b.run(ctx, "print-disabled", b.domain())
	if err != nil || r.code != 0 {
		return nil
	}
	labels, err := parsePrintDisabled(r.stdout)
	if err != nil {
		return nil
	}
	return labels
}

// disabledError is the error for a label launchd will not load, naming the command that
// allows it again. cryochamber does not run that command itself: a label is disabled by a
// person (`launchctl disable`, `launchctl unload -w`), and undoing their choice is theirs.
func (b *launchdBackend) disabledError(r *lcResult, label string) error {
	return &HintError{
		Err: fmt.Errorf("%w: %v: launchd has %s disabled (`launchctl print-disabled %s` lists it), so it will not load it",
			ErrDisabled, r, label, b.domain()),
		Hint: fmt.Sprintf("if you did not disable it on purpose, run `launchctl enable %s` and arm again", b.target(label)),
	}
}

// bootout unloads a job that is not running and waits until launchd has let go of it. A
// label that is not loaded, or a domain that does not exist, is not an error.
func (b *launchdBackend) bootout(ctx context.Context, label string) error {
	r, err := b.run(ctx, "bootout", b.target(label))
	if err != nil {
		return err
	}
	switch {
	case r.code == 0 || r.notFound() || r.noDomain():
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
//
// launchd answers "5: Input/output error" to more than a label still unloading: a label that
// is disabled (nexu-io/nexu#836, openclaw/openclaw#849) and a user with no GUI session
// (psimaker/vaultsync#89) get the same 5. So at the first 5 it asks print-disabled and the
// domain, and gives up at once with the right reason instead of retrying for seconds and
// blaming the wrong thing; after the last retry it asks again.
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
		if r.noDomain() {
			return b.noSession(r)
		}
		if r.code == lcIOError && attempt == 0 {
			if err := b.whyRefused(ctx, r, label); err != nil {
				return err
			}
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
		if err := b.whyRefused(ctx, r, label); err != nil {
			return err
		}
		return fmt.Errorf("%w (still refused after %d attempts over %s): launchd may still hold %s, "+
			"or refuses the plist; check `launchctl print %s` and `plutil -lint %q`, run "+
			"`launchctl bootout %s`, then arm again", r, len(b.bootstrapDelays)+1, waited, label,
			b.target(label), path, b.target(label))
	case lcDisabled:
		if d := b.disabled(ctx); d != nil && !d[label] {
			// 119 although print-disabled does not list it: say what launchd said.
			return fmt.Errorf("%w: launchd says the agent is disabled, but `launchctl print-disabled %s` does not list %s; "+
				"check System Settings → General → Login Items, then arm again", r, b.domain(), label)
		}
		return b.disabledError(r, label)
	}
	return r
}

// whyRefused looks for the reasons behind a 5 that retrying cannot cure: the label disabled,
// or no GUI session. nil means neither was found.
func (b *launchdBackend) whyRefused(ctx context.Context, r *lcResult, label string) error {
	if b.disabled(ctx)[label] {
		return b.disabledError(r, label)
	}
	if _, missing := b.sessionMissing(ctx); missing {
		return b.noSession(r)
	}
	return nil
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
	// A slot whose file already holds these very bytes is never written again, and never
	// reloaded while launchd has it: every session arms the dead-man and the inbox watcher
	// again, with the same plists. Since macOS 13 a write into ~/Library/LaunchAgents can
	// raise "Background Items Added" (tmux-plugins/tmux-continuum#118 and #132,
	// shadowsocks/ShadowsocksX-NG#1459 and #1461, marcusquinn/aidevops#1993), and a reload
	// would restart the dead-man's StartInterval count.
	for i, s := range ss {
		if s.file == nil || !sameFile(s.path, data[i]) {
			continue
		}
		if s.job == nil {
			// launchd lost it (a `launchctl bootout` by hand): load the file as it is.
			if err := b.bootstrap(ctx, s.label, s.path); err != nil {
				return err
			}
		}
		return b.retire(ctx, ss[1-i])
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

// sameFile reports whether the file at path holds exactly data.
func sameFile(path string, data []byte) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	cur, err := io.ReadAll(io.LimitReader(f, int64(len(data))+1))
	return err == nil && bytes.Equal(cur, data)
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

// uninstall retires both slots of a job. With no GUI session nothing can be loaded, so only
// the files go (launchd would load them at the next login).
func (b *launchdBackend) uninstall(ctx context.Context, label string) error {
	ss, err := b.slots(ctx, label)
	if errors.Is(err, ErrNoSession) {
		for i, l := range b.slotLabels(label) {
			ss[i] = &slot{label: l, path: b.plistPath(l)}
			if fi, err := os.Lstat(ss[i].path); err == nil {
				ss[i].file = fi
			}
		}
		err = nil
	}
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

// zone is the Mac's time zone now (read at every use: see LaunchdOptions.Localtime).
func (b *launchdBackend) zone() (Zone, error) { return SystemZone(b.o.Localtime) }

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
	z, err := b.zone()
	if err != nil {
		return err
	}
	if j.Kind != Fallback {
		// A calendar whose minute has begun (or is about to) before launchd has it loaded
		// matches next year, not now: refuse it before touching anything.
		cal, fire, err := CalendarFor(j.At, z.Loc)
		if err != nil {
			return fmt.Errorf("%s agent: %w", j.Kind, err)
		}
		if now := b.o.Now(); fire.Before(now.Add(launchdArmGuard)) {
			return fmt.Errorf("%s agent: the calendar %s (%s) fires at %s, which is not at least %s after now (%s): "+
				"launchd would next match it a year later; arm it for timer.FireAt's time instead",
				j.Kind, cal, z.Name, formatInstant(fire, time.Minute), launchdArmGuard, now.UTC().Format(time.RFC3339))
		}
	}
	return b.install(ctx, LaunchdLabel(c.ID, j.Kind), func(l string) (*launchdAgent, error) {
		return timerAgent(c, j, l, z.Loc)
	})
}

// FireAt is when a wake armed now for want fires: want rounded up to the minute in the Mac's
// zone (past a repeated hour), and no sooner than launchdPlanLead after now, so that the job
// is loaded and read back before its minute begins. A WAKE whose minute has begun when the
// session ends is armed for the next whole minute instead of a year later.
func (b *launchdBackend) FireAt(want, now time.Time) (time.Time, error) {
	z, err := b.zone()
	if err != nil {
		return time.Time{}, err
	}
	if want.IsZero() {
		return time.Time{}, errors.New("no time given")
	}
	if earliest := now.Add(launchdPlanLead); want.Before(earliest) {
		want = earliest
	}
	_, fire, err := CalendarFor(want, z.Loc)
	if err != nil {
		return time.Time{}, err
	}
	return fire.UTC(), nil
}

// Read says what launchd holds for a timer: for the wake, the calendar it has loaded (from
// `launchctl print`) and its next match after Now in the Mac's zone, year included; for the
// dead-man, its period. A calendar more than a year ahead first matches at an earlier yearly
// repeat: Reading.Yearly says so, and Check accepts that repeat as a checkpoint.
func (b *launchdBackend) Read(ctx context.Context, id string, k Kind) (Reading, bool, error) {
	if err := checkID(id); err != nil {
		return Reading{}, false, err
	}
	if err := checkKind(k); err != nil {
		return Reading{}, false, err
	}
	label, ok := b.fileSlot(LaunchdLabel(id, k))
	if !ok {
		return Reading{}, false, nil
	}
	j, err := b.print(ctx, label)
	if err != nil || j == nil {
		return Reading{}, false, err
	}
	z, err := b.zone()
	if err != nil {
		return Reading{}, false, err
	}
	rd := Reading{Backend: b.Name(), Precision: time.Minute, Yearly: true, Zone: z.Name, Loc: z.Loc}
	if len(j.Calendars) == 0 {
		// The dead-man: launchd's print of a StartInterval job is not something this package
		// parses, so the period comes from the plist launchd loaded (the file it names).
		if k != Fallback {
			return Reading{}, false, fmt.Errorf("launchctl print %s shows no calendar trigger", b.target(label))
		}
		every, err := plistInterval(b.plistPath(label))
		if err != nil {
			return Reading{}, false, fmt.Errorf("%s: %w", b.target(label), err)
		}
		rd.Every, rd.Yearly, rd.Held = every, false, "every "+every.String()
		return rd, true, nil
	}
	if len(j.Calendars) > 1 {
		return Reading{}, false, fmt.Errorf("launchctl print %s shows %d calendar triggers, cryochamber writes one", b.target(label), len(j.Calendars))
	}
	cal := j.Calendars[0]
	t, ok := NextCalendar(cal, z.Loc, b.o.Now())
	if !ok {
		return Reading{}, false, fmt.Errorf("launchctl print %s: calendar %s never occurs", b.target(label), cal)
	}
	rd.Next, rd.Held = t.UTC(), cal.String()
	return rd, true, nil
}

// plistInterval reads StartInterval from an agent's plist.
func plistInterval(path string) (time.Duration, error) {
	data, err := confined.ReadPath(path, maxPlist)
	if err != nil {
		return 0, err
	}
	a, err := decodeAgent(data)
	if err != nil {
		return 0, err
	}
	if a.StartInterval <= 0 {
		return 0, errors.New("neither a calendar nor a StartInterval")
	}
	return time.Duration(a.StartInterval) * time.Second, nil
}

// Next reports the next time launchd fires the timer, year included, computed in the Mac's
// zone from the calendar launchd has loaded (see Read). For the periodic dead-man it is Now
// plus its period: the latest its next check starts while the Mac is awake.
func (b *launchdBackend) Next(ctx context.Context, id string, k Kind) (time.Time, bool, error) {
	rd, ok, err := b.Read(ctx, id, k)
	if err != nil || !ok {
		return time.Time{}, ok, err
	}
	if rd.Every > 0 {
		return b.o.Now().Add(rd.Every).UTC(), true, nil
	}
	return rd.Next, true, nil
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
	if r.noDomain() {
		return b.noSession(r)
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
	data, err := confined.ReadPath(path, maxPlist)
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

// Preflight checks, before session 1, that launchd can take timers at all: the gui/<uid>
// domain exists only while the user is logged in to the Mac's desktop. Without it, start would
// run the session and only then fail to arm anything. Answers that do not say the domain is
// missing are left to arming to find out.
func (b *launchdBackend) Preflight(ctx context.Context) error {
	if r, missing := b.sessionMissing(ctx); missing {
		return b.noSession(r)
	}
	return nil
}

// Advice is what the user must leave as it is for the timers to run.
func (b *launchdBackend) Advice() []string {
	return []string{
		"launchd runs this chamber's wake, its inbox watcher and its dead-man check only while you are logged in " +
			"to this Mac's desktop, and only while \"cryochamber\" stays allowed in System Settings → General → " +
			"Login Items (Allow in the Background): all three share that switch and that login",
		"nothing runs while the Mac sleeps, and launchd cannot wake it: for a plan that must keep its times, " +
			"keep the Mac awake on power (see docs/MACOS.md, Sleep)",
	}
}

// Warnings says what would stop the timers now: agents outside ~/Library/LaunchAgents (launchd
// loads agents at login only from there), no GUI session, or cryochamber labels disabled.
func (b *launchdBackend) Warnings(ctx context.Context) []string {
	var out []string
	d := filepath.Clean(b.o.AgentsDir)
	if filepath.Base(d) != "LaunchAgents" || filepath.Base(filepath.Dir(d)) != "Library" {
		out = append(out, fmt.Sprintf("agents directory %s is not ~/Library/LaunchAgents: launchd will not load "+
			"these timers again after a logout or a restart", d))
	}
	if _, missing := b.sessionMissing(ctx); missing {
		out = append(out, fmt.Sprintf("user %d is not logged in to this Mac's desktop: launchd runs none of "+
			"cryochamber's timers until that user logs in (an SSH login is not enough)", b.o.UID))
		return out
	}
	var labels []string
	for l, off := range b.disabled(ctx) {
		if off && strings.HasPrefix(l, LabelPrefix) {
			labels = append(labels, l)
		}
	}
	sort.Strings(labels)
	for _, l := range labels {
		out = append(out, fmt.Sprintf("launchd has %s disabled, so it will not load it; run `launchctl enable %s` "+
			"unless you disabled it on purpose", l, b.target(l)))
	}
	return out
}

package timer

// The systemd backend: unit files in the user unit directory, driven over D-Bus with
// go-systemd. It has no build tags so that it compiles (and its tests skip) everywhere; it only
// ever talks to the user manager of the calling user, never to the system manager.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/coreos/go-systemd/v22/unit"
	"github.com/godbus/dbus/v5"

	"github.com/cryochamber/cryochamber/internal/atomicfile"
	"github.com/cryochamber/cryochamber/internal/confined"
)

// SystemdOptions says where the user manager and its unit directory are. The caller (main)
// fills it from the environment; this package never reads the environment itself.
type SystemdOptions struct {
	UnitDir    string // $XDG_CONFIG_HOME/systemd/user, else $HOME/.config/systemd/user
	RuntimeDir string // $XDG_RUNTIME_DIR
	BusAddress string // $DBUS_SESSION_BUS_ADDRESS, may be empty
	LingerFile string // e.g. /var/lib/systemd/linger/<user>; "" skips the check
	User       string // for messages
}

// maxUnitFile bounds what Installed reads of one unit file.
const maxUnitFile = 1 << 20

type systemdBackend struct {
	conn   *sd.Conn
	cancel context.CancelFunc // ends the connection's context (godbus closes the conn with it)
	via    string             // the address that answered, for messages
	o      SystemdOptions
}

// busCandidate is one address to try for the user manager.
type busCandidate struct {
	addr  string
	hello bool // a bus daemon wants Hello; systemd's private socket does not
}

// NewSystemd connects to the calling user's systemd manager: first the session bus
// (o.BusAddress, else $RuntimeDir/bus when that socket exists), then the manager's private
// socket $RuntimeDir/systemd/private. Only unix: addresses are dialled, so nothing can make
// godbus launch a bus. ctx bounds the connection attempts. When no manager answers, the error
// wraps ErrUnavailable and says what was tried.
func NewSystemd(ctx context.Context, o SystemdOptions) (Backend, error) {
	if o.UnitDir == "" || !filepath.IsAbs(o.UnitDir) {
		return nil, fmt.Errorf("systemd: unit directory %q is not an absolute path", o.UnitDir)
	}
	var cands []busCandidate
	var tried []string
	if o.BusAddress != "" {
		for _, a := range strings.Split(o.BusAddress, ";") {
			if strings.HasPrefix(a, "unix:") {
				cands = append(cands, busCandidate{addr: a, hello: true})
			} else if a != "" {
				tried = append(tried, fmt.Sprintf("%s (skipped: only unix: addresses are used)", a))
			}
		}
	}
	if o.RuntimeDir != "" {
		bus := filepath.Join(o.RuntimeDir, "bus")
		if fi, err := os.Stat(bus); err == nil && fi.Mode().Type() == os.ModeSocket {
			a := "unix:path=" + dbus.EscapeBusAddressValue(bus)
			if !strings.Contains(";"+o.BusAddress+";", ";"+a+";") {
				cands = append(cands, busCandidate{addr: a, hello: true})
			}
		} else {
			tried = append(tried, bus+" (no socket)")
		}
		private := filepath.Join(o.RuntimeDir, "systemd", "private")
		cands = append(cands, busCandidate{addr: "unix:path=" + dbus.EscapeBusAddressValue(private)})
	}
	for _, c := range cands {
		if err := ctx.Err(); err != nil {
			tried = append(tried, fmt.Sprintf("%s (%v)", c.addr, err))
			break
		}
		b, err := dialManager(ctx, c)
		if err == nil {
			b.o = o
			return b, nil
		}
		tried = append(tried, fmt.Sprintf("%s (%v)", c.addr, err))
	}
	user := o.User
	if user == "" {
		user = "this user"
	}
	if len(tried) == 0 {
		tried = append(tried, "nothing: neither a session bus address nor a runtime directory was given")
	}
	return nil, fmt.Errorf("%w: no systemd user manager reachable for %s; tried %s; is this a login "+
		"session with XDG_RUNTIME_DIR set? try `systemctl --user status` (on a server, "+
		"`loginctl enable-linger` keeps a user manager running without a login)",
		ErrUnavailable, user, strings.Join(tried, ", "))
}

// dialManager connects to one address and checks that a systemd manager answers there.
func dialManager(ctx context.Context, c busCandidate) (*systemdBackend, error) {
	// godbus closes a connection when the context it was dialled with ends, so the
	// connection gets a context of its own, cancelled only by Close or by ctx ending
	// while we are still connecting.
	connCtx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel)
	dial := func() (*dbus.Conn, error) {
		conn, err := dbus.Dial(c.addr, dbus.WithContext(connCtx))
		if err != nil {
			return nil, err
		}
		if err := conn.Auth([]dbus.Auth{dbus.AuthExternal(strconv.Itoa(os.Getuid()))}); err != nil {
			conn.Close()
			return nil, fmt.Errorf("authentication: %w", err)
		}
		if c.hello {
			if err := conn.Hello(); err != nil {
				conn.Close()
				return nil, fmt.Errorf("hello: %w", err)
			}
		}
		return conn, nil
	}
	// go-systemd dials twice (one connection for calls, one for the JobRemoved signals); one
	// connection carries both, so a process connects and authenticates once (issue 28: a wake
	// paid for two handshakes). The second dial hands back the first connection.
	var first *dbus.Conn
	conn, err := sd.NewConnection(func() (*dbus.Conn, error) {
		if first != nil {
			return first, nil
		}
		c, err := dial()
		first = c
		return c, err
	})
	if err != nil {
		stop()
		cancel()
		if ctx.Err() != nil {
			// The deadline closed the connection under the handshake: say that, not what the
			// closed connection returned ("use of closed network connection").
			return nil, fmt.Errorf("did not answer: %w", ctx.Err())
		}
		return nil, err
	}
	// A session bus may be up without the manager on it: ask the manager itself.
	if _, err := conn.SystemStateContext(ctx); err != nil {
		stop()
		conn.Close()
		cancel()
		return nil, fmt.Errorf("manager does not answer: %w", err)
	}
	if !stop() {
		conn.Close()
		cancel()
		return nil, ctx.Err()
	}
	return &systemdBackend{conn: conn, cancel: cancel, via: c.addr}, nil
}

func (b *systemdBackend) Name() string { return "systemd" }

// String says which manager the backend talks to (for logs and tests).
func (b *systemdBackend) String() string { return "systemd user manager via " + b.via }

func (b *systemdBackend) Close() error {
	b.conn.Close()
	b.cancel()
	return nil
}

func (b *systemdBackend) unitPath(name string) string { return filepath.Join(b.o.UnitDir, name) }

// writeUnit writes one unit file atomically, world-readable like every unit file. It leaves a
// file that already holds exactly this content alone (no write, no fsync), and reports whether
// it wrote.
func (b *systemdBackend) writeUnit(name string, opts []*unit.UnitOption) (bool, error) {
	data, err := serializeUnit(opts)
	if err != nil {
		return false, fmt.Errorf("render %s: %w", name, err)
	}
	if old, err := readUnitFile(b.unitPath(name)); err == nil && bytes.Equal(old, data) {
		return false, nil
	}
	if err := os.MkdirAll(b.o.UnitDir, 0o755); err != nil {
		return false, fmt.Errorf("create unit directory: %w", err)
	}
	return true, atomicfile.Write(b.unitPath(name), data, 0o644)
}

// readUnitFile reads a unit file of at most maxUnitFile bytes.
func readUnitFile(path string) ([]byte, error) {
	return confined.ReadPath(path, maxUnitFile)
}

// wantedBy lists the targets of the [Install] section's WantedBy= in opts.
func wantedBy(opts []*unit.UnitOption) []string {
	var out []string
	for _, o := range opts {
		if o.Section == "Install" && o.Name == "WantedBy" {
			out = append(out, strings.Fields(o.Value)...)
		}
	}
	return out
}

// enabled reports whether every link that enabling the unit would create is already in place:
// <target>.wants/<name> in the unit directory, pointing at the unit file. Then EnableUnitFiles
// would change nothing.
func (b *systemdBackend) enabled(name string, opts []*unit.UnitOption) bool {
	targets := wantedBy(opts)
	if len(targets) == 0 {
		return false
	}
	for _, t := range targets {
		dest, err := os.Readlink(filepath.Join(b.o.UnitDir, t+".wants", name))
		if err != nil || dest != b.unitPath(name) {
			return false
		}
	}
	return true
}

// settled reports whether the manager runs the unit as its file on disk describes it, started
// and waiting for its next event: loaded, no daemon-reload pending for it, active, waiting. Any
// doubt (an error, another state) is false. A path unit whose service runs (SubState running:
// the wake it started is the one asking) is settled too: restarting it there, at every
// hibernation of a wake the watcher started, reached the path unit's own start limit after a few
// messages, and systemd left the watcher failed (start-limit-hit) for good (issue 23, item 6).
func (b *systemdBackend) settled(ctx context.Context, name string) bool {
	sub := []any{"waiting"}
	if strings.HasSuffix(name, ".path") {
		sub = append(sub, "running")
	}
	want := []struct {
		prop string
		val  []any
	}{{"LoadState", []any{"loaded"}}, {"NeedDaemonReload", []any{false}}, {"ActiveState", []any{"active"}}, {"SubState", sub}}
	for _, w := range want {
		p, err := b.conn.GetUnitPropertyContext(ctx, name, w.prop)
		if err != nil || !slices.Contains(w.val, p.Value.Value()) {
			return false
		}
	}
	return true
}

// removeUnit removes one unit file; a missing file is not an error.
func (b *systemdBackend) removeUnit(name string) error {
	if err := os.Remove(b.unitPath(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	return nil
}

func (b *systemdBackend) exists(name string) bool {
	_, err := os.Lstat(b.unitPath(name))
	return err == nil
}

// runJob starts a manager job and waits (bounded by ctx) for its result: anything but "done"
// is an error.
func (b *systemdBackend) runJob(ctx context.Context, what, name string,
	start func(context.Context, string, string, chan<- string) (int, error)) error {
	// Buffered: go-systemd delivers the result while holding its job lock, and we may have
	// stopped listening when ctx ended.
	ch := make(chan string, 1)
	if _, err := start(ctx, name, "replace", ch); err != nil {
		return fmt.Errorf("%s %s: %w", what, name, err)
	}
	select {
	case res := <-ch:
		if res != "done" {
			return fmt.Errorf("%s %s: job %s (see `systemctl --user status %s`)", what, name, res, name)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s %s: waiting for the job: %w", what, name, ctx.Err())
	}
}

// install writes units, enables the one that has an [Install] section, reloads the manager and
// (re)starts that unit. The units it depends on are written first and the enabled one last,
// so the manager never sees a timer or watcher without its service.
//
// A reload is the expensive step of a wake: the manager reruns every generator and rereads
// every unit file (tens of milliseconds, see docs/BENCHMARKS.md). So install skips what would
// change nothing: files that already hold the content, EnableUnitFiles when the links are in
// place, and, when no file changed and the manager already runs the unit as it is on disk, the
// reload and the restart too (the inbox watcher of every wake is such an unchanged unit).
func (b *systemdBackend) install(ctx context.Context, deps map[string][]*unit.UnitOption, name string, opts []*unit.UnitOption) error {
	return b.installAll(ctx, []unitSet{{deps: deps, name: name, opts: opts}})
}

// unitSet is one unit to start (a timer, a path unit) with the units it needs (its service).
type unitSet struct {
	deps map[string][]*unit.UnitOption
	name string
	opts []*unit.UnitOption
}

// installAll writes every unit of the sets, enables what is not enabled, reloads the manager
// once (a reload costs tens of milliseconds, the largest part of a wake), and restarts each
// started unit. A set whose files did not change and whose unit is enabled, loaded and waiting
// is left alone.
func (b *systemdBackend) installAll(ctx context.Context, sets []unitSet) error {
	var todo []unitSet
	var enable []string
	written := map[string]bool{}
	for _, set := range sets {
		depNames := make([]string, 0, len(set.deps))
		for n := range set.deps {
			depNames = append(depNames, n)
		}
		sort.Strings(depNames)
		changed := false
		for _, n := range depNames {
			wrote, err := b.writeUnit(n, set.deps[n])
			if err != nil {
				return err
			}
			written[n] = wrote
			changed = changed || wrote
		}
		wrote, err := b.writeUnit(set.name, set.opts)
		if err != nil {
			return err
		}
		written[set.name] = wrote
		changed = changed || wrote
		enabled := b.enabled(set.name, set.opts)
		if !changed && enabled && b.settled(ctx, set.name) {
			continue
		}
		if !enabled {
			enable = append(enable, set.name)
		}
		todo = append(todo, set)
	}
	if len(todo) == 0 {
		return nil
	}
	// Enabled by name, which the manager looks up in its own unit search path. (A full path
	// would also be accepted, but one the manager spells differently, through a symlink for
	// example, would make it link the file onto itself.) force replaces a stale link.
	if len(enable) > 0 {
		if _, _, err := b.conn.EnableUnitFilesContext(ctx, enable, false, true); err != nil {
			return fmt.Errorf("enable %s: %w (is %s the user manager's unit directory?)", strings.Join(enable, ", "), err, b.o.UnitDir)
		}
	}
	var names []string
	for _, set := range todo {
		names = append(names, set.name)
		for n := range set.deps {
			names = append(names, n)
		}
	}
	if err := b.reloadIfStale(ctx, written, names...); err != nil {
		return err
	}
	for _, set := range todo {
		if err := b.runJob(ctx, "start", set.name, b.conn.RestartUnitContext); err != nil {
			return err
		}
	}
	return nil
}

// reloadIfStale reloads the user manager when it holds one of the units in an older version
// than its file (NeedDaemonReload): a file this call rewrote, or one a process that died
// before its reload left behind; or when a unit whose file was just written (written) does not
// load from it (a unit the manager keeps from a failed earlier start, with its file removed
// since, stays "not-found" until a reload). Asking about a unit the manager has not loaded
// loads it from its file, so a unit it sees for the first time needs no reload. A reload is the
// expensive step (the manager reruns every generator and rereads every unit file: tens of
// milliseconds, more with every unit the user has), so it happens only when it changes
// something.
func (b *systemdBackend) reloadIfStale(ctx context.Context, written map[string]bool, names ...string) error {
	stale := false
	for _, n := range names {
		p, err := b.conn.GetUnitPropertyContext(ctx, n, "NeedDaemonReload")
		if err != nil {
			return fmt.Errorf("read %s: %w", n, err)
		}
		if v, _ := p.Value.Value().(bool); v {
			stale = true
			break
		}
		if written[n] {
			p, err := b.conn.GetUnitPropertyContext(ctx, n, "LoadState")
			if err != nil {
				return fmt.Errorf("read %s: %w", n, err)
			}
			if v, _ := p.Value.Value().(string); v != "loaded" {
				stale = true
				break
			}
		}
	}
	if !stale {
		return nil
	}
	if err := b.conn.ReloadContext(ctx); err != nil {
		return fmt.Errorf("reload the user manager: %w", err)
	}
	return nil
}

func (b *systemdBackend) uninstall(ctx context.Context, name string, alsoRemove ...string) error {
	if err := b.runJob(ctx, "stop", name, b.conn.StopUnitContext); err != nil && !isNoSuchUnit(err) {
		return err
	}
	if _, err := b.conn.DisableUnitFilesContext(ctx, []string{name}, false); err != nil && !isNoSuchUnit(err) && b.exists(name) {
		return fmt.Errorf("disable %s: %w", name, err)
	}
	for _, n := range append([]string{name}, alsoRemove...) {
		if err := b.removeUnit(n); err != nil {
			return err
		}
	}
	if err := atomicfile.SyncDir(b.o.UnitDir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := b.conn.ReloadContext(ctx); err != nil {
		return fmt.Errorf("reload the user manager: %w", err)
	}
	return nil
}

// isNoSuchUnit reports the manager's answer for a unit or unit file that does not exist.
func isNoSuchUnit(err error) bool {
	var name string
	var de dbus.Error
	var dp *dbus.Error
	switch {
	case errors.As(err, &de):
		name = de.Name
	case errors.As(err, &dp):
		name = dp.Name
	}
	switch name {
	case "org.freedesktop.systemd1.NoSuchUnit", "org.freedesktop.systemd1.LoadFailed":
		return true
	}
	return strings.Contains(err.Error(), "not loaded") || strings.Contains(err.Error(), "does not exist")
}

// isUnitExists reports the manager's refusal to create a transient unit under a name that is
// loaded already.
func isUnitExists(err error) bool {
	var de dbus.Error
	var dp *dbus.Error
	switch {
	case errors.As(err, &de):
		return de.Name == "org.freedesktop.systemd1.UnitExists"
	case errors.As(err, &dp):
		return dp.Name == "org.freedesktop.systemd1.UnitExists"
	}
	return false
}

// Arm keeps each job's service on disk (written when its content changes: a new binary, a
// reload) and creates the job's timer as a transient unit over D-Bus. A transient timer needs
// no unit file and no daemon-reload, so a wake costs the same whatever the number of chambers
// and unit files of the user (docs/BENCHMARKS.md). It does not survive a restart of the user
// manager: the boot unit (SystemdBoot, enabled here) runs the wake at the next start, which
// re-arms from the state.
func (b *systemdBackend) Arm(ctx context.Context, c Chamber, jobs ...Job) error {
	var services []unitSet
	var timers []transientTimer
	boot := c.Boot
	for _, j := range jobs {
		svc, tmr, err := SystemdUnits(c, j)
		if err != nil {
			return err
		}
		props, err := timerProperties(tmr)
		if err != nil {
			return err
		}
		services = append(services, unitSet{name: SystemdServiceName(c.ID, j.Kind), opts: svc})
		timers = append(timers, transientTimer{name: SystemdTimerName(c.ID, j.Kind), props: props})
		if j.Kind == Wake && len(boot) == 0 {
			boot = j.Argv
		}
	}
	var bootOpts []*unit.UnitOption
	if len(boot) > 0 {
		var err error
		if bootOpts, err = SystemdBoot(c, boot); err != nil {
			return fmt.Errorf("boot unit: %w", err)
		}
	}
	if err := b.migrate(ctx, c.ID); err != nil {
		return err
	}
	names := make([]string, 0, len(services))
	written := map[string]bool{}
	for _, s := range services {
		wrote, err := b.writeUnit(s.name, s.opts)
		if err != nil {
			return err
		}
		written[s.name] = wrote
		names = append(names, s.name)
	}
	if bootOpts != nil {
		if err := b.ensureBoot(ctx, c.ID, bootOpts); err != nil {
			return err
		}
	}
	if err := b.reloadIfStale(ctx, written, names...); err != nil {
		return err
	}
	return b.startTimers(ctx, timers)
}

// ensureBoot writes and enables the chamber's boot unit. It needs no reload: the manager only
// reads it when it starts.
func (b *systemdBackend) ensureBoot(ctx context.Context, id string, opts []*unit.UnitOption) error {
	name := SystemdBootName(id)
	if _, err := b.writeUnit(name, opts); err != nil {
		return err
	}
	if b.enabled(name, opts) {
		return nil
	}
	// Enabled by name, which the manager looks up in its own unit search path (see installAll).
	if _, _, err := b.conn.EnableUnitFilesContext(ctx, []string{name}, false, true); err != nil {
		return fmt.Errorf("enable %s: %w (is %s the user manager's unit directory?)", name, err, b.o.UnitDir)
	}
	return nil
}

// startTimer creates the transient timer name. A timer of that name that is still armed (a
// re-arm at a new time) is stopped first: a stopped transient timer is unloaded at once
// (CollectMode=inactive-or-failed), and the name is free again.
func (b *systemdBackend) startTimer(ctx context.Context, name string, props []sd.Property) error {
	start := func(ctx context.Context, name, mode string, ch chan<- string) (int, error) {
		return b.conn.StartTransientUnitContext(ctx, name, mode, props, ch)
	}
	for attempt := 0; ; attempt++ {
		err := b.runJob(ctx, "arm", name, start)
		if err == nil || !isUnitExists(err) || attempt == 2 {
			if isUnitExists(err) {
				return fmt.Errorf("%w (a unit file named %s in the manager's search path? `systemctl --user cat %s` shows it)", err, name, name)
			}
			return err
		}
		if err := b.runJob(ctx, "stop", name, b.conn.StopUnitContext); err != nil && !isNoSuchUnit(err) {
			return err
		}
		if attempt == 1 {
			// A timer whose last start failed stays loaded until its failure is reset.
			_ = b.conn.ResetFailedUnitContext(ctx, name)
		}
	}
}

// migrate removes the timer unit files an earlier cryochamber wrote (one file per timer,
// changed and reloaded at every wake): the transient timers take their names. It runs only
// when such a file exists, once per chamber.
func (b *systemdBackend) migrate(ctx context.Context, id string) error {
	var old []string
	for _, k := range Kinds {
		if n := SystemdTimerName(id, k); b.exists(n) {
			old = append(old, n)
		}
	}
	if len(old) == 0 {
		return nil
	}
	for _, n := range old {
		if err := b.runJob(ctx, "stop", n, b.conn.StopUnitContext); err != nil && !isNoSuchUnit(err) {
			return err
		}
	}
	if _, err := b.conn.DisableUnitFilesContext(ctx, old, false); err != nil && !isNoSuchUnit(err) {
		return fmt.Errorf("disable %s: %w", strings.Join(old, ", "), err)
	}
	for _, n := range old {
		if err := b.removeUnit(n); err != nil {
			return err
		}
	}
	if err := atomicfile.SyncDir(b.o.UnitDir); err != nil {
		return err
	}
	// The old timers are loaded from their files (and wanted by timers.target): only a reload
	// unloads them, so that transient timers can take the names.
	if err := b.conn.ReloadContext(ctx); err != nil {
		return fmt.Errorf("reload the user manager: %w", err)
	}
	return nil
}

// timerLoaded reports whether the manager has the timer loaded (armed, or running its job).
func (b *systemdBackend) timerLoaded(ctx context.Context, name string) (bool, error) {
	p, err := b.conn.GetUnitPropertyContext(ctx, name, "LoadState")
	if err != nil {
		if isNoSuchUnit(err) {
			return false, nil
		}
		return false, fmt.Errorf("read %s: %w", name, err)
	}
	s, _ := p.Value.Value().(string)
	return s == "loaded", nil
}

// dropBootIfAlone removes the chamber's boot unit once nothing of the chamber is left to start
// (no service, no inbox watcher), then reloads the manager so that it forgets the unit.
func (b *systemdBackend) dropBootIfAlone(ctx context.Context, id string) error {
	name := SystemdBootName(id)
	if !b.exists(name) || b.exists(SystemdPathName(id)) {
		return nil
	}
	for _, k := range Kinds {
		if b.exists(SystemdServiceName(id, k)) {
			return nil
		}
	}
	if _, err := b.conn.DisableUnitFilesContext(ctx, []string{name}, false); err != nil && !isNoSuchUnit(err) && b.exists(name) {
		return fmt.Errorf("disable %s: %w", name, err)
	}
	if err := b.removeUnit(name); err != nil {
		return err
	}
	if err := atomicfile.SyncDir(b.o.UnitDir); err != nil {
		return err
	}
	// One reload when the plan ends (off the wake path): without it the manager keeps the boot
	// unit loaded in memory, and "no units left" would not be true (issue 23, item 5).
	if err := b.conn.ReloadContext(ctx); err != nil {
		return fmt.Errorf("reload the user manager: %w", err)
	}
	return nil
}

func (b *systemdBackend) Next(ctx context.Context, id string, k Kind) (time.Time, bool, error) {
	if err := checkID(id); err != nil {
		return time.Time{}, false, err
	}
	return b.nextOf(ctx, SystemdTimerName(id, k)) // systemd_batch.go
}

func (b *systemdBackend) Disarm(ctx context.Context, id string, k Kind) error {
	if err := checkID(id); err != nil {
		return err
	}
	if err := checkKind(k); err != nil {
		return err
	}
	svc := SystemdServiceName(id, k)
	tmr := SystemdTimerName(id, k)
	if b.exists(tmr) {
		// A timer file of an earlier cryochamber.
		if err := b.uninstall(ctx, tmr); err != nil {
			return err
		}
	}
	// The service itself is never stopped: Disarm may be called by the very wake it runs.
	if err := b.runJob(ctx, "stop", tmr, b.conn.StopUnitContext); err != nil && !isNoSuchUnit(err) {
		return err
	}
	// The inbox watcher starts the wake service: keep it while the watcher is installed.
	if k != Wake || !b.exists(SystemdPathName(id)) {
		if err := b.removeUnit(svc); err != nil {
			return err
		}
		if err := atomicfile.SyncDir(b.o.UnitDir); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if err := b.conn.ResetFailedUnitContext(ctx, svc); err != nil && !isNoSuchUnit(err) {
		return fmt.Errorf("reset %s: %w", svc, err)
	}
	return b.dropBootIfAlone(ctx, id)
}

func (b *systemdBackend) Watch(ctx context.Context, c Chamber, dir string, wakeArgv []string) error {
	path, wake, err := SystemdPath(c, dir, wakeArgv)
	if err != nil {
		return err
	}
	deps := map[string][]*unit.UnitOption{}
	// An armed wake timer has installed the wake service already (with the same command);
	// it is not rewritten under it.
	if svc := SystemdServiceName(c.ID, Wake); !b.exists(svc) {
		deps[svc] = wake
	}
	if err := b.install(ctx, deps, SystemdPathName(c.ID), path); err != nil {
		return err
	}
	boot := c.Boot
	if len(boot) == 0 {
		boot = wakeArgv
	}
	bootOpts, err := SystemdBoot(c, boot)
	if err != nil {
		return fmt.Errorf("boot unit: %w", err)
	}
	return b.ensureBoot(ctx, c.ID, bootOpts)
}

func (b *systemdBackend) Unwatch(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	var extra []string
	// A wake service that no wake timer uses was installed for the watcher alone.
	armed, err := b.timerLoaded(ctx, SystemdTimerName(id, Wake))
	if err != nil {
		return err
	}
	if !armed {
		extra = append(extra, SystemdServiceName(id, Wake))
	}
	if err := b.uninstall(ctx, SystemdPathName(id), extra...); err != nil {
		return err
	}
	return b.dropBootIfAlone(ctx, id)
}

func (b *systemdBackend) RunNow(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	svc := SystemdServiceName(id, Wake)
	if !b.exists(svc) {
		return fmt.Errorf("start %s: no such unit in %s (is the chamber started?)", svc, b.o.UnitDir)
	}
	// Queue the start and return: the session may run for hours.
	if _, err := b.conn.StartUnitContext(ctx, svc, "replace", nil); err != nil {
		return fmt.Errorf("start %s: %w", svc, err)
	}
	return nil
}

// unitSuffixes maps the names of a chamber's units to what they are. Timers are transient
// (listed by the manager); a timer file is one an earlier cryochamber wrote.
var unitSuffixes = []struct {
	suffix  string
	kind    Kind
	timer   bool
	service bool
	watch   bool
	boot    bool
}{
	{suffix: "-wake.timer", kind: Wake, timer: true},
	{suffix: "-fallback.timer", kind: Fallback, timer: true},
	{suffix: "-wake.service", kind: Wake, service: true},
	{suffix: "-fallback.service", kind: Fallback, service: true},
	{suffix: "-alert.timer", kind: Alert, timer: true},
	{suffix: "-alert.service", kind: Alert, service: true},
	{suffix: "-inbox.path", watch: true},
	{suffix: "-boot.service", boot: true},
}

// Installed lists the chambers that have units: their files in the unit directory, and the
// transient timers the manager holds.
func (b *systemdBackend) Installed(ctx context.Context) ([]Installed, error) {
	var timers []string
	units, err := b.conn.ListUnitsByPatternsContext(ctx, nil, []string{Prefix + "*.timer", Prefix + "*.path"})
	if err != nil {
		return nil, fmt.Errorf("list the timers of the user manager: %w", err)
	}
	watching := map[string]bool{} // path units the manager runs
	for _, u := range units {
		if u.LoadState != "loaded" || u.ActiveState != "active" {
			continue
		}
		if strings.HasSuffix(u.Name, ".path") {
			watching[u.Name] = true
		} else {
			timers = append(timers, u.Name)
		}
	}
	installed, err := installedUnits(ctx, b.o.UnitDir, timers)
	for i, in := range installed {
		installed[i].WatchStopped = in.Watch && !watching[SystemdPathName(in.ID)]
	}
	return installed, err
}

// installedUnits scans dir for cryochamber units and groups them by chamber, with the timers
// the manager reported (transient ones have no file). The chamber directory comes from the
// `--dir` argument of the wake (else fallback, alert, boot) service; it is left empty when no
// service says it.
func installedUnits(ctx context.Context, dir string, timers []string) ([]Installed, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	byID := map[string]*Installed{}
	services := map[string][]Kind{}
	boots := map[string]bool{}
	var names []string
	for _, e := range ents {
		if name := e.Name(); strings.HasPrefix(name, Prefix) && e.Type().IsRegular() {
			names = append(names, name)
		}
	}
	seen := map[string]bool{}
	for _, name := range append(names, timers...) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		for _, s := range unitSuffixes {
			id, ok := strings.CutSuffix(name, s.suffix)
			if !ok || checkID(id) != nil {
				continue
			}
			in := byID[id]
			if in == nil {
				in = &Installed{ID: id}
				byID[id] = in
			}
			switch {
			case s.timer:
				in.Kinds = append(in.Kinds, s.kind)
			case s.watch:
				in.Watch = true
			case s.service:
				services[id] = append(services[id], s.kind)
			case s.boot:
				boots[id] = true
			}
			break
		}
	}
	out := make([]Installed, 0, len(byID))
	for id, in := range byID {
		for _, k := range Kinds { // wake first: it is the service every chamber has
			if in.Dir != "" || !containsKind(services[id], k) {
				continue
			}
			in.Dir = chamberDirOf(filepath.Join(dir, SystemdServiceName(id, k)))
		}
		if in.Dir == "" && boots[id] {
			in.Dir = chamberDirOf(filepath.Join(dir, SystemdBootName(id)))
		}
		sort.Slice(in.Kinds, func(i, j int) bool { return kindIndex(in.Kinds[i]) < kindIndex(in.Kinds[j]) })
		out = append(out, *in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func containsKind(ks []Kind, k Kind) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

func kindIndex(k Kind) int {
	for i, x := range Kinds {
		if x == k {
			return i
		}
	}
	return len(Kinds)
}

// chamberDirOf reads a service file's ExecStart= and returns its --dir argument, or "".
func chamberDirOf(path string) string {
	data, err := confined.ReadPath(path, maxUnitFile)
	if err != nil {
		return ""
	}
	exec, ok := execStartOf(string(data))
	if !ok {
		return ""
	}
	argv, err := UnquoteExec(exec)
	if err != nil {
		return ""
	}
	return dirArg(argv)
}

// execStartOf returns the value of the first ExecStart= in the [Service] section of a unit
// file that cryochamber wrote (one directive per line, no continuation lines). go-systemd's
// deserializer is not used here: it refuses lines over 2 KiB, and a long chamber path makes
// a longer ExecStart= line than that.
func execStartOf(text string) (string, bool) {
	section := ""
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[' && line[len(line)-1] == ']':
			section = line[1 : len(line)-1]
		case section == "Service":
			if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
				return strings.TrimSpace(v), true
			}
		}
	}
	return "", false
}

// dirArg finds `--dir X` or `--dir=X` in argv.
func dirArg(argv []string) string {
	for i, a := range argv {
		if a == "--dir" && i+1 < len(argv) {
			return argv[i+1]
		}
		if v, ok := strings.CutPrefix(a, "--dir="); ok {
			return v
		}
	}
	return ""
}

func (b *systemdBackend) Warnings(ctx context.Context) []string {
	if b.o.LingerFile == "" {
		return nil
	}
	user := b.o.User
	if user == "" {
		user = filepath.Base(b.o.LingerFile)
	}
	_, err := os.Stat(b.o.LingerFile)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrNotExist):
		return []string{fmt.Sprintf("lingering is off for user %s: user timers stop when you log out "+
			"(hint: loginctl enable-linger %s)", user, user)}
	default:
		return []string{fmt.Sprintf("cannot tell whether lingering is on for user %s: %v", user, err)}
	}
}

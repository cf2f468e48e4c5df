package timer

// This file holds the one timer of a chamber that repeats: `cryochamber sync` every
// poll_interval, which carries the mailbox to email, GitHub and Zulip. The wake and fallback
// timers fire once at a time; this one fires at arming, then at a fixed interval, and nothing
// of ours runs in between. The builders are plain functions (Linux tests check both); the
// backends reuse the wake timers' escaping, unit writing and launchctl calls.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/coreos/go-systemd/v22/unit"
	"howett.net/plist"

	"github.com/cryochamber/cryochamber/internal/atomicfile"
)

// SyncJob is the role name of the sync timer: `<ID>-sync.timer`, `dev.cryochamber.<ID>.sync`.
// It is not one of Kinds: Backend's one-shot methods never see it.
const SyncJob Kind = "sync"

// syncTimeout bounds one sync on systemd. A sync bounds each of its own requests; this is the
// backstop that keeps a hung one from blocking every later poll (a timer never starts a second
// copy of a service that is still running).
const syncTimeout = 15 * time.Minute

// MinSyncInterval is the shortest interval the builders accept.
const MinSyncInterval = time.Second

// Poller is a backend that can run a chamber's sync at a fixed interval. Both backends are
// Pollers; callers assert it (`be.(timer.Poller)`).
type Poller interface {
	// ArmPoll installs (or replaces) the sync timer of c: run argv now, then every interval.
	ArmPoll(ctx context.Context, c Chamber, every time.Duration, argv []string) error
	// DisarmPoll stops and removes it. Removing a missing one is not an error.
	DisarmPoll(ctx context.Context, id string) error
	// PollArmed reports whether the OS has the sync timer loaded and active.
	PollArmed(ctx context.Context, id string) (bool, error)
}

// SystemdSyncTimerName is the sync timer: `<ID>-sync.timer`.
func SystemdSyncTimerName(id string) string { return id + "-sync.timer" }

// SystemdSyncServiceName is the service it starts: `<ID>-sync.service`.
func SystemdSyncServiceName(id string) string { return id + "-sync.service" }

// LaunchdSyncLabel is the sync agent: `dev.cryochamber.<ID>.sync`.
func LaunchdSyncLabel(id string) string { return LabelPrefix + id + "." + string(SyncJob) }

// intervalSeconds is the interval in whole seconds, rounded up (a poll never comes early).
func intervalSeconds(every time.Duration) (int64, error) {
	if every < MinSyncInterval {
		return 0, fmt.Errorf("sync interval %v is shorter than %v", every, MinSyncInterval)
	}
	s := int64(math.Ceil(every.Seconds()))
	if s > 366*24*3600 {
		return 0, fmt.Errorf("sync interval %v is longer than a year", every)
	}
	return s, nil
}

// SystemdSyncUnits builds `<ID>-sync.service`, which runs argv with the chamber's environment
// file, and `<ID>-sync.timer`, which starts it a second after the timer starts (at arming, and
// at every start of the user manager) and then every interval after the service last started.
// OnUnitActiveSec counts from the last start, whatever its result: a sync that failed (a server
// down) is simply tried again at the next poll.
func SystemdSyncUnits(c Chamber, every time.Duration, argv []string) (service, timer []*unit.UnitOption, err error) {
	secs, err := intervalSeconds(every)
	if err != nil {
		return nil, nil, err
	}
	service, err = serviceUnit(c, SyncJob, argv)
	if err != nil {
		return nil, nil, err
	}
	for _, o := range service {
		if o.Section == "Service" && o.Name == "TimeoutStartSec" {
			o.Value = fmt.Sprintf("%ds", int64(syncTimeout.Seconds()))
		}
	}
	timer = []*unit.UnitOption{
		unit.NewUnitOption("Unit", "Description", "cryochamber sync timer for "+c.ID),
		unit.NewUnitOption("Timer", "OnActiveSec", "1s"),
		unit.NewUnitOption("Timer", "OnUnitActiveSec", fmt.Sprintf("%ds", secs)),
		unit.NewUnitOption("Timer", "AccuracySec", "1s"),
		unit.NewUnitOption("Timer", "Unit", SystemdSyncServiceName(c.ID)),
		unit.NewUnitOption("Install", "WantedBy", "timers.target"),
	}
	return service, timer, nil
}

// LaunchdSyncPlist builds the sync agent's plist: a chamber agent (the same checks, paths and
// environment as the wake agent) that starts at load and then every interval (StartInterval,
// in seconds). launchd runs one copy at a time and coalesces the intervals a sleeping Mac
// missed into one run.
func LaunchdSyncPlist(c Chamber, every time.Duration, argv []string) ([]byte, error) {
	secs, err := intervalSeconds(every)
	if err != nil {
		return nil, err
	}
	a, err := newAgent(c, LaunchdSyncLabel(c.ID), argv)
	if err != nil {
		return nil, fmt.Errorf("sync agent: %w", err)
	}
	a.RunAtLoad = true
	// The agent's own keys, plus StartInterval, which the one-shot agents never carry: the
	// agent goes through a dictionary so that its type stays the wake agent's.
	base, err := a.encode()
	if err != nil {
		return nil, err
	}
	var dict map[string]any
	if _, err := plist.Unmarshal(base, &dict); err != nil {
		return nil, fmt.Errorf("encode %s: %w", a.Label, err)
	}
	dict["StartInterval"] = secs
	data, err := plist.MarshalIndent(dict, plist.XMLFormat, "\t")
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", a.Label, err)
	}
	return append(data, '\n'), nil
}

func (b *systemdBackend) ArmPoll(ctx context.Context, c Chamber, every time.Duration, argv []string) error {
	svc, tmr, err := SystemdSyncUnits(c, every, argv)
	if err != nil {
		return err
	}
	return b.installAll(ctx, []unitSet{{deps: map[string][]*unit.UnitOption{SystemdSyncServiceName(c.ID): svc}, name: SystemdSyncTimerName(c.ID), opts: tmr}})
}

func (b *systemdBackend) DisarmPoll(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if err := b.uninstall(ctx, SystemdSyncTimerName(id), SystemdSyncServiceName(id)); err != nil {
		return err
	}
	if err := b.conn.ResetFailedUnitContext(ctx, SystemdSyncServiceName(id)); err != nil && !isNoSuchUnit(err) {
		return fmt.Errorf("reset %s: %w", SystemdSyncServiceName(id), err)
	}
	return nil
}

func (b *systemdBackend) PollArmed(ctx context.Context, id string) (bool, error) {
	if err := checkID(id); err != nil {
		return false, err
	}
	name := SystemdSyncTimerName(id)
	for _, w := range []struct{ prop, val string }{{"LoadState", "loaded"}, {"ActiveState", "active"}} {
		p, err := b.conn.GetUnitPropertyContext(ctx, name, w.prop)
		if err != nil {
			if isNoSuchUnit(err) {
				return false, nil
			}
			return false, fmt.Errorf("read %s: %w", name, err)
		}
		if s, _ := p.Value.Value().(string); s != w.val {
			return false, nil
		}
	}
	return true, nil
}

// ArmPoll writes the sync agent and (re)loads it. Unlike a wake, a sync can be replaced while
// it runs: bootout stops it, and a sync stopped halfway loses nothing (its state is recorded
// step by step), so one label is enough.
func (b *launchdBackend) ArmPoll(ctx context.Context, c Chamber, every time.Duration, argv []string) error {
	data, err := LaunchdSyncPlist(c, every, argv)
	if err != nil {
		return err
	}
	label := LaunchdSyncLabel(c.ID)
	path := b.plistPath(label)
	j, err := b.print(ctx, label)
	if err != nil {
		return err
	}
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, data) && j != nil {
		return nil
	}
	if err := os.MkdirAll(b.o.AgentsDir, 0o755); err != nil {
		return fmt.Errorf("create agents directory: %w", err)
	}
	if err := atomicfile.Write(path, data, 0o644); err != nil {
		return err
	}
	if j != nil {
		if err := b.bootout(ctx, label); err != nil {
			return err
		}
	}
	return b.bootstrap(ctx, label, path)
}

func (b *launchdBackend) DisarmPoll(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	label := LaunchdSyncLabel(id)
	if err := os.Remove(b.plistPath(label)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", b.plistPath(label), err)
	}
	if err := atomicfile.SyncDir(b.o.AgentsDir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return b.bootout(ctx, label)
}

func (b *launchdBackend) PollArmed(ctx context.Context, id string) (bool, error) {
	if err := checkID(id); err != nil {
		return false, err
	}
	j, err := b.print(ctx, LaunchdSyncLabel(id))
	return j != nil, err
}

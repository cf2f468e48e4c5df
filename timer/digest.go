package timer

// This file holds the one timer of a user (not of a chamber) that sends the digests: every
// chamber with `digest = "daily 09:00"` or `"weekly mon 09:00"` adds its time, in its own zone,
// to one calendar timer, which runs `cryochamber digest --all --due --send`; that run sends the
// digests whose time has come and exits. Nothing of ours runs between. The timer is a unit
// file with Persistent=true: a digest time that passed while the machine was off is caught up
// at the next start of the user manager.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/unit"
	"howett.net/plist"

	"github.com/cryochamber/cryochamber/internal/atomicfile"
)

// Names of the digest units. They do not start with Prefix, so `ps` never takes them for a
// chamber's.
const (
	DigestTimerUnit   = "cryochamber-digest.timer"
	DigestServiceUnit = "cryochamber-digest.service"
)

// DigestJob is the user's digest timer.
type DigestJob struct {
	// Argv runs the digests: the absolute path of the cryochamber binary, then "digest",
	// "--all", "--due", "--send".
	Argv []string
	// Calendars are the times, as systemd calendar expressions with their zone
	// ("Mon *-*-* 09:00:00 Europe/Berlin"), one per distinct schedule.
	Calendars []string
	// EnvFile is the 0600 file of PATH, HOME and XDG_STATE_HOME the service runs with, so it
	// finds the same private state as the command that installed it.
	EnvFile string

	// For launchd, which has neither zones in its calendar nor an environment file: the next
	// time of each schedule (their minutes of the hour in the Mac's zone are what the agent
	// fires at), PATH, HOME and XDG_STATE_HOME for EnvironmentVariables, and where its output
	// goes.
	Next           []time.Time
	Env            []string
	Stdout, Stderr string
}

// LaunchdDigestLabel is the digest LaunchAgent's label (no chamber ID in it, like the
// dashboard's, so `ps` never takes it for a chamber's).
const LaunchdDigestLabel = "dev.cryochamber-digest"

// digestAgent is the digest LaunchAgent: launchd's calendar has no zone, so it fires every hour
// at the minutes the digests fall on in the Mac's zone (and at every load: a login after the Mac
// was off), and `digest --all --due --send` sends only what is due. A short run an hour, not a
// daemon; on systemd the calendar carries the zone and nothing runs between.
type digestAgent struct {
	Label                 string            `plist:"Label"`
	ProgramArguments      []string          `plist:"ProgramArguments"`
	EnvironmentVariables  map[string]string `plist:"EnvironmentVariables,omitempty"`
	StandardOutPath       string            `plist:"StandardOutPath"`
	StandardErrorPath     string            `plist:"StandardErrorPath"`
	StartCalendarInterval []map[string]int  `plist:"StartCalendarInterval"`
	RunAtLoad             bool              `plist:"RunAtLoad"`
	ProcessType           string            `plist:"ProcessType"`
}

// LaunchdDigestPlist builds the digest agent for a Mac in zone mac.
func LaunchdDigestPlist(d DigestJob, mac *time.Location) ([]byte, error) {
	if len(d.Next) == 0 {
		return nil, fmt.Errorf("digest agent: no schedule")
	}
	if err := checkArgv(d.Argv); err != nil {
		return nil, fmt.Errorf("digest agent: %w", err)
	}
	for _, p := range []struct{ what, path string }{{"stdout path", d.Stdout}, {"stderr path", d.Stderr}} {
		if err := checkPlistPath(p.what, p.path); err != nil {
			return nil, fmt.Errorf("digest agent: %w", err)
		}
	}
	env, err := plistEnv(d.Env)
	if err != nil {
		return nil, fmt.Errorf("digest agent: %w", err)
	}
	var minutes []int
	for _, t := range d.Next {
		minutes = append(minutes, t.In(mac).Minute())
	}
	slices.Sort(minutes)
	a := digestAgent{Label: LaunchdDigestLabel, ProgramArguments: slices.Clone(d.Argv), EnvironmentVariables: env,
		StandardOutPath: d.Stdout, StandardErrorPath: d.Stderr, RunAtLoad: true, ProcessType: "Background"}
	for _, m := range slices.Compact(minutes) {
		a.StartCalendarInterval = append(a.StartCalendarInterval, map[string]int{"Minute": m})
	}
	data, err := plist.MarshalIndent(a, plist.XMLFormat, "\t")
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", LaunchdDigestLabel, err)
	}
	return append(data, '\n'), nil
}

// SystemdDigestUnits builds the digest service and its timer.
func SystemdDigestUnits(d DigestJob) (service, timer []*unit.UnitOption, err error) {
	if len(d.Calendars) == 0 {
		return nil, nil, fmt.Errorf("digest timer: no calendar")
	}
	exec, err := ExecLine(d.Argv)
	if err != nil {
		return nil, nil, fmt.Errorf("digest service: %w", err)
	}
	service = []*unit.UnitOption{
		unit.NewUnitOption("Unit", "Description", "cryochamber digests of this user's chambers"),
		unit.NewUnitOption("Service", "Type", "oneshot"),
		unit.NewUnitOption("Service", "ExecStart", exec),
		unit.NewUnitOption("Service", "TimeoutStartSec", "30min"),
	}
	if d.EnvFile != "" {
		p, err := EscapeGlobPath(d.EnvFile)
		if err != nil {
			return nil, nil, fmt.Errorf("digest service: %w", err)
		}
		service = append(service, unit.NewUnitOption("Service", "EnvironmentFile", "-"+p))
	}
	timer = []*unit.UnitOption{unit.NewUnitOption("Unit", "Description", "cryochamber digests: one timer for every chamber of this user")}
	cals := slices.Clone(d.Calendars)
	slices.Sort(cals)
	for _, c := range slices.Compact(cals) {
		if strings.ContainsAny(c, "\n\r%\\") {
			return nil, nil, fmt.Errorf("digest timer: calendar %q is not a plain calendar expression", c)
		}
		timer = append(timer, unit.NewUnitOption("Timer", "OnCalendar", c))
	}
	timer = append(timer,
		unit.NewUnitOption("Timer", "Persistent", "true"),
		unit.NewUnitOption("Timer", "AccuracySec", "1s"),
		unit.NewUnitOption("Timer", "Unit", DigestServiceUnit),
		unit.NewUnitOption("Install", "WantedBy", "timers.target"),
	)
	return service, timer, nil
}

// InstallDigest installs (or replaces) the user's digest timer.
func InstallDigest(ctx context.Context, be Backend, d DigestJob) error {
	switch b := be.(type) {
	case *systemdBackend:
		service, tmr, err := SystemdDigestUnits(d)
		if err != nil {
			return err
		}
		return b.installAll(ctx, []unitSet{{deps: map[string][]*unit.UnitOption{DigestServiceUnit: service}, name: DigestTimerUnit, opts: tmr}})
	case *launchdBackend:
		zone, err := SystemZone(b.o.Localtime)
		if err != nil {
			return err
		}
		data, err := LaunchdDigestPlist(d, zone.Loc)
		if err != nil {
			return err
		}
		path := b.plistPath(LaunchdDigestLabel)
		if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, data) {
			if j, err := b.print(ctx, LaunchdDigestLabel); err == nil && j != nil {
				return nil // the same agent is loaded
			}
		}
		if err := os.MkdirAll(b.o.AgentsDir, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", b.o.AgentsDir, err)
		}
		if err := b.bootout(ctx, LaunchdDigestLabel); err != nil {
			return err
		}
		if err := atomicfile.Write(path, data, 0o644); err != nil {
			return err
		}
		return b.bootstrap(ctx, LaunchdDigestLabel, path)
	}
	return fmt.Errorf("the %s backend has no digest timer", be.Name())
}

// UninstallDigest removes the digest timer (no chamber wants a digest any more). Removing what
// is not installed is not an error.
func UninstallDigest(ctx context.Context, be Backend) error {
	switch b := be.(type) {
	case *systemdBackend:
		return b.uninstall(ctx, DigestTimerUnit, DigestServiceUnit)
	case *launchdBackend:
		if err := b.bootout(ctx, LaunchdDigestLabel); err != nil {
			return err
		}
		if err := os.Remove(b.plistPath(LaunchdDigestLabel)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// DigestInstalled reports whether the user's digest timer is installed (its unit file is
// there): a command that takes a chamber without a digest out of it has nothing to do
// otherwise, and must not make the manager reload for nothing.
func DigestInstalled(be Backend) bool {
	switch b := be.(type) {
	case *systemdBackend:
		return b.exists(DigestTimerUnit) || b.exists(DigestServiceUnit)
	case *launchdBackend:
		_, err := os.Lstat(b.plistPath(LaunchdDigestLabel))
		return err == nil
	}
	return false
}

package timer

// This file holds the one timer of a user (not of a chamber) that sends the digests: every
// chamber with `digest = "daily 09:00"` or `"weekly mon 09:00"` adds its time, in its own zone,
// to one calendar timer, which runs `cryochamber digest --all --due --send`; that run sends the
// digests whose time has come and exits. Nothing of ours runs between. The timer is a unit
// file with Persistent=true: a digest time that passed while the machine was off is caught up
// at the next start of the user manager.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"
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
	}
	return fmt.Errorf("the %s backend has no digest timer yet (run `cryochamber digest --all --due --send` from a calendar job of your own)", be.Name())
}

// UninstallDigest removes the digest timer (no chamber wants a digest any more). Removing what
// is not installed is not an error.
func UninstallDigest(ctx context.Context, be Backend) error {
	switch b := be.(type) {
	case *systemdBackend:
		return b.uninstall(ctx, DigestTimerUnit, DigestServiceUnit)
	}
	return nil
}

// DigestInstalled reports whether the user's digest timer is installed (its unit file is
// there): a command that takes a chamber without a digest out of it has nothing to do
// otherwise, and must not make the manager reload for nothing.
func DigestInstalled(be Backend) bool {
	if b, ok := be.(*systemdBackend); ok {
		return b.exists(DigestTimerUnit) || b.exists(DigestServiceUnit)
	}
	return false
}

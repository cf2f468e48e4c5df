package sandbox

// Skipping the trial run (issue 28). Probe starts the sandbox tool once before a session so
// that a kernel without user namespaces (or an AppArmor or seccomp rule against them) is said
// as such; that costs a whole bwrap start on every wake. Once a cage has started with a tool,
// the same tool on the same boot is trusted: the caller records Known(tool) after a probe
// passed and hands it back (SetupKnown), and the session then starts without the trial. What
// the trial would have said is not lost: a session of an unprobed cage that fails (bwrap exits
// non-zero before or after the agent) is probed then (Cage.Recheck), and a cage that does not
// start is reported as the trial would have reported it, so the same alert fires and nothing
// ever runs unconfined (bwrap that fails runs nothing).

import (
	"context"
	"fmt"
	"os"
	"strings"
)

// bootIDFile changes at every boot: a kernel update or a sysctl changed at boot (user
// namespaces turned off) asks for a new trial.
const bootIDFile = "/proc/sys/kernel/random/boot_id"

// Known is what identifies a tool that started a cage: its path, its file (size,
// modification time: an upgrade changes them) and the boot. "" when the tool cannot be looked at.
func Known(tool string) string {
	fi, err := os.Stat(tool)
	if err != nil {
		return ""
	}
	boot, err := os.ReadFile(bootIDFile)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s size=%d mtime=%d boot=%s", tool, fi.Size(), fi.ModTime().UnixNano(), strings.TrimSpace(string(boot)))
}

// Recheck runs the trial a cage skipped (Unprobed), after a session of it failed: the error
// says the cage could not start, as Probe says it; nil means the failure was the session's own.
// A probed cage, or one not of bubblewrap, is not tried again.
func (c *Cage) Recheck(ctx context.Context) error {
	if c == nil || !c.Unprobed || c.Mechanism != Bubblewrap {
		return nil
	}
	return Probe(ctx, c.Tool)
}

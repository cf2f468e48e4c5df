package chamber

import (
	"context"
	"os"

	"github.com/cryochamber/cryochamber/internal/atomicfile"
	"github.com/cryochamber/cryochamber/internal/sandbox"
)

// cageKnownName is the file in the private state directory that says which sandbox tool
// started a cage on this boot (sandbox.Known): sessions after it skip the trial run of the
// tool (issue 28: a whole bwrap start on every wake). It is the sessions' own record, never
// read from the chamber.
const cageKnownName = "cage-known"

// knownCage sets up a session's cage, without the trial run when the record says the same tool
// started a cage on this boot; after a trial that passed, it records the tool. A cage that
// skipped its trial is tried after a failed session (agent.Exec, sandbox.Cage.Recheck), so a
// cage that cannot start still alerts and retries, and nothing runs unconfined.
func (r *runner) knownCage(ctx context.Context, p sandbox.Policy) (*sandbox.Cage, error) {
	var known string
	if data, err := r.store.read(cageKnownName, 4096); err == nil {
		known = string(data)
	}
	cage, err := sandbox.SetupKnown(ctx, r.env.Getenv("PATH"), r.dir, p, known)
	if err != nil || cage == nil || cage.Unprobed || cage.Mechanism != sandbox.Bubblewrap {
		if err != nil && known != "" {
			_ = os.Remove(r.store.path(cageKnownName))
		}
		return cage, err
	}
	if k := sandbox.Known(cage.Tool); k != "" && k != known {
		// Written when it changes (the first session, a new bwrap, a reboot): a lost write
		// costs one more trial, nothing else.
		if err := atomicfile.Write(r.store.path(cageKnownName), []byte(k), 0o600); err != nil {
			r.warnf("record the sandbox tool: %v", err)
		}
	}
	return cage, nil
}

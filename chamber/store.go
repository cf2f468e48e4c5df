package chamber

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cryochamber/cryochamber/channel"
	"github.com/cryochamber/cryochamber/internal/atomicfile"
	"github.com/cryochamber/cryochamber/internal/confined"
	"github.com/cryochamber/cryochamber/internal/flock"
	"github.com/cryochamber/cryochamber/timer"
)

// Files of a chamber's private state directory (see the package doc). The directory is 0700
// and every file in it 0600: the agent cannot reach it, and nothing in the chamber can point
// into it.
const (
	stateName      = "state.json" // the authoritative state
	todoName       = "todo.json"  // the authoritative TODOs
	lockName       = "lock"       // flock(2); never replaced or removed
	cancelledName  = "cancelled"  // a cancel that a running session must honour
	requestName    = "wake-request"
	EnvFileName    = "env"     // PATH, HOME and agent_env: systemd's EnvironmentFile=
	SecretsFile    = "secrets" // the alert secrets, never given to the agent
	acceptedConfig = "cryo.toml"
	pinName        = "pin.json"
	acceptedCopy   = "cryo.toml.copy" // a second copy of the accepted cryo.toml (degraded.go)
	alertsDir      = "alerts"         // alerts still to deliver, one file each
	launchdOut     = "launchd.out"    // launchd's StandardOutPath
	launchdErr     = "launchd.err"    // launchd's StandardErrorPath
	todoArchive    = "todo-archive"   // done TODOs rotated out of todo.json, one file per year
	historyName    = "history.jsonl"  // one line per finished session

	// The rest of the private state, named here so that one place lists every file
	// cryochamber keeps outside the chamber (docs/DESIGN.md describes them).
	historyYear     = "history-%d.jsonl"  // the index of one year's sessions (history.go)
	historyGlob     = "history-*.jsonl"   // every year's index
	overdueFlag     = "overdue-%d"        // the dead-man told that session %d hangs (fallback.go)
	blockName       = "block.json"        // the latest block this program closed (lastblock.go)
	outboxCountName = "outbox-count.json" // the live outbox's count, a cache for status (outboxcount.go)
	agentRecordName = "agent.json"        // the running session's agent group, written without fsync (agentfile.go)
	heartbeatName   = "heartbeat.json"    // the monitor's last answer (heartbeat.go)
	digestName      = "digest.json"       // the last digest sent (digest.go)
	cliConfigName   = "cli-config.json"   // the code-bearing CLI configuration's fingerprint (cliconfig.go)
	snapshotsDir    = "snapshots"         // the snapshots' repository (snapshot.go)
	rolledBackName  = "rolled-back"       // a rollback the next session's prompt must tell
	snapFailingName = "snapshots-failing" // the last snapshot failed (one notice per streak)
	syncSecretsName = "sync/secrets"      // the channel secrets `sync --install` captured (sync.go)
	syncDir         = channel.SyncDir     // what each channel synced, kept by package channel
	// Where launchd wrote the sync agent's output before it shared launchd.out with the wake
	// (a plist armed by an earlier `sync --install` still names them until it is armed again).
	syncLaunchdOut = "sync/launchd.out"
	syncLaunchdErr = "sync/launchd.err"
)

// store is one chamber's private state directory.
type store string

// storeFor is the private state directory of the chamber whose ID is id.
func storeFor(env *Env, id string) (store, error) {
	if env.StateDir == "" {
		return "", errors.New("no state directory: set HOME (or XDG_STATE_HOME)")
	}
	return store(filepath.Join(env.StateDir, chambersDir, id)), nil
}

// chambersDir holds every chamber's private state directory, named by the chamber's ID.
const chambersDir = "chambers"

func (s store) path(name string) string { return filepath.Join(string(s), name) }

// exists reports whether the chamber has been started (it has a state).
func (s store) exists() bool { return exists(s.path(stateName)) }

// ensure creates the directory (0700) and repairs a looser mode.
func (s store) ensure() error {
	if err := os.MkdirAll(string(s), 0o700); err != nil {
		return fmt.Errorf("create the chamber's private state directory: %w", err)
	}
	return os.Chmod(string(s), 0o700)
}

// write replaces a file of the store atomically (0600).
func (s store) write(name string, data []byte, beforeRename func()) error {
	return atomicfile.WriteHook(s.path(name), data, 0o600, beforeRename)
}

// read reads a file of the store, bounded (the one bounded read, confined.ReadPath).
func (s store) read(name string, limit int64) ([]byte, error) {
	return confined.ReadPath(s.path(name), limit)
}

// flag reports whether a marker file (cancelled, wake-request) is present.
func (s store) flag(name string) bool { return exists(s.path(name)) }

// setFlag records a marker file with the time it was set.
func (s store) setFlag(name string, now time.Time) error {
	if err := s.ensure(); err != nil {
		return err
	}
	return s.write(name, []byte(now.UTC().Format(time.RFC3339)+"\n"), nil)
}

// clearFlag removes a marker file.
func (s store) clearFlag(name string) {
	if err := os.Remove(s.path(name)); err == nil {
		_ = atomicfile.SyncDir(string(s))
	}
}

// chamberID is the ID of the chamber at the canonical path dir: it names the units, the labels
// and the private state directory. It always comes from the path, never from a file.
func chamberID(dir string) string { return timer.ID(dir) }

// ErrLocked means another live process holds the chamber's lock.
var ErrLocked = errors.New("chamber is locked by another process")

// Lock is the chamber's lock: flock(2) on a file in its private state directory (package
// flock). The kernel releases it when the process dies, however it dies, so a lock can never
// outlive its holder; and nothing in the chamber (a .cryo that became a file, a symlink) can
// make it fail.
type Lock = flock.Lock

// tryLock takes the lock without waiting; ErrLocked when another process holds it.
func (s store) tryLock() (*Lock, error) {
	if err := s.ensure(); err != nil {
		return nil, err
	}
	l, err := flock.Try(s.path(lockName))
	if errors.Is(err, flock.ErrBusy) {
		return nil, ErrLocked
	}
	return l, err
}

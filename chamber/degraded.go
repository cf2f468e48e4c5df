package chamber

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The rule behind issue 23's items 1, 7, 8 and 14: whatever of the private state cannot be read
// or written, the wake and the dead-man still alert with what they can read.
//
//   - The accepted targets (the accepted cryo.toml, the captured secrets) are read before the
//     lock, the state or the chamber (open), so a state directory remounted read-only (the lock
//     cannot be taken: EROFS), a state.json that is damaged or written by a newer build, or a
//     chamber that is gone still leave the wake and the dead-man something to alert with
//     (alertDegraded): one alert "state", sent from the accepted configuration alone.
//   - The accepted cryo.toml is checked against the hash pin.json recorded when it was accepted,
//     and kept twice (cryo.toml and cryo.toml.copy): a damaged copy is replaced by the other. Both
//     damaged, the wake and the dead-man refuse to run with the defaults (which send alerts
//     nowhere and allow only the default agent): an error, and status says so; never a plan run
//     silently on defaults.
//   - The environment file every unit names is optional to systemd (EnvironmentFile=-), so a
//     wake still starts without it, and says so (checkEnvFile).

// loadAccepted reads the accepted configuration: cryo.toml in the private state directory,
// checked against the hash pin.json recorded (when pin.json is readable), else its second copy.
// A copy found damaged while the other is good is repaired from it (by a lock holder). No file
// at all (a chamber from before accepted copies) is the defaults, as before.
func (r *runner) loadAccepted() (*Config, error) {
	want := ""
	if p := r.pin(); p != nil {
		want = p.Config
	}
	try := func(name string) (*Config, []byte, error) {
		raw, err := r.store.read(name, maxConfigSize)
		if err != nil {
			return nil, nil, err
		}
		if want != "" && sha(raw) != want {
			return nil, nil, fmt.Errorf("%s is not the file that was accepted (its hash differs from pin.json's): damaged", r.store.path(name))
		}
		c, err := ParseConfig(ConfigFile, raw, r.env.Local)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", r.store.path(name), err)
		}
		return c, raw, nil
	}
	c, _, err := try(acceptedConfig)
	if err == nil {
		return c, nil
	}
	if errors.Is(err, os.ErrNotExist) && want == "" {
		c, _ := ParseConfig(ConfigFile, nil, r.env.Local)
		return c, nil
	}
	c2, raw2, err2 := try(acceptedCopy)
	if err2 != nil {
		// Both differ from the pin but agree with each other and parse: an acceptance cut short
		// between the copies and pin.json, not a damage.
		raw, rerr := r.store.read(acceptedConfig, maxConfigSize)
		raw2, rerr2 := r.store.read(acceptedCopy, maxConfigSize)
		if rerr == nil && rerr2 == nil && bytes.Equal(raw, raw2) {
			if c, perr := ParseConfig(ConfigFile, raw, r.env.Local); perr == nil {
				return c, nil
			}
		}
		return nil, err
	}
	r.warnf("the accepted configuration was damaged (%v); its second copy is in force", err)
	r.cfgFix, r.cfgFixRaw = err, raw2 // repaired by the lock holder (tellDegraded)
	return c2, nil
}

// refuseDefaults is the error of a wake or a dead-man whose accepted configuration cannot be
// read: running with the defaults would send alerts nowhere, silently.
func (r *runner) refuseDefaults() error {
	return &Error{
		Msg:  "the accepted configuration cannot be read, and running with the defaults would send alerts nowhere: refused",
		Err:  r.cfgErr,
		Hint: "read what `cryochamber reload --dir " + r.dir + "` shows of the chamber's cryo.toml (the agent may have edited it), accept it with `cryochamber reload --yes --dir " + r.dir + "`, then `cryochamber wake --dir " + r.dir + " --now`",
	}
}

// alertDegraded alerts, from the accepted configuration alone, that the private state cannot be
// used (what, err): no session runs and nothing is re-armed until it is repaired. Nothing of the
// state is needed: the alert is recorded for redelivery only if the state directory takes it.
func (r *runner) alertDegraded(ctx context.Context, what string, err error) {
	if r.cfg == nil {
		return
	}
	if r.st == nil {
		r.st = &State{Chamber: r.dir, ID: r.id}
	}
	text := fmt.Sprintf("chamber %s: cryochamber cannot use its private state: %s: %v.\n"+
		"No session runs and no timer is re-armed until it is repaired; this alert was sent from the accepted configuration alone.",
		r.dir, what, err)
	resume := fmt.Sprintf("repair %s (a file system remounted read-only, a full disk, a damaged file, a newer cryochamber's state), then run: cryochamber wake --dir %s --now", r.store, r.dir)
	a := r.newAlert(0, "state", text, resume, kindAlert)
	a.Targets = r.alertTargets(nil)
	r.attempt(ctx, a)
	fmt.Fprintf(r.env.Stderr, "cryochamber: alert (state): %s\n", strings.ReplaceAll(a.summary(), "\n", " "))
}

// tellDegraded tells the operator, once, of what a wake or a dead-man (holding the lock, the
// state loaded) found damaged but could work around: the accepted configuration repaired from
// its second copy, the environment file missing.
func (r *runner) tellDegraded(ctx context.Context) {
	if r.cfgFix != nil {
		if werr := r.store.write(acceptedConfig, r.cfgFixRaw, nil); werr != nil {
			r.warnf("cannot repair the accepted configuration from its second copy: %v", werr)
		}
		r.notify(ctx, r.st.Session, "accepted-config", fmt.Sprintf("chamber %s: the accepted configuration was damaged (%v); its second copy was found intact, is in force, and repaired it. Nothing else changed.", r.dir, r.cfgFix))
		r.cfgFix = nil
	}
	r.tellShutdown(ctx)       // shutdown.go
	r.tellFailingTargets(ctx) // targets.go
	r.checkWatcher(ctx)       // watcher.go
	_, err := os.Stat(r.store.path(EnvFileName))
	switch {
	case errors.Is(err, os.ErrNotExist) && r.st.Told["env"].IsZero():
		r.warnf("the environment file %s is missing: sessions run with the timer manager's environment, without agent_env; run `cryochamber reload --dir %s` from your shell to capture it again", r.store.path(EnvFileName), r.dir)
		r.notify(ctx, r.st.Session, "env", fmt.Sprintf("chamber %s: the environment file %s, which every unit of the chamber names, is missing (removed by a cleanup?). Sessions run with the timer manager's environment (its PATH and HOME), without the variables of agent_env, until it is captured again.\n\nWhat to do: run `cryochamber reload --dir %s` from your usual shell.", r.dir, r.store.path(EnvFileName), r.dir))
		if r.st.Told == nil {
			r.st.Told = map[string]time.Time{}
		}
		r.st.Told["env"] = r.now().UTC()
		if err := r.save(); err != nil {
			r.warnf("%v", err)
		}
	case err == nil && !r.st.Told["env"].IsZero():
		delete(r.st.Told, "env")
	}
}

// degradedWarnings are what status and validate say of the private state a wake or a dead-man
// could not use (they alert when they run; these say it before).
func (r *runner) degradedWarnings() []string {
	var out []string
	if err := unix.Access(string(r.store), unix.W_OK); err != nil {
		out = append(out, fmt.Sprintf("the private state directory %s cannot be written (%v): the wake and the dead-man cannot take the chamber's lock; they alert and stop until it is repaired", r.store, err))
	}
	if r.cfgErr != nil {
		out = append(out, fmt.Sprintf("the accepted configuration cannot be read (%v): the wake and the dead-man refuse to run on the defaults; read what `cryochamber reload --dir %s` shows, then accept it with --yes", r.cfgErr, r.dir))
	}
	if _, err := os.Stat(r.store.path(EnvFileName)); errors.Is(err, os.ErrNotExist) {
		out = append(out, fmt.Sprintf("the environment file %s is missing: sessions run with the timer manager's environment, without agent_env; run `cryochamber reload --dir %s` from your shell", r.store.path(EnvFileName), r.dir))
	}
	if p := r.pin(); p != nil && p.Binary != "" && !exists(p.Binary) && r.st != nil && r.st.Binary != p.Binary {
		if p.Copy != "" && exists(p.Copy) {
			out = append(out, fmt.Sprintf("%s, the binary accepted at start, is gone: the timers and the boot unit run the pinned copy %s; install cryochamber again and run `cryochamber reload --dir %s`", p.Binary, p.Copy, r.dir))
		} else {
			out = append(out, fmt.Sprintf("%s, the binary accepted at start, is gone, and so is its pinned copy: after a reboot nothing runs; install cryochamber again and run `cryochamber reload --dir %s`", p.Binary, r.dir))
		}
	}
	return out
}

// bootScript is what the boot unit runs: the wake with the binary recorded at start when it is
// still there, else with the pinned copy. An upgrade that moved the binary, then a reboot (which
// drops the transient timers the boot unit re-arms), would otherwise leave nothing at all to run
// (issue 23, item 7). The paths are arguments, never part of the script.
const bootScript = `if [ -x "$1" ]; then b=$1; else b=$2; fi; exec "$b" wake --dir "$3"`

// bootArgv is the boot unit's command (see bootScript); the plain wake when there is no pinned
// copy to fall back on.
func (r *runner) bootArgv() []string {
	installed := r.wakeBinary()
	cp := ""
	if p := r.pin(); p != nil {
		cp = p.Copy
	}
	if cp == "" || cp == installed {
		return r.wakeArgv()
	}
	return []string{"/bin/sh", "-c", bootScript, "cryochamber-boot", installed, cp, r.dir}
}

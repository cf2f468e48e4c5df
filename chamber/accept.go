package chamber

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/internal/confined"
	"github.com/cryochamber/cryochamber/timer"
)

// The agent works in its chamber and may write there, so the configuration in force is never
// the chamber's cryo.toml: it is the copy the operator accepted with `start` or `reload`, kept
// in the private state directory with a pin of what it allows to run:
//
//   - every key (the limits that bound the agent, the programs it may run, where alerts go) comes
//     from the accepted copy; an edit of cryo.toml in the chamber is reported (a warning in
//     status and the prompt, a notice to the operator, once per edit) and has no effect until
//     the operator runs `reload`;
//   - every program the chamber may run that lies inside the chamber (./agent.sh) is pinned by a
//     hash of its content: a changed program refuses the session and alerts;
//   - the cryochamber binary is copied into the user's state directory, and the dead-man and
//     alert timers run that copy, so removing or moving the installed binary cannot silence them.

func sha(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// accept makes the chamber's current cryo.toml (raw, already parsed into cfg), the agent
// override, the binary and the programs inside the chamber the ones in force. Only the
// operator's commands (start, reload) call it.
func (r *runner) accept(raw []byte) error {
	if err := r.store.ensure(); err != nil {
		return err
	}
	// Hashed first: a program that cannot be pinned refuses the whole acceptance, and the
	// configuration in force stays the one before.
	programs, err := r.hashPrograms()
	if err != nil {
		return err
	}
	if err := r.store.write(acceptedConfig, raw, nil); err != nil {
		return err
	}
	if err := r.store.write(acceptedCopy, raw, nil); err != nil {
		return err
	}
	cp, err := pinBinary(r.env.StateDir, r.st.Binary, r.now())
	if err != nil {
		r.warnf("cannot copy %s for the dead-man timer (it will run that file instead): %v", r.st.Binary, err)
		cp = ""
	}
	p := pinFile{Version: 1, Chamber: r.dir, ID: r.id, Config: sha(raw), Agent: r.st.Agent, Binary: r.st.Binary,
		Copy: cp, CopyOf: stampOf(r.st.Binary), Programs: programs, At: r.now().UTC().Truncate(time.Second)}
	data, _ := json.MarshalIndent(p, "", "  ")
	if err := r.store.write(pinName, append(data, '\n'), nil); err != nil {
		return err
	}
	r.pins = &p
	r.pruneDue = true // pinprune.go: old copies are looked at when the command ends
	return nil
}

// acceptedConfig is the configuration in force: the cryo.toml the operator last accepted. A
// chamber whose accepted copy cannot be read (it never should) runs with the defaults, which
// allow only the default agent and send alerts nowhere, and says so.
func (r *runner) acceptedConfig() *Config {
	c, err := r.loadAccepted() // degraded.go: checked against its pin, with a second copy
	if err == nil {
		return c
	}
	r.cfgErr = err
	r.warnf("the accepted configuration cannot be read (%v): using the defaults; run `cryochamber reload --dir %s`", err, r.dir)
	c, _ = ParseConfig(ConfigFile, nil, r.env.Local)
	return c
}

// configDrift is a cryo.toml in the chamber that is not the one in force.
type configDrift struct {
	hash string   // of the chamber's file (when it cannot be read: of why)
	keys []string // keys that differ from the accepted configuration
	err  error    // why it does not load, if it does not
}

// String says what is not in force and what to do.
func (d *configDrift) String(dir string) string {
	what := "cryo.toml was edited since it was accepted"
	switch {
	case d.err != nil:
		what = fmt.Sprintf("cryo.toml in the chamber cannot be used (%v)", d.err)
	case len(d.keys) > 0:
		what = fmt.Sprintf("cryo.toml was edited since it was accepted (%s)", strings.Join(d.keys, ", "))
	}
	return what + fmt.Sprintf("; the accepted configuration stays in force. If you made the change: cryochamber reload --dir %s", dir)
}

// checkDrift compares the chamber's cryo.toml with the accepted one. nil when they agree (or
// the chamber cannot be read at all: that is reported elsewhere).
func (r *runner) checkDrift() *configDrift {
	if r.drift != nil || r.fs == nil {
		return r.drift
	}
	raw, err := readConfig(r.fs)
	if err != nil {
		// No content to hash: the reason stands for it, so that the operator is told once of
		// a cryo.toml replaced by a FIFO, a symlink or a directory (issue 23, item 3).
		r.drift = &configDrift{err: err, hash: "unreadable:" + sha([]byte(err.Error()))}
		return r.drift
	}
	accepted, _ := r.store.read(acceptedConfig, maxConfigSize)
	if bytes.Equal(raw, accepted) {
		return nil
	}
	d := &configDrift{hash: sha(raw)}
	edited, err := ParseConfig(ConfigFile, raw, r.env.Local)
	if err != nil {
		d.err = err
	} else {
		d.keys = configDiff(r.cfg, edited)
		if len(d.keys) == 0 {
			return nil // comments or spacing only
		}
	}
	r.drift = d
	return d
}

// reportDrift tells the operator, once per distinct edit, that cryo.toml in the chamber is not
// in force: a warning now, in the next prompt, and a notice to the operator's targets (an
// edit nobody made by hand may be a prompt injection at work).
func (r *runner) reportDrift(ctx context.Context) {
	d := r.checkDrift()
	if d == nil {
		r.st.ConfigSeen = ""
		return
	}
	msg := d.String(r.dir)
	r.warnf("%s", msg)
	r.warnings = append(r.warnings, msg)
	if d.hash == "" || d.hash == r.st.ConfigSeen {
		return
	}
	r.st.ConfigSeen = d.hash
	r.notify(ctx, r.st.Session, "config-ignored", msg)
}

// configDiff names the keys whose values differ between two configurations.
func configDiff(a, b *Config) []string {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	var ma, mb map[string]json.RawMessage
	_ = json.Unmarshal(ja, &ma)
	_ = json.Unmarshal(jb, &mb)
	var diff []string
	for k, v := range ma {
		if !bytes.Equal(v, mb[k]) {
			diff = append(diff, tomlKey(k))
		}
	}
	sort.Strings(diff)
	return diff
}

// tomlKey maps a Config field name to its cryo.toml key.
func tomlKey(field string) string {
	var b strings.Builder
	for i, c := range field {
		if c >= 'A' && c <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			c += 'a' - 'A'
		}
		b.WriteRune(c)
	}
	switch s := b.String(); s {
	case "delayed_after":
		return "delayed_notice_after"
	case "location":
		return "timezone"
	default:
		return s
	}
}

// fallbackBinary is what the dead-man and alert timers run: the pinned copy of the binary when
// there is one, else the binary the wake runs.
func (r *runner) fallbackBinary() string {
	r.repinSelf() // repin.go: the copy reads what this build writes
	if p := r.pin(); p != nil && p.Copy != "" && exists(p.Copy) {
		return p.Copy
	}
	return r.wakeBinary()
}

// wakeBinary is what the wake timer runs: the binary recorded at start. A manual `wake` with
// another build does not change it; if it is gone (an upgrade moved it), the running binary or
// the pinned copy takes its place, and the warning says so.
func (r *runner) wakeBinary() string {
	b := r.st.Binary
	if b != "" && exists(b) {
		return b
	}
	alt := ""
	switch {
	case r.env.Binary != "" && checkBinary(r.env.Binary) == nil && exists(r.env.Binary):
		alt = r.env.Binary
	case r.pin() != nil && r.pin().Copy != "" && exists(r.pin().Copy):
		alt = r.pin().Copy
	}
	if alt == "" {
		return b
	}
	if b != "" {
		r.warnf("the timers ran %s, which is gone; they now run %s (install cryochamber again and run `cryochamber reload --dir %s`)", b, alt, r.dir)
	}
	r.st.Binary = alt
	return alt
}

// migrateLegacy adopts a chamber started by an earlier cryochamber, which kept its state in
// timer.json in the chamber: once, when the private state directory already holds the pin that
// earlier start wrote (proof the operator started it) and no state of its own yet.
func migrateLegacy(env *Env, dir string, s store) error {
	if !exists(s.path(pinName)) || s.exists() {
		return nil
	}
	fs, err := confined.Open(dir)
	if err != nil {
		return nil
	}
	defer fs.Close()
	data, err := fs.ReadFile(StateFile, maxStateSize)
	if err != nil {
		return nil
	}
	st, err := parseState(filepath.Join(dir, StateFile), data)
	if err != nil {
		return nil
	}
	// timer.json was the earlier version's state, but the agent could write it: the schedule is
	// taken from it, never what runs or what is signalled. The binary and the agent override
	// come from the pin the operator's start wrote; a holder (whose agent's process group a
	// recovery would end) is dropped.
	st.Binary, st.Agent, st.Holder = "", "", nil
	if raw, err := s.read(pinName, 1<<20); err == nil {
		var p pinFile
		if json.Unmarshal(raw, &p) == nil {
			st.Binary, st.Agent = p.Binary, p.Agent
		}
	}
	lock, err := s.tryLock()
	if err != nil {
		return nil
	}
	defer lock.Unlock()
	if todo, err := fs.ReadFile(todoName, maxStateSize); err == nil {
		_ = s.write(todoName, todo, nil)
	}
	data, err = st.marshal(env.Now())
	if err != nil {
		return err
	}
	if err := s.write(stateName, data, nil); err != nil {
		return &Error{Msg: "cannot adopt the chamber's state", Err: err}
	}
	env.warnf("adopted the state of %s from its timer.json (started by an earlier cryochamber); from now on it lives in %s", dir, string(s))
	return nil
}

// syncTimer arms (with channels in the accepted configuration) or removes the chamber's sync
// timer, which runs `cryochamber sync` every poll_interval: start and reload call it.
func (r *runner) syncTimer(ctx context.Context) {
	ch := r.cfg.Channels
	on := ch != nil && (ch.Email != nil || ch.GitHub != nil || ch.Zulip != nil)
	err := r.armSync(ctx)
	switch {
	case err != nil && on:
		r.warnf("cannot arm the sync timer ([channels]): %v; `cryochamber sync --install --dir %s` tries again", err, r.dir)
	case err != nil:
		r.warnf("cannot remove the sync timer: %v", err)
	case on:
		r.printf("sync timer armed: `cryochamber sync` every %s", fmtDur(ch.PollInterval.D))
	}
}

// armSync is the one way the sync timer is armed (start, reload, `sync --install`) or removed
// (no channel): with the chamber's timer description (timerChamber: the captured PATH, HOME and
// XDG_STATE_HOME; on launchd the output files the wake rotates) and the binary the wake runs.
func (r *runner) armSync(ctx context.Context) error {
	ch := r.cfg.Channels
	on := ch != nil && (ch.Email != nil || ch.GitHub != nil || ch.Zulip != nil)
	return r.withBackend(ctx, func(be timer.Backend) error {
		p, ok := be.(timer.Poller)
		switch {
		case !ok && on:
			return fmt.Errorf("the %s backend cannot run a repeating timer", be.Name())
		case !ok:
			return nil
		case on:
			return p.ArmPoll(ctx, r.timerChamber(), ch.PollInterval.D, []string{r.wakeBinary(), "sync", "--dir", r.dir})
		}
		return p.DisarmPoll(ctx, r.id)
	})
}

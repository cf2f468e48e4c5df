// Package sandbox builds the cage every agent session and every allowed CMD runs in: the
// command line that starts a program under bubblewrap (Linux) or sandbox-exec (macOS) with one
// policy: the chamber writable, a few named paths writable, the rest of the file system
// read-only, and cryochamber's private state, other chambers, the user's secrets and the
// user's session bus and service manager invisible.
//
// The agent reads untrusted text and writes its chamber; what it writes there (an opencode
// plugin, a Claude Code hook, a fake `node`) is run later by programs that trust their working
// directory. Inspecting every such file one by one only moves the hole: the cage makes
// whatever runs from the chamber run inside the same walls as the agent that wrote it.
//
// The package never reads the environment or $HOME: every path comes from the caller (Policy).
// It runs nothing except Probe, which starts the sandbox tool once to see that it works.
package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// The mechanisms, as `status --json` names them.
const (
	Bubblewrap  = "bubblewrap"
	SandboxExec = "sandbox-exec"
	Off         = "off"
)

// Policy is what one session's cage lets it see and write. Every path is absolute.
type Policy struct {
	// Chamber is the working directory: readable and writable.
	Chamber string
	// Writable are further paths the session may write: the agent CLI's own state (~/.claude,
	// ~/.codex, ...) and `[sandbox] writable`. A missing one is skipped.
	Writable []string
	// Hide are paths the session must not see at all: cryochamber's state directory, other
	// chambers, the runtime directory with the user's bus and manager sockets, `[sandbox]
	// hide`. A directory becomes an empty one, a file an empty file. A missing one is skipped.
	Hide []string
	// Protected are hidden paths nothing may reveal again: no Writable path or Chamber may
	// lie inside one (cryochamber's own state directory). They are hidden like Hide.
	Protected []string
	// Scratch are directories the session gets empty and private, writable, gone when it
	// ends (/tmp, /var/tmp, $TMPDIR): shared temporary directories hold other programs'
	// sockets (tmux, X11, ssh-agent), which a read-only mount would still let it connect to.
	Scratch []string
	// Visible are paths kept readable (read-only) even where they lie under a Scratch path:
	// the HOME of the agent, or a PATH directory, under /tmp, say. Never inside a hidden one.
	Visible []string
	// Binds show another directory in place of a path: the agent CLI's own state directory
	// (~/.claude, ~/.codex) is, in the cage, a copy kept per chamber, so that what a session
	// writes there (a user-level hook, a global plugin) never reaches the user's own CLI.
	// sandbox-exec cannot show one path in place of another: there Dst itself is writable
	// (docs/MACOS.md).
	Binds []Bind
}

// Bind is one directory shown in place of another.
type Bind struct {
	Src, Dst string
	ReadOnly bool
}

// Error is a sandbox that cannot be set up; Hint says what the operator can do.
type Error struct {
	Err  error
	Hint string
}

func (e *Error) Error() string { return "the session sandbox cannot be set up: " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// BwrapHint is what to do when bubblewrap is missing or cannot create its namespaces.
const BwrapHint = "install bubblewrap (Debian/Ubuntu: apt install bubblewrap; Fedora: dnf install bubblewrap) " +
	"and allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 " +
	"and later also sysctl kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile for bwrap); " +
	"or set [sandbox] mode = \"off\" in cryo.toml and run `cryochamber reload` to accept the risk of an unconfined agent"

// OffHint is the way out where the OS has no sandbox this package can set up.
const OffHint = "set [sandbox] mode = \"off\" in cryo.toml and run `cryochamber reload` to accept the risk of an unconfined agent"

// Check refuses a policy that would show what must stay hidden: the chamber or a writable path
// inside (or equal to) a protected one (a writable parent is fine: the protected path is
// mounted over it), a relative path, or a path with control characters (they have no place in
// a sandbox profile).
func (p Policy) Check() error {
	if !filepath.IsAbs(p.Chamber) {
		return fmt.Errorf("the chamber %q is not an absolute path", p.Chamber)
	}
	all := append([]string{p.Chamber}, p.Writable...)
	for _, b := range p.Binds {
		all = append(all, b.Dst)
	}
	for _, w := range all {
		if !filepath.IsAbs(w) {
			return fmt.Errorf("writable path %q is not absolute", w)
		}
		for _, h := range p.Protected {
			if within(h, w) {
				return fmt.Errorf("%s lies in %s, which sessions must never see", w, h)
			}
		}
	}
	if w, h, ok := p.ledInto(); ok {
		return fmt.Errorf("%s leads through a symlink into %s, which sessions must never see (a session may have planted it: remove it)", w, h)
	}
	for _, l := range [][]string{all, p.Hide, p.Protected, p.Scratch, p.Visible} {
		for _, h := range l {
			if !filepath.IsAbs(h) {
				return fmt.Errorf("path %q is not absolute", h)
			}
			if strings.ContainsFunc(h, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				return fmt.Errorf("path %q has control characters", h)
			}
		}
	}
	return nil
}

// hiddenPaths are the Hide and Protected paths as named and as resolved, and whether each is
// Protected.
func (p Policy) hiddenPaths() (raw, res []string, prot []bool) {
	for i, l := range [][]string{p.Hide, p.Protected} {
		for _, h := range l {
			r, _, ok := resolve(h)
			if !ok {
				continue
			}
			raw, res, prot = append(raw, filepath.Clean(h)), append(res, r), append(prot, i == 1)
		}
	}
	return raw, res, prot
}

// ledInto finds a writable path (the chamber, Writable, a Bind's Dst) that a symlink leads into
// a hidden one: mount(2) follows symlinks, and a session can swap a path it may write (one
// inside another writable path, or in the chamber) for a link to cryochamber's state,
// another chamber or ~/.ssh, which the next session's cage would then bind writable. A path
// the operator named inside a hidden one (a writable ~/.config/tool under a hidden
// ~/.config) is shown again on purpose; inside a Protected one, never.
func (p Policy) ledInto() (string, string, bool) {
	raw, res, prot := p.hiddenPaths()
	all := append([]string{p.Chamber}, p.Writable...)
	for _, b := range p.Binds {
		all = append(all, b.Dst)
	}
	for _, w := range all {
		r, _, ok := resolve(w)
		if !ok {
			continue
		}
		if h, ok := ledIn(w, r, raw, res, prot); ok {
			return w, h, true
		}
	}
	return "", "", false
}

// ledIn is the hidden path (of hiddenPaths) that w, resolved to r, lies in only through a
// symlink, or in a Protected one at all.
func ledIn(w, r string, raw, res []string, prot []bool) (string, bool) {
	for i := range res {
		if within(res[i], r) && (prot[i] || !(within(raw[i], w) || within(res[i], w))) {
			return res[i], true
		}
	}
	return "", false
}

// within reports whether p is dir or lies under it.
func within(dir, p string) bool {
	dir, p = filepath.Clean(dir), filepath.Clean(p)
	if dir == "/" || dir == p {
		return true
	}
	return strings.HasPrefix(p, dir+string(filepath.Separator))
}

// mount kinds, in the order they are applied at the same depth: a deeper path always comes
// after a shallower one (bubblewrap mounts in order, so the deeper one shows), and at the same
// path hiding wins.
type kind int

const (
	kScratch kind = iota
	kVisible
	kWritable
	kBind
	kBindRO
	kHide
	kProtect
)

type mount struct {
	kind kind
	path string
	dir  bool   // for hides: a directory (tmpfs) or a file (/dev/null)
	src  string // for binds: what is shown at path
}

func depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(filepath.Clean(p), "/")
}

// resolve is the path a mount lands on: mount(2) follows symlinks, so a hidden ~/.ssh that is a
// link must hide its target. ok is false for a path that does not exist.
func resolve(p string) (string, os.FileInfo, bool) {
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", nil, false
	}
	fi, err := os.Stat(r)
	if err != nil {
		return "", nil, false
	}
	return r, fi, true
}

// mounts is the policy as an ordered list of existing paths.
func (p Policy) mounts() []mount {
	var ms []mount
	seen := map[string]kind{}
	add := func(k kind, paths []string, mustDir bool) {
		for _, raw := range paths {
			r, fi, ok := resolve(raw)
			if !ok || (mustDir && !fi.IsDir()) {
				continue
			}
			if prev, dup := seen[r]; dup && prev >= k {
				continue
			}
			seen[r] = k
			ms = append(ms, mount{kind: k, path: r, dir: fi.IsDir()})
		}
	}
	// A writable path a symlink leads into a hidden one is never mounted (Check refuses it).
	hraw, hres, hprot := p.hiddenPaths()
	led := func(w, r string) bool { _, ok := ledIn(w, r, hraw, hres, hprot); return ok }
	add(kScratch, p.Scratch, true)
	add(kVisible, p.Visible, false)
	var writable []string
	for _, w := range append([]string{p.Chamber}, p.Writable...) {
		if r, _, ok := resolve(w); ok && !led(w, r) {
			writable = append(writable, w)
		}
	}
	add(kWritable, writable, false)
	for _, b := range p.Binds {
		r, fi, ok := resolve(b.Dst)
		src, sfi, sok := resolve(b.Src)
		if !ok || !sok || !fi.IsDir() || !sfi.IsDir() || led(b.Dst, r) {
			continue
		}
		k := kBind
		if b.ReadOnly {
			k = kBindRO
		}
		if prev, dup := seen[r]; dup && prev >= k {
			continue
		}
		seen[r] = k
		ms = append(ms, mount{kind: k, path: r, dir: true, src: src})
	}
	add(kHide, p.Hide, false)
	add(kProtect, p.Protected, false)
	// Keep only the strongest kind per path, and nothing shown again inside a hidden path
	// except the chamber and what is writable (Check keeps those out of protected ones).
	var hidden []string
	for _, m := range ms {
		if seen[m.path] == m.kind && m.kind >= kHide {
			hidden = append(hidden, m.path)
		}
	}
	out := ms[:0]
	for _, m := range ms {
		if m.kind == kVisible && slices.ContainsFunc(hidden, func(h string) bool { return within(h, m.path) }) {
			continue
		}
		if seen[m.path] == m.kind {
			out = append(out, m)
			seen[m.path] = -1
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		di, dj := depth(out[i].path), depth(out[j].path)
		if di != dj {
			return di < dj
		}
		return out[i].kind < out[j].kind
	})
	return out
}

// BwrapArgs is the bubblewrap command line (without the bwrap program itself) that runs argv
// (argv[0] an absolute path) in the cage of p:
//
//   - the whole file system read-only (--ro-bind / /), a fresh /dev and /proc;
//   - every Scratch directory an empty tmpfs, every Hide and Protected path an empty tmpfs (a
//     directory) or /dev/null (a file), the chamber and the Writable paths bound read-write,
//     applied from the shallowest path to the deepest so that the deeper one shows;
//   - its own PID namespace (--unshare-pid: no process outside can be seen or signalled, and
//     whatever the agent leaves behind dies with it), its own IPC namespace, a new session
//     (--new-session: no TIOCSTI into the operator's terminal), no capabilities, and it dies
//     with the process that started it (--die-with-parent);
//   - the network shared: the agent reaches its model API.
func BwrapArgs(p Policy, argv []string) []string {
	args := []string{
		"--die-with-parent", "--unshare-pid", "--unshare-ipc", "--new-session", "--cap-drop", "ALL",
		"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
	}
	for _, m := range p.mounts() {
		switch m.kind {
		case kScratch:
			args = append(args, "--tmpfs", m.path)
		case kVisible:
			args = append(args, "--ro-bind", m.path, m.path)
		case kWritable:
			args = append(args, "--bind", m.path, m.path)
		case kBind:
			args = append(args, "--bind", m.src, m.path)
		case kBindRO:
			args = append(args, "--ro-bind", m.src, m.path)
		case kHide, kProtect:
			if m.dir {
				// Writable but private and empty: a read-only one could not hold the mount
				// points of deeper paths shown again, and what is written there vanishes.
				args = append(args, "--tmpfs", m.path)
			} else {
				args = append(args, "--ro-bind", "/dev/null", m.path)
			}
		}
	}
	args = append(args, "--chdir", p.Chamber, "--")
	return append(args, argv...)
}

// Find is the bubblewrap program: the first "bwrap" on the absolute entries of pathList that
// is not inside any of exclude, else the usual install places. bwrap runs outside the cage, so
// exclude names every directory a session may write (the chamber, the writable paths): a
// `bwrap` planted there would run unconfined. Both sides are compared as named and resolved.
func Find(pathList string, exclude ...string) (string, error) {
	dirs := filepath.SplitList(pathList)
	dirs = append(dirs, "/usr/bin", "/usr/local/bin", "/bin")
	var ex []string
	for _, e := range exclude {
		if e == "" {
			continue
		}
		ex = append(ex, e)
		if r, err := filepath.EvalSymlinks(e); err == nil {
			ex = append(ex, r)
		}
	}
	excluded := func(d string) bool {
		r, err := filepath.EvalSymlinks(d)
		for _, e := range ex {
			if within(e, d) || (err == nil && within(e, r)) {
				return true
			}
		}
		return false
	}
	for _, d := range dirs {
		if !filepath.IsAbs(d) || excluded(d) {
			continue
		}
		p := filepath.Join(d, "bwrap")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", &Error{Err: errors.New("bubblewrap (bwrap) is not installed"), Hint: BwrapHint}
}

// probeTimeout bounds the trial run of the sandbox tool.
const probeTimeout = 30 * time.Second

// Probe starts tool once with the same namespaces a session gets, running `true`, and says why
// it cannot when it cannot (no user namespaces, an AppArmor restriction, a seccomp filter).
func Probe(ctx context.Context, tool string) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	args := []string{"--die-with-parent", "--unshare-pid", "--unshare-ipc", "--new-session", "--cap-drop", "ALL",
		"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--", "true"}
	cmd := exec.CommandContext(ctx, tool, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	// Started as a session's cage is (Cage.Start), so that what the session gets is tried.
	err := (&Cage{Mechanism: Bubblewrap, Tool: tool}).Start(cmd)
	if err == nil {
		err = cmd.Wait()
	}
	out := buf.Bytes()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if len(msg) > 300 {
			msg = msg[:300]
		}
		if msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		return &Error{Err: fmt.Errorf("%s does not run (%v)", tool, err), Hint: BwrapHint}
	}
	return nil
}

// Cage is a working sandbox: the tool and the policy a session runs with.
type Cage struct {
	Mechanism string // Bubblewrap or SandboxExec
	Tool      string // the absolute path of bwrap or sandbox-exec
	Policy    Policy
	// Unprobed: the trial run was skipped, a cage having started with this tool on this boot
	// (SetupKnown); a failed session of it is tried again (Recheck).
	Unprobed bool
}

// Wrap is the program and argv that run argv (argv[0] resolved to an absolute path) in the
// cage. A nil Cage runs argv as it is.
func (c *Cage) Wrap(argv []string) (string, []string) {
	if c == nil {
		return argv[0], argv
	}
	switch c.Mechanism {
	case SandboxExec:
		return c.Tool, append([]string{c.Tool, "-p", SeatbeltProfile(c.Policy), "--"}, argv...)
	default:
		return c.Tool, append([]string{c.Tool}, BwrapArgs(c.Policy, argv)...)
	}
}

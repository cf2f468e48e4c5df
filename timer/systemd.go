package timer

// This file holds the systemd unit builders and the escaping they rely on. It has no build tags:
// the units are plain text, so Linux tests check them (and systemd-analyze verifies them) even
// where the code that installs them never runs.

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/coreos/go-systemd/v22/unit"
	"github.com/godbus/dbus/v5"
)

// maxUnitLine is systemd's LONG_LINE_MAX (1 MiB): a longer line in a unit file is refused.
const maxUnitLine = 1 << 20

// maxPath is PATH_MAX minus the NUL: systemd refuses longer paths in path-valued directives.
const maxPath = 4095

// checkText refuses what systemd cannot carry in a unit file value at all: invalid UTF-8 (the
// parser drops such lines), a newline (it would end the directive and let the rest of the value
// become a directive of its own) and every other control character.
func checkText(what, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s %q is not valid UTF-8", what, s)
	}
	for i, r := range s {
		switch {
		case r == '\n' || r == '\r':
			return fmt.Errorf("%s %q contains a line break at byte %d", what, s, i)
		case unicode.IsControl(r):
			return fmt.Errorf("%s %q contains the control character %U at byte %d", what, s, r, i)
		}
	}
	return nil
}

// QuoteExec returns s as one word of an ExecStart= line.
//
// systemd reads ExecStart= in three passes, and each needs its own escape: it splits the line
// into words with C-style unquoting (so `\` and `"` are escaped inside double quotes), then
// expands specifiers in each word (`%` → `%%`), then, when the service starts, expands
// environment variables (`$` → `$$`). The word is always double-quoted so that spaces, `;`
// and an empty string survive. Line breaks, other control characters and invalid UTF-8 are
// refused: systemd has no escape for a line break that survives every pass, and refusing is
// better than a unit that runs something else.
func QuoteExec(s string) (string, error) {
	if err := checkText("ExecStart word", s); err != nil {
		return "", err
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case '%':
			b.WriteString("%%")
		case '$':
			b.WriteString("$$")
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String(), nil
}

// EscapePath returns p for a directive that takes one literal path (PathChanged=, for
// example). These take the rest of the line verbatim apart from specifiers, so only `%` is
// escaped. A path systemd would read differently is refused: a relative or unclean path
// (systemd normalizes or refuses it), trailing whitespace (the parser strips it), a trailing
// backslash (it continues the line onto the next one), line breaks, control characters and
// invalid UTF-8. EnvironmentFile= is not such a directive: use EscapeGlobPath.
func EscapePath(p string) (string, error) {
	if err := checkPath(p); err != nil {
		return "", err
	}
	return strings.ReplaceAll(p, "%", "%%"), nil
}

// EscapeGlobPath returns p for EnvironmentFile=, which systemd expands with glob(3) when the
// service starts: on top of EscapePath's rules, the glob characters `\`, `*`, `?` and `[` are
// backslash-escaped so that they name themselves. (Found against systemd 252: a chamber path
// holding a backslash otherwise fails every start with "Result: resources".)
func EscapeGlobPath(p string) (string, error) {
	if err := checkPath(p); err != nil {
		return "", err
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '%':
			b.WriteString("%%")
		case '\\', '*', '?', '[':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func checkPath(p string) error {
	if err := checkText("path", p); err != nil {
		return err
	}
	switch {
	case !strings.HasPrefix(p, "/"):
		return fmt.Errorf("path %q is not absolute", p)
	case len(p) > maxPath:
		return fmt.Errorf("path %.40q... is longer than %d bytes", p, maxPath)
	case strings.HasSuffix(p, `\`):
		return fmt.Errorf("path %q ends in a backslash, which systemd reads as a line continuation", p)
	}
	if r, _ := utf8.DecodeLastRuneInString(p); unicode.IsSpace(r) {
		return fmt.Errorf("path %q ends in whitespace, which systemd strips", p)
	}
	if c := filepath.Clean(p); c != p {
		return fmt.Errorf("path %q is not clean (want %q)", p, c)
	}
	return nil
}

// checkExecutable refuses an executable path that systemd cannot run whatever the quoting: it
// unquotes the first word and then refuses quotes, backslashes and control characters in it
// ("Executable path contains special characters"), and it never expands `$` in the path it
// executes (only in the argv it passes), so `$$` would name a different file.
func checkExecutable(p string) error {
	if err := checkText("executable", p); err != nil {
		return err
	}
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("executable %q is not an absolute path", p)
	}
	if strings.HasSuffix(p, "/") {
		return fmt.Errorf("executable %q names a directory", p)
	}
	if i := strings.IndexAny(p, "\"'\\$"); i >= 0 {
		return fmt.Errorf("executable %q contains %q, which systemd cannot express in an executable path (move the binary)", p, p[i])
	}
	return nil
}

// ExecLine returns the value of an ExecStart= line that runs argv.
func ExecLine(argv []string) (string, error) {
	if len(argv) == 0 {
		return "", errors.New("empty command line")
	}
	if err := checkExecutable(argv[0]); err != nil {
		return "", err
	}
	words := make([]string, len(argv))
	for i, a := range argv {
		q, err := QuoteExec(a)
		if err != nil {
			return "", fmt.Errorf("argument %d: %w", i, err)
		}
		words[i] = q
	}
	return strings.Join(words, " "), nil
}

// UnquoteExec splits an ExecStart= value into the argv systemd would pass, following systemd
// 252: words separated by whitespace, double or single quotes anywhere in a word, C escapes
// (EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE), then `%%` → `%` in each word, then `$$` → `$`. What it
// cannot resolve without a unit and an environment is an error: other specifiers, variable
// references, and `;` separating several commands. It reads what QuoteExec writes and is used
// to recover a chamber's directory from an installed unit.
func UnquoteExec(line string) ([]string, error) {
	if !utf8.ValidString(line) {
		return nil, errors.New("ExecStart is not valid UTF-8")
	}
	var words []string
	i := 0
	for {
		for i < len(line) && isUnitSpace(line[i]) {
			i++
		}
		if i == len(line) {
			break
		}
		start := i
		var b strings.Builder
		var quote byte
		quoted := false
		for i < len(line) {
			c := line[i]
			if quote == 0 && isUnitSpace(c) {
				break
			}
			switch {
			case c == '\\':
				s, n, err := cunescape(line[i:])
				if err != nil {
					return nil, fmt.Errorf("ExecStart byte %d: %w", i, err)
				}
				b.WriteString(s)
				i += n
				continue
			case quote == 0 && (c == '"' || c == '\''):
				quote, quoted = c, true
			case quote != 0 && c == quote:
				quote = 0
			default:
				b.WriteByte(c)
			}
			i++
		}
		if quote != 0 {
			return nil, fmt.Errorf("ExecStart byte %d: unbalanced %c quote", start, quote)
		}
		raw := b.String()
		if !quoted && raw == ";" {
			return nil, fmt.Errorf("ExecStart byte %d: several commands separated by ';' are not supported", start)
		}
		w, err := expandWord(raw)
		if err != nil {
			return nil, fmt.Errorf("ExecStart word %d: %w", len(words), err)
		}
		words = append(words, w)
	}
	if len(words) == 0 {
		return nil, errors.New("ExecStart is empty")
	}
	return words, nil
}

// isUnitSpace is systemd's WHITESPACE set.
func isUnitSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// simpleEscapes are the one-letter C escapes systemd knows.
var simpleEscapes = map[byte]string{'a': "\a", 'b': "\b", 'f': "\f", 'n': "\n", 'r': "\r",
	't': "\t", 'v': "\v", '\\': `\`, '"': `"`, '\'': "'", 's': " "}

// cunescape decodes one C escape at the start of s (which begins with a backslash), as systemd's
// cunescape_one does, and reports how many bytes it used.
func cunescape(s string) (string, int, error) {
	if len(s) < 2 {
		return "", 0, errors.New("backslash at the end of the line")
	}
	if r, ok := simpleEscapes[s[1]]; ok {
		return r, 2, nil
	}
	var digits, base int
	switch c := s[1]; {
	case c == 'x':
		digits, base = 2, 16
	case c == 'u':
		digits, base = 4, 16
	case c == 'U':
		digits, base = 8, 16
	case c >= '0' && c <= '7':
		digits, base = 3, 8
	default:
		return "", 0, fmt.Errorf("unknown escape \\%c", c)
	}
	from := 2
	if base == 8 {
		from = 1
	}
	if len(s) < from+digits {
		return "", 0, fmt.Errorf("short escape %q", s)
	}
	v, err := strconv.ParseUint(s[from:from+digits], base, 32)
	if err != nil {
		return "", 0, fmt.Errorf("bad escape %q", s[:from+digits])
	}
	if v == 0 {
		return "", 0, errors.New("escape of a NUL byte")
	}
	if base == 8 || s[1] == 'x' {
		if v > 0xff {
			return "", 0, fmt.Errorf("bad escape %q", s[:from+digits])
		}
		return string([]byte{byte(v)}), from + digits, nil
	}
	if !utf8.ValidRune(rune(v)) {
		return "", 0, fmt.Errorf("escape %q is not a valid code point", s[:from+digits])
	}
	return string(rune(v)), from + digits, nil
}

// expandWord applies the specifier pass and then the environment pass to one unquoted word.
func expandWord(raw string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		if raw[i] != '%' {
			b.WriteByte(raw[i])
			continue
		}
		if i+1 < len(raw) && raw[i+1] == '%' {
			b.WriteByte('%')
			i++
			continue
		}
		if i+1 == len(raw) {
			return "", errors.New("lone % at the end of the word")
		}
		return "", fmt.Errorf("specifier %%%c cannot be resolved outside systemd", raw[i+1])
	}
	s := b.String()
	// A word that starts with `$` (and not `$$` or `${`) is replaced by a variable's words, or
	// by nothing when the variable is unset.
	if strings.HasPrefix(s, "$") && !strings.HasPrefix(s, "$$") && !strings.HasPrefix(s, "${") {
		return "", fmt.Errorf("word %q is a variable reference", s)
	}
	b.Reset()
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '{':
			return "", fmt.Errorf("word %q refers to a variable", s)
		default:
			b.WriteByte('$')
		}
	}
	return b.String(), nil
}

// Unit names of a chamber's systemd units.

// SystemdServiceName is the service that runs a timer's job: `<ID>-<kind>.service`.
func SystemdServiceName(id string, k Kind) string { return id + "-" + string(k) + ".service" }

// SystemdTimerName is the timer of one kind: `<ID>-<kind>.timer`.
func SystemdTimerName(id string, k Kind) string { return id + "-" + string(k) + ".timer" }

// SystemdPathName is the inbox watcher: `<ID>-inbox.path`.
func SystemdPathName(id string) string { return id + "-inbox.path" }

// SystemdBootName is the unit that runs the wake at every start of the user manager:
// `<ID>-boot.service`.
func SystemdBootName(id string) string { return id + "-boot.service" }

// checkID refuses an ID that could not have come from ID(): it names files and units, so it
// must not carry a slash, a dot or anything systemd would escape.
func checkID(id string) error {
	if !strings.HasPrefix(id, Prefix) || len(id) <= len(Prefix) || len(id) > 128 {
		return fmt.Errorf("invalid chamber id %q", id)
	}
	for _, c := range []byte(id) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("invalid chamber id %q", id)
		}
	}
	return nil
}

func checkKind(k Kind) error {
	for _, known := range Kinds {
		if k == known {
			return nil
		}
	}
	return fmt.Errorf("unknown timer kind %q", k)
}

// OnCalendar returns the OnCalendar= value for t: the full date and time in UTC with seconds.
// A fractional second is rounded up, so the timer never fires before t. systemd's calendar
// covers the years 1970 to 2199.
func OnCalendar(t time.Time) (string, error) {
	if t.IsZero() {
		return "", errors.New("no time given")
	}
	t = t.UTC()
	if t.Nanosecond() != 0 {
		t = t.Truncate(time.Second).Add(time.Second)
	}
	if y := t.Year(); y < 1970 || y > 2199 {
		return "", fmt.Errorf("time %s is outside the years systemd timers support (1970 to 2199)", t.Format(time.RFC3339))
	}
	return t.Format("2006-01-02 15:04:05") + " UTC", nil
}

// serviceUnit builds the service that runs argv for a chamber. It carries no environment of its
// own: PATH, HOME and the agent's variables live in the 0600 EnvironmentFile= only, because a
// unit file is world-readable.
func serviceUnit(c Chamber, k Kind, argv []string) ([]*unit.UnitOption, error) {
	if err := checkID(c.ID); err != nil {
		return nil, err
	}
	exec, err := ExecLine(argv)
	if err != nil {
		return nil, fmt.Errorf("%s service: %w", k, err)
	}
	if len("ExecStart=")+len(exec) >= maxUnitLine {
		return nil, fmt.Errorf("%s service: ExecStart line is longer than systemd's limit of %d bytes", k, maxUnitLine)
	}
	if c.EnvFile == "" {
		return nil, fmt.Errorf("%s service: no environment file given", k)
	}
	env, err := EscapeGlobPath(c.EnvFile)
	if err != nil {
		return nil, fmt.Errorf("%s service: environment file: %w", k, err)
	}
	return []*unit.UnitOption{
		unit.NewUnitOption("Unit", "Description", "cryochamber "+string(k)+" for "+c.ID),
		// No start limit: systemd's default (5 starts in 10 s) is reached by a few messages
		// answered by quick sessions, and then refuses the next start; the inbox watcher that
		// asked for it fails with unit-start-limit-hit and stays failed, so later messages
		// wait for the next wake (issue 23, item 6). Every start here is asked for by a timer,
		// the watcher or a command, and a wake with nothing to do ends at once.
		unit.NewUnitOption("Unit", "StartLimitIntervalSec", "0"),
		unit.NewUnitOption("Service", "Type", "oneshot"),
		unit.NewUnitOption("Service", "ExecStart", exec),
		// "-": a missing file does not stop the unit from starting. Removed by a cleanup, it
		// would otherwise stop every unit of the chamber, the dead-man's included, without a
		// word; the wake starts without it and says so (chamber/degraded.go).
		unit.NewUnitOption("Service", "EnvironmentFile", "-"+env),
		// cryochamber enforces session_timeout itself and kills the agent's process group;
		// systemd's default start timeout for a oneshot (90s) would kill every real session.
		unit.NewUnitOption("Service", "TimeoutStartSec", "infinity"),
	}, nil
}

// SystemdUnits builds the service and timer of one job: `<ID>-<kind>.service` runs j.Argv with
// the chamber's environment file, and `<ID>-<kind>.timer` starts it at j.At (UTC, to the second,
// rounded up). The service is a unit file; the timer is created as a transient unit over D-Bus
// (no file, no daemon-reload: see timerProperties), and these options are what it holds, in the
// words of a unit file (its service is the one of the same name, systemd's default). A
// transient timer does not outlive the user manager: SystemdBoot's unit re-arms it at the next
// start.
func SystemdUnits(c Chamber, j Job) (service, timer []*unit.UnitOption, err error) {
	if err := checkKind(j.Kind); err != nil {
		return nil, nil, err
	}
	service, err = serviceUnit(c, j.Kind, j.Argv)
	if err != nil {
		return nil, nil, err
	}
	cal, err := OnCalendar(j.At)
	if err != nil {
		return nil, nil, fmt.Errorf("%s timer: %w", j.Kind, err)
	}
	timer = []*unit.UnitOption{
		unit.NewUnitOption("Unit", "Description", "cryochamber "+string(j.Kind)+" timer for "+c.ID),
		// A stopped or elapsed timer is unloaded at once, so that the next Arm can create it
		// again under the same name.
		unit.NewUnitOption("Unit", "CollectMode", "inactive-or-failed"),
		unit.NewUnitOption("Timer", "OnCalendar", cal),
		unit.NewUnitOption("Timer", "AccuracySec", "1s"),
		unit.NewUnitOption("Timer", "RemainAfterElapse", "no"),
	}
	return service, timer, nil
}

// SystemdBoot builds `<ID>-boot.service`, which runs argv (the wake) once at every start of the
// user manager: wanted by default.target, and of Type=exec so that the manager's startup does
// not wait for a session. The wake then runs a wake that fell due while the machine was off
// (with its DELAYED notice) and re-arms the timers the restart removed.
func SystemdBoot(c Chamber, argv []string) ([]*unit.UnitOption, error) {
	opts, err := serviceUnit(c, "boot", argv)
	if err != nil {
		return nil, err
	}
	for _, o := range opts {
		if o.Section == "Service" && o.Name == "Type" {
			o.Value = "exec"
		}
	}
	return append(opts, unit.NewUnitOption("Install", "WantedBy", "default.target")), nil
}

// timerProperties turns the options of a timer (SystemdUnits) into the properties of a
// transient timer: the same values, in the types systemd's D-Bus API takes.
func timerProperties(opts []*unit.UnitOption) ([]sd.Property, error) {
	var props []sd.Property
	for _, o := range opts {
		switch o.Section + "." + o.Name {
		case "Unit.Description":
			props = append(props, sd.PropDescription(o.Value))
		case "Unit.CollectMode", "Timer.OnCalendar":
			props = append(props, sd.Property{Name: o.Name, Value: dbus.MakeVariant(o.Value)})
		case "Timer.AccuracySec":
			if o.Value != "1s" {
				return nil, fmt.Errorf("AccuracySec=%s: only 1s is used", o.Value)
			}
			props = append(props, sd.Property{Name: "AccuracyUSec", Value: dbus.MakeVariant(uint64(time.Second / time.Microsecond))})
		case "Timer.RemainAfterElapse":
			props = append(props, sd.Property{Name: o.Name, Value: dbus.MakeVariant(o.Value == "yes")})
		default:
			return nil, fmt.Errorf("timer option %s= has no transient form here", o.Name)
		}
	}
	return props, nil
}

// SystemdPath builds the inbox watcher `<ID>-inbox.path`, which starts `<ID>-wake.service` when
// something changes in dir, and that wake service (running wakeArgv) for the case where no wake
// timer has installed it yet.
func SystemdPath(c Chamber, dir string, wakeArgv []string) (path, wakeService []*unit.UnitOption, err error) {
	wakeService, err = serviceUnit(c, Wake, wakeArgv)
	if err != nil {
		return nil, nil, err
	}
	d, err := EscapePath(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("inbox watcher: %w", err)
	}
	path = []*unit.UnitOption{
		unit.NewUnitOption("Unit", "Description", "cryochamber inbox watcher for "+c.ID),
		unit.NewUnitOption("Path", "PathChanged", d),
		unit.NewUnitOption("Path", "Unit", SystemdServiceName(c.ID, Wake)),
		unit.NewUnitOption("Install", "WantedBy", "paths.target"),
	}
	return path, wakeService, nil
}

// serializeUnit renders options as a unit file.
func serializeUnit(opts []*unit.UnitOption) ([]byte, error) {
	return io.ReadAll(unit.Serialize(opts))
}

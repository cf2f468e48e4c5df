package chamber

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pelletier/go-toml/v2"

	"github.com/cryochamber/cryochamber/agent"
	"github.com/cryochamber/cryochamber/internal/confined"
)

// ConfigFile is the name of a chamber's configuration file.
const ConfigFile = "cryo.toml"

// maxConfigSize bounds cryo.toml: it is a hand-written file of a few dozen lines.
const maxConfigSize = 1 << 20

// Config is cryo.toml. Every key is optional; Load fills in the defaults.
type Config struct {
	Agent           string                `toml:"agent"`
	Agents          map[string]AgentTable `toml:"agents"`
	AllowedCommands []string              `toml:"allowed_commands"`
	AgentEnv        []string              `toml:"agent_env"`
	Timezone        string                `toml:"timezone"`
	SessionTimeout  Duration              `toml:"session_timeout"`
	MaxRetries      *int                  `toml:"max_retries"`
	SlowRetry       Duration              `toml:"slow_retry"`
	LateGrace       Duration              `toml:"late_grace"`
	FallbackAfter   Duration              `toml:"fallback_after"`
	DelayedAfter    Duration              `toml:"delayed_notice_after"`
	MinFreeDisk     Size                  `toml:"min_free_disk"`
	WatchInbox      *bool                 `toml:"watch_inbox"`
	Backend         string                `toml:"backend"`
	Fallback        []FallbackEntry       `toml:"fallback"`
	FallbackAllow   []string              `toml:"fallback_allow"`
	Email           *EmailConfig          `toml:"email"`
	Webhook         *WebhookConfig        `toml:"webhook"`
	Channels        *ChannelsConfig       `toml:"channels"` // config_channels.go
	Slurm           *SlurmConfig          `toml:"slurm"`    // config_slurm.go
	Sandbox         *SandboxConfig        `toml:"sandbox"`  // sandbox.go: the cage sessions run in

	// Guardrails on the agent's schedule (guardrails.go).
	MinInterval        Duration `toml:"min_interval"`
	MaxSessionsPerDay  *int     `toml:"max_sessions_per_day"`
	QuietHours         string   `toml:"quiet_hours"`
	QuietHoursMessages string   `toml:"quiet_hours_messages"`
	StopAfter          string   `toml:"stop_after"`
	MaxSessions        *int     `toml:"max_sessions"`
	Jitter             Duration `toml:"jitter"`
	BudgetPerDay       *float64 `toml:"budget_per_day"`   // USD (ledger.go)
	BudgetPerMonth     *float64 `toml:"budget_per_month"` // USD
	guard              guardConfig

	// Issue 26 (config_heartbeat.go): the off-machine monitor, the summaries filed in the
	// outbox, and the periodic digest.
	Heartbeat *HeartbeatConfig `toml:"heartbeat"`
	Summaries string           `toml:"summaries"`
	Digest    string           `toml:"digest"`

	// Snapshots of the chamber's files after every session (snapshot_config.go).
	Snapshots       *bool     `toml:"snapshots"`
	SnapshotExclude []string  `toml:"snapshot_exclude"`
	SnapshotMaxFile Size      `toml:"snapshot_max_file"`
	SnapshotKeep    Retention `toml:"snapshot_keep"`

	// Location is Timezone loaded (the system zone when Timezone is empty).
	Location *time.Location `toml:"-"`
}

// AgentTable is an [agents.NAME] table: a new agent, or extras for a preset of the same name.
type AgentTable struct {
	Command []string          `toml:"command"`
	Stdin   *bool             `toml:"stdin"`
	Args    []string          `toml:"args"`
	Env     map[string]string `toml:"env"`
}

// FallbackEntry is an operator alert target: [[fallback]].
type FallbackEntry struct {
	Action  string `toml:"action" json:"action"`
	Target  string `toml:"target" json:"target"`
	Message string `toml:"message" json:"message,omitempty"`
}

// EmailConfig is the [email] table: how alerts are sent by SMTP.
type EmailConfig struct {
	Host            string   `toml:"host"`
	Port            int      `toml:"port"`
	TLS             string   `toml:"tls"`
	Username        string   `toml:"username"`
	PasswordEnv     string   `toml:"password_env"`
	PasswordCommand []string `toml:"password_command"`
	From            string   `toml:"from"`
	Timeout         Duration `toml:"timeout"`
}

// WebhookConfig is the [webhook] table.
type WebhookConfig struct {
	Timeout   Duration `toml:"timeout"`
	Retries   *int     `toml:"retries"`
	SecretEnv string   `toml:"secret_env"`
}

// Defaults of SPEC section 11.
const (
	DefaultAgent          = "opencode"
	DefaultSessionTimeout = 2 * time.Hour
	DefaultMaxRetries     = 3
	DefaultSlowRetry      = 6 * time.Hour
	DefaultLateGrace      = 10 * time.Minute
	DefaultFallbackAfter  = time.Hour
	DefaultDelayedAfter   = 5 * time.Minute
	DefaultMinFreeDisk    = 100 << 20
)

// ConfigError is a problem in cryo.toml. Line is 0 when the problem has no single line (a
// value that is wrong only together with another).
type ConfigError struct {
	File string
	Line int
	Key  string
	Msg  string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Key != "" {
		fmt.Fprintf(&b, "%s: ", e.Key)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// readConfig reads the chamber's cryo.toml (confined: a symlink or a FIFO there is refused,
// never followed or waited on). A missing file is nil, nil: the all-defaults configuration.
func readConfig(fs *confined.Dir) ([]byte, error) {
	data, err := fs.ReadFile(ConfigFile, maxConfigSize)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return data, err
}

// LoadConfig reads the cryo.toml of the chamber at dir strictly (an unknown key is an error
// naming its line) and fills in the defaults. A missing file is the all-defaults configuration.
// local is the system time zone, used when timezone is not set. Only the operator's commands
// (start, reload, validate) read it: the configuration in force is the one they accepted.
func LoadConfig(dir string, local *time.Location) (*Config, error) {
	fs, err := confined.Open(dir)
	if err != nil {
		return nil, err
	}
	defer fs.Close()
	data, err := readConfig(fs)
	if err != nil {
		return nil, err
	}
	return ParseConfig(filepath.Join(dir, ConfigFile), data, local)
}

// ParseConfig is LoadConfig on bytes already read; path is only used in messages.
func ParseConfig(path string, data []byte, local *time.Location) (*Config, error) {
	name := filepath.Base(path)
	if !utf8.Valid(data) {
		return nil, &ConfigError{File: name, Msg: "not valid UTF-8 text"}
	}
	var c Config
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, tomlError(name, data, err)
	}
	if err := c.check(name, data, local); err != nil {
		return nil, err
	}
	return &c, nil
}

// tomlError turns go-toml's errors into ConfigErrors that name the file, line and key.
func tomlError(name string, data []byte, err error) error {
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) && len(strict.Errors) > 0 {
		var msgs []string
		first := &ConfigError{File: name}
		for i, e := range strict.Errors {
			row, _ := e.Position()
			key := strings.Join(e.Key(), ".")
			if i == 0 {
				first.Line, first.Key = row, key
			}
			msgs = append(msgs, fmt.Sprintf("%s:%d: unknown key %q", name, row, key))
		}
		if len(msgs) == 1 {
			first.Key = ""
			first.Msg = fmt.Sprintf("unknown key %q (see `cryochamber init` for the keys)", strings.Join(strict.Errors[0].Key(), "."))
			return first
		}
		first.Key = ""
		first.Msg = fmt.Sprintf("unknown keys:\n  %s\n(see `cryochamber init` for the keys)", strings.Join(msgs, "\n  "))
		return first
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, _ := de.Position()
		key := strings.Join(de.Key(), ".")
		return &ConfigError{File: name, Line: row, Key: key, Msg: cleanTOMLMessage(de.Error())}
	}
	// go-toml returns errors of UnmarshalText (a duration or size) without a position: find
	// the line that holds the rejected value.
	var ve *valueError
	if errors.As(err, &ve) {
		line, key := valueLine(data, ve.text)
		return &ConfigError{File: name, Line: line, Key: key, Msg: ve.Error()}
	}
	return &ConfigError{File: name, Msg: cleanTOMLMessage(err.Error())}
}

// valueError is a value that UnmarshalText refused.
type valueError struct {
	text string
	msg  string
}

func (e *valueError) Error() string { return e.msg }

// valueLine finds the first `key = value` line whose value is text (quoted or not).
func valueLine(data []byte, text string) (int, string) {
	for i, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		v = strings.TrimSpace(strings.SplitN(v, "#", 2)[0])
		if strings.Trim(v, `"'`) == text {
			return i + 1, strings.TrimSpace(k)
		}
	}
	return 0, ""
}

func cleanTOMLMessage(s string) string {
	s = strings.TrimPrefix(s, "toml: ")
	return s
}

// keyLine finds the line of a top-level or dotted key in data, for checks that run after
// decoding (go-toml reports positions only for syntax and type errors). Best effort: 0 when the
// key cannot be found.
func keyLine(data []byte, table, key string) int {
	cur := ""
	for i, line := range strings.Split(string(data), "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "[") {
			cur = strings.Trim(strings.TrimSpace(strings.SplitN(t, "#", 2)[0]), "[] ")
			continue
		}
		if cur != table {
			continue
		}
		if k, _, ok := strings.Cut(t, "="); ok && strings.Trim(strings.TrimSpace(k), `"'`) == key {
			return i + 1
		}
	}
	return 0
}

func (c *Config) check(name string, data []byte, local *time.Location) error {
	bad := func(table, key, format string, args ...any) error {
		full := key
		if table != "" {
			full = table + "." + key
		}
		return &ConfigError{File: name, Line: keyLine(data, table, key), Key: full, Msg: fmt.Sprintf(format, args...)}
	}
	if strings.TrimSpace(c.Agent) == "" {
		if c.Agent != "" {
			return bad("", "agent", "is empty")
		}
		c.Agent = DefaultAgent
	}
	if _, err := SplitAgentCommand(c.Agent); err != nil {
		return bad("", "agent", "%v", err)
	}
	if c.Timezone == "" {
		c.Location = local
		if c.Location == nil {
			c.Location = time.UTC
		}
	} else {
		loc, err := time.LoadLocation(c.Timezone)
		if err != nil || c.Timezone == "Local" {
			return bad("", "timezone", "unknown time zone %q (want an IANA name such as \"Europe/Berlin\" or \"UTC\")", c.Timezone)
		}
		c.Location = loc
	}
	for _, d := range []struct {
		key string
		v   *Duration
		def time.Duration
	}{
		{"session_timeout", &c.SessionTimeout, DefaultSessionTimeout},
		{"late_grace", &c.LateGrace, DefaultLateGrace},
		{"fallback_after", &c.FallbackAfter, DefaultFallbackAfter},
		{"delayed_notice_after", &c.DelayedAfter, DefaultDelayedAfter},
		{"slow_retry", &c.SlowRetry, DefaultSlowRetry},
	} {
		if !d.v.set {
			d.v.D = d.def
		}
	}
	if c.SessionTimeout.D < time.Second {
		return bad("", "session_timeout", "must be at least 1s")
	}
	if c.SlowRetry.D < time.Minute {
		return bad("", "slow_retry", "must be at least 1m")
	}
	if c.FallbackAfter.D < 5*time.Second {
		return bad("", "fallback_after", "must be at least 5s (and should be longer than a normal session: a session still running then is reported overdue)")
	}
	if c.MaxRetries == nil {
		n := DefaultMaxRetries
		c.MaxRetries = &n
	} else if *c.MaxRetries < 0 || *c.MaxRetries > 10 {
		return bad("", "max_retries", "must be between 0 and 10, not %d", *c.MaxRetries)
	}
	if !c.MinFreeDisk.set {
		c.MinFreeDisk.N = DefaultMinFreeDisk
	}
	if c.WatchInbox == nil {
		t := true
		c.WatchInbox = &t
	}
	switch c.Backend {
	case "", "systemd", "launchd", "slurm":
	default:
		return bad("", "backend", "unknown backend %q (want \"systemd\", \"launchd\" or \"slurm\")", c.Backend)
	}
	if err := c.checkSlurm(bad); err != nil { // config_slurm.go
		return err
	}
	names := make([]string, 0, len(c.Agents))
	for n := range c.Agents {
		names = append(names, n)
	}
	sort.Strings(names)
	presets := agent.Presets()
	for _, n := range names {
		a := c.Agents[n]
		if !validAgentName(n) {
			return bad("agents", n, "agent name %q must be letters, digits, '-', '_' or '.'", n)
		}
		if _, preset := presets[n]; !preset && len(a.Command) == 0 {
			return bad("agents."+n, "command", "is required for an agent that is not a preset (opencode, claude, codex)")
		}
		for k := range a.Env {
			if !validEnvName(k) {
				return bad("agents."+n+".env", k, "not a valid environment variable name")
			}
		}
	}
	for _, v := range c.AgentEnv {
		if !validEnvName(v) {
			return bad("", "agent_env", "%q is not a valid environment variable name", v)
		}
	}
	for i, f := range c.Fallback {
		switch f.Action {
		case "email", "webhook":
		default:
			return &ConfigError{File: name, Key: fmt.Sprintf("fallback[%d].action", i), Msg: fmt.Sprintf("unknown action %q (want \"email\" or \"webhook\")", f.Action)}
		}
		if strings.TrimSpace(f.Target) == "" {
			return &ConfigError{File: name, Key: fmt.Sprintf("fallback[%d].target", i), Msg: "is required"}
		}
		if f.Action == "email" && c.Email == nil {
			return &ConfigError{File: name, Key: fmt.Sprintf("fallback[%d]", i), Msg: "an email fallback needs an [email] table (host, port, from)"}
		}
	}
	if e := c.Email; e != nil {
		if e.Host == "" {
			return bad("email", "host", "is required")
		}
		switch e.TLS {
		case "":
			e.TLS = "starttls"
		case "none", "starttls", "starttls-required", "tls":
		default:
			return bad("email", "tls", "unknown TLS policy %q (want none, starttls, starttls-required or tls)", e.TLS)
		}
		if e.Port == 0 {
			switch e.TLS {
			case "tls":
				e.Port = 465
			case "none":
				e.Port = 25
			default:
				e.Port = 587
			}
		}
		if e.Port < 1 || e.Port > 65535 {
			return bad("email", "port", "must be between 1 and 65535")
		}
		if e.From == "" {
			return bad("email", "from", "is required")
		}
		if e.Username != "" && e.PasswordEnv == "" && len(e.PasswordCommand) == 0 {
			return bad("email", "username", "needs password_env or password_command (a password is never written in cryo.toml)")
		}
		if e.PasswordEnv != "" && len(e.PasswordCommand) > 0 {
			return bad("email", "password_command", "give password_env or password_command, not both")
		}
		if e.PasswordEnv != "" && !validEnvName(e.PasswordEnv) {
			return bad("email", "password_env", "%q is not a valid environment variable name", e.PasswordEnv)
		}
		if !e.Timeout.set {
			e.Timeout.D = 30 * time.Second
		}
	}
	if w := c.Webhook; w != nil {
		if !w.Timeout.set {
			w.Timeout.D = 10 * time.Second
		}
		if w.Retries == nil {
			n := 3
			w.Retries = &n
		} else if *w.Retries < 0 || *w.Retries > 10 {
			return bad("webhook", "retries", "must be between 0 and 10")
		}
		if w.SecretEnv != "" && !validEnvName(w.SecretEnv) {
			return bad("webhook", "secret_env", "%q is not a valid environment variable name", w.SecretEnv)
		}
	}
	if err := c.checkSandbox(name, data); err != nil {
		return err
	}
	if err := c.checkHeartbeat(name, data); err != nil {
		return err
	}
	if err := c.checkSnapshots(bad); err != nil {
		return err
	}
	if err := c.checkGuardrails(name, data); err != nil {
		return err
	}
	return c.checkChannels(name, data)
}

// Duration is a Go duration written as a string in cryo.toml ("90s", "10m", "2h").
type Duration struct {
	D   time.Duration
	set bool
}

// UnmarshalText parses a duration; go-toml reports the error with the key's line.
func (d *Duration) UnmarshalText(b []byte) error {
	text := string(b)
	if _, err := strconv.ParseInt(text, 10, 64); err == nil {
		return &valueError{text, fmt.Sprintf("%s has no unit: write durations as strings such as \"90s\", \"10m\", \"2h\"", text)}
	}
	v, err := time.ParseDuration(text)
	if err != nil {
		return &valueError{text, fmt.Sprintf("%q is not a duration (want a Go duration such as \"90s\", \"10m\", \"2h\")", text)}
	}
	if v <= 0 {
		return &valueError{text, fmt.Sprintf("duration %q must be positive", text)}
	}
	d.D, d.set = v, true
	return nil
}

// Size is a byte count written as a string in cryo.toml ("100MiB", "1GB", "512KiB", "4096").
type Size struct {
	N   int64
	set bool
}

// UnmarshalText parses a size with an optional B, KB, MB, GB, KiB, MiB, GiB unit.
func (s *Size) UnmarshalText(b []byte) error {
	n, err := ParseSize(string(b))
	if err != nil {
		return &valueError{string(b), err.Error()}
	}
	s.N, s.set = n, true
	return nil
}

// ParseSize reads "100MiB", "1GB", "4096".
func ParseSize(text string) (int64, error) {
	t := strings.TrimSpace(text)
	units := []struct {
		suffix string
		mult   int64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
	}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size (want a number with an optional unit: \"100MiB\", \"1GB\")", text)
	}
	return n * mult, nil
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

func validAgentName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		switch {
		case r == '-', r == '_', r == '.', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		default:
			return false
		}
	}
	return true
}

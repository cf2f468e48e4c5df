package chamber

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/internal/heartbeat"
)

// HeartbeatConfig is the [heartbeat] table: an off-machine monitor in healthchecks.io's
// conventions (internal/heartbeat). `url` is the check's ping URL; `api_url`, `api_key_env`
// and `check` (its uuid) let every hibernation set the check's timeout to the next wake. The
// API key is never written here: only the variable that holds it, captured at `start` like
// the alert secrets and never given to the agent.
type HeartbeatConfig struct {
	URL       string   `toml:"url" json:"url"`
	APIURL    string   `toml:"api_url" json:"api_url"`
	APIKeyEnv string   `toml:"api_key_env" json:"api_key_env"`
	Check     string   `toml:"check" json:"check"`
	Grace     Duration `toml:"grace" json:"grace"` // default: fallback_after, at least 1m
}

// Summaries settings: "outbox" files each session's summary as a sealed outbox item (the
// default), "off" does not.
const (
	SummariesOutbox = "outbox"
	SummariesOff    = "off"
)

var uuidRE = lazyRE(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// heartbeatSecretNames is the API key's variable, when there is one.
func (c *Config) heartbeatSecretNames() []string {
	if h := c.Heartbeat; h != nil && h.APIKeyEnv != "" {
		return []string{h.APIKeyEnv}
	}
	return nil
}

// checkHeartbeat validates [heartbeat], summaries and digest, and fills in their defaults.
func (c *Config) checkHeartbeat(name string, data []byte) error {
	bad := func(table, key, format string, args ...any) error {
		full := key
		if table != "" {
			full = table + "." + key
		}
		return &ConfigError{File: name, Line: keyLine(data, table, key), Key: full, Msg: fmt.Sprintf(format, args...)}
	}
	switch c.Summaries {
	case "":
		c.Summaries = SummariesOutbox
	case SummariesOutbox, SummariesOff:
	default:
		return bad("", "summaries", "unknown value %q (want \"outbox\" or \"off\")", c.Summaries)
	}
	if c.Digest != "" {
		if _, err := ParseDigest(c.Digest); err != nil {
			return bad("", "digest", "%v", err)
		}
	}
	h := c.Heartbeat
	if h == nil {
		return nil
	}
	if h.URL == "" {
		return bad("heartbeat", "url", "is required (the check's ping URL, such as https://hc-ping.com/<uuid>): without pings the monitor never expects anything")
	}
	if err := heartbeat.CheckURL(h.URL); err != nil {
		return bad("heartbeat", "url", "%v", err)
	}
	if h.APIURL != "" || h.APIKeyEnv != "" || h.Check != "" {
		switch {
		case h.APIURL == "":
			return bad("heartbeat", "api_url", "is required with api_key_env and check (the monitor's site, such as https://healthchecks.io)")
		case h.APIKeyEnv == "":
			return bad("heartbeat", "api_key_env", "is required with api_url (the variable that holds a read-write API key; the key itself never goes in cryo.toml)")
		case h.Check == "":
			return bad("heartbeat", "check", "is required with api_url (the check's uuid)")
		}
		if err := heartbeat.CheckURL(h.APIURL); err != nil {
			return bad("heartbeat", "api_url", "%v", err)
		}
		if !validEnvName(h.APIKeyEnv) {
			return bad("heartbeat", "api_key_env", "%q is not a valid environment variable name", h.APIKeyEnv)
		}
		if !uuidRE().MatchString(h.Check) {
			return bad("heartbeat", "check", "%q is not a uuid (the check's id in the monitor, 8-4-4-4-12 hex digits)", h.Check)
		}
	}
	if !h.Grace.set {
		h.Grace.D = max(c.FallbackAfter.D, time.Minute)
	}
	if h.Grace.D < time.Minute || h.Grace.D > heartbeat.MaxSeconds*time.Second {
		return bad("heartbeat", "grace", "must be between 1m and a year (the monitor's bounds)")
	}
	return nil
}

// DigestSchedule is the `digest` key: daily at a time, or weekly on a day at a time, in the
// chamber's zone.
type DigestSchedule struct {
	Weekly  bool
	Day     time.Weekday
	Hour    int
	Minute  int
	Literal string
}

var weekdays = map[string]time.Weekday{"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday}

// ParseDigest reads "daily 09:00" or "weekly mon 09:00".
func ParseDigest(s string) (DigestSchedule, error) {
	d := DigestSchedule{Literal: s}
	f := strings.Fields(strings.ToLower(s))
	hhmm := ""
	switch {
	case len(f) == 2 && f[0] == "daily":
		hhmm = f[1]
	case len(f) == 3 && f[0] == "weekly":
		day, ok := weekdays[f[1]]
		if !ok && len(f[1]) > 3 {
			day, ok = weekdays[f[1][:3]]
		}
		if !ok {
			return d, fmt.Errorf("%q: %q is not a day (want mon, tue, wed, thu, fri, sat or sun)", s, f[1])
		}
		d.Weekly, d.Day = true, day
		hhmm = f[2]
	default:
		return d, fmt.Errorf("%q is not a digest schedule (want \"daily 09:00\" or \"weekly mon 09:00\")", s)
	}
	hs, ms, ok := strings.Cut(hhmm, ":")
	h, err1 := strconv.Atoi(hs)
	m, err2 := strconv.Atoi(ms)
	if !ok || err1 != nil || err2 != nil || len(ms) != 2 || h < 0 || h > 23 || m < 0 || m > 59 {
		return d, fmt.Errorf("%q: %q is not a time of day (want HH:MM, 24-hour)", s, hhmm)
	}
	d.Hour, d.Minute = h, m
	return d, nil
}

// Period is how long one digest covers.
func (d DigestSchedule) Period() time.Duration {
	if d.Weekly {
		return 7 * 24 * time.Hour
	}
	return 24 * time.Hour
}

// Next is the first digest time strictly after t, in loc.
func (d DigestSchedule) Next(t time.Time, loc *time.Location) time.Time {
	lt := t.In(loc)
	c := time.Date(lt.Year(), lt.Month(), lt.Day(), d.Hour, d.Minute, 0, 0, loc)
	for i := 0; i < 16 && (!c.After(t) || (d.Weekly && c.Weekday() != d.Day)); i++ {
		c = time.Date(c.Year(), c.Month(), c.Day()+1, d.Hour, d.Minute, 0, 0, loc)
	}
	return c
}

// Prev is the latest digest time at or before t, in loc.
func (d DigestSchedule) Prev(t time.Time, loc *time.Location) time.Time {
	lt := t.In(loc)
	c := time.Date(lt.Year(), lt.Month(), lt.Day(), d.Hour, d.Minute, 0, 0, loc)
	for i := 0; i < 16 && (c.After(t) || (d.Weekly && c.Weekday() != d.Day)); i++ {
		c = time.Date(c.Year(), c.Month(), c.Day()-1, d.Hour, d.Minute, 0, 0, loc)
	}
	return c
}

// OnCalendar is the schedule as a systemd calendar expression in loc's zone.
func (d DigestSchedule) OnCalendar(loc *time.Location) string {
	day := ""
	if d.Weekly {
		day = d.Day.String()[:3] + " "
	}
	zone := " " + loc.String()
	if loc == time.Local || loc.String() == "Local" || loc.String() == "" {
		zone = "" // the machine's zone, which is also systemd's default
	}
	return fmt.Sprintf("%s*-*-* %02d:%02d:00%s", day, d.Hour, d.Minute, zone)
}

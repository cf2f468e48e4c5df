package chamber

import (
	"fmt"
	"strings"
	"time"
)

// The one home of the chamber's time formats: how far a time is from now, how long a span is,
// a duration as cryo.toml writes it, a moment for messages, logs and status. Each takes its
// times (and now) as parameters: nothing here reads the clock.

// human says how far away d is, in the largest units that matter: "in 2h05m", "3m10s ago",
// "in 3 days", "2 years ago".
func human(d time.Duration) string {
	neg := d < 0
	if neg {
		d = -d
	}
	const day = 24 * time.Hour
	var s string
	switch {
	case d < time.Minute:
		s = fmt.Sprintf("%ds", int(d.Round(time.Second)/time.Second))
	case d < time.Hour:
		s = fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	case d < 60*day:
		s = fmt.Sprintf("%d days", int(d/day))
	case d < 2*365*day:
		s = fmt.Sprintf("%d months", int(d/(30*day)))
	default:
		s = fmt.Sprintf("%d years", int(d/(365*day)))
	}
	if neg {
		return s + " ago"
	}
	return "in " + s
}

// Relative prints how far t is from now ("in 2h05m", "3m10s ago").
func Relative(t, now time.Time) string { return human(t.Sub(now)) }

// span says how long d is, readably at any size: "45s", "3m10s", "2h05m", "3 days", "6 years".
func span(d time.Duration) string {
	return strings.TrimPrefix(human(d), "in ")
}

// fmtDur prints a duration the way cryo.toml writes it: "6h", "90m", "45s".
func fmtDur(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// fmtTime prints a moment of the state for messages and logs: RFC 3339 in UTC ("unknown": none).
func fmtTime(t *time.Time) string {
	if t == nil {
		return "unknown"
	}
	return t.UTC().Format(time.RFC3339)
}

// relTime prints how far a moment of the state is from now ("never": none).
func relTime(t *time.Time, now time.Time) string {
	if t == nil {
		return "never"
	}
	return Relative(*t, now)
}

// untilText ends "paused ..." with when the pause ends (RFC 3339 in UTC), or how it ends.
func untilText(t *time.Time) string {
	if t == nil {
		return " until `cryochamber resume`"
	}
	return " until " + t.UTC().Format(time.RFC3339)
}

// When prints a time once, in one format: the chamber's zone (or UTC) and how far from now.
func When(t time.Time, loc *time.Location, now time.Time) string {
	return t.In(loc).Format("2006-01-02 15:04:05 MST") + " (" + Relative(t, now) + ")"
}

// WhenUTC prints a moment in UTC (RFC 3339) and how far it is from now; "never" for the zero
// time (sync --status).
func WhenUTC(t, now time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format(time.RFC3339) + " (" + Relative(t, now) + ")"
}

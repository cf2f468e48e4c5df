package marker

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Time is a WAKE or TODO time as the agent wrote it: either an absolute instant or a duration
// counted from the end of the session. Exactly one of Abs and Rel is set.
type Time struct {
	Raw string        // the text as written, without surrounding blanks
	Abs time.Time     // an absolute time, resolved to an instant and shown in the chamber's zone
	Rel time.Duration // a relative time (+45m): > 0 and at most 100 years
}

// Relative reports whether t counts from the end of the session.
func (t Time) Relative() bool { return t.Rel != 0 }

// Resolve returns the instant t names: Abs, or end+Rel for a relative time. end is the end of
// the session that printed the marker.
func (t Time) Resolve(end time.Time) time.Time {
	if t.Rel != 0 {
		return end.Add(t.Rel)
	}
	return t.Abs
}

// String returns the time as written.
func (t Time) String() string { return t.Raw }

const (
	minYear = 1970 // systemd's calendar (and Unix time) starts here
	maxYear = 2199 // and systemd's calendar stops here
	// maxRel bounds a relative time: 100 years of 365.25 days.
	maxRel = 36525 * 24 * time.Hour
)

// errNotATime lists the accepted forms, so that an agent reading the error can fix its marker.
var errNotATime = errors.New("not a time (want 2026-03-08T09:00, 2026-03-08 09:00:30, " +
	"optionally with seconds, a fraction, Z or ±HH:MM; or +45m, +1h30m, +3d, +1w)")

// ParseTime parses a WAKE or TODO time. Blanks around s are ignored.
//
// Absolute forms are 2026-03-08T09:00, 2026-03-08T09:00:30 and 2026-03-08T09:00:30.25, with a
// space allowed instead of the T, optionally followed by Z or an offset ±HH:MM. Without an
// offset the time is read in loc (nil means UTC):
//   - a local time that does not exist (in a DST gap) moves forward by the length of the gap:
//     02:30 on a spring-forward night in America/New_York is 03:30 EDT;
//   - a local time that exists twice (when clocks go back) is the earlier of the two instants.
//
// Years before 1970 and after 2199 are refused (systemd's calendar stops at 2199).
//
// Relative forms are + followed by one or more <number><unit> with units w (7 days), d (24
// hours), h, m and s, each at most once and in that order: +45m, +1h30m, +3d, +1w, +90s. A
// relative time is an elapsed duration (+1d is 24 hours even across a DST change); it must be
// more than zero and at most 100 years.
//
// The error does not repeat s: callers quote it in their own context.
func ParseTime(s string, loc *time.Location) (Time, error) {
	s = strings.Trim(s, " \t")
	if loc == nil {
		loc = time.UTC
	}
	if s == "" {
		return Time{}, errors.New("missing time (want 2026-03-08T09:00 or +2h, for example)")
	}
	if s[0] == '+' {
		d, err := parseRel(s[1:])
		if err != nil {
			return Time{}, err
		}
		return Time{Raw: s, Rel: d}, nil
	}
	t, err := parseAbs(s, loc)
	if err != nil {
		return Time{}, err
	}
	return Time{Raw: s, Abs: t}, nil
}

var relUnits = [...]struct {
	unit byte
	secs int64
}{{'w', 7 * 86400}, {'d', 86400}, {'h', 3600}, {'m', 60}, {'s', 1}}

// parseRel parses what follows the + of a relative time. It sums in seconds with the amounts
// bounded, so that no input can overflow time.Duration.
func parseRel(s string) (time.Duration, error) {
	if s == "" {
		return 0, errNotATime
	}
	var total int64
	last := -1
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		if j == i {
			return 0, errNotATime
		}
		if j-i > 12 {
			return 0, errors.New("relative time is more than 100 years ahead")
		}
		var n int64
		for _, c := range s[i:j] {
			n = n*10 + int64(c-'0')
		}
		if j == len(s) {
			return 0, fmt.Errorf("missing unit after %s (want w, d, h, m or s)", s[i:j])
		}
		u := -1
		for k, ru := range relUnits {
			if s[j] == ru.unit {
				u = k
			}
		}
		if u < 0 {
			return 0, errNotATime
		}
		if u <= last {
			return 0, errors.New("relative time units must come in the order w, d, h, m, s, each at most once (like +1d12h)")
		}
		last = u
		total += n * relUnits[u].secs // n < 1e12, so each term and the sum stay far below 2^63
		i = j + 1
	}
	if total == 0 {
		return 0, errors.New("relative time must be more than zero")
	}
	if total > int64(maxRel/time.Second) {
		return 0, errors.New("relative time is more than 100 years ahead")
	}
	return time.Duration(total) * time.Second, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// absReader reads the fixed-width fields of an absolute time.
type absReader struct {
	s   string
	i   int
	bad bool
}

func (r *absReader) num(width int) int {
	if r.bad || r.i+width > len(r.s) {
		r.bad = true
		return 0
	}
	n := 0
	for _, c := range []byte(r.s[r.i : r.i+width]) {
		if !isDigit(c) {
			r.bad = true
			return 0
		}
		n = n*10 + int(c-'0')
	}
	r.i += width
	return n
}

// next consumes one byte if it is one of set and returns it, or returns 0.
func (r *absReader) next(set string) byte {
	if r.bad || r.i >= len(r.s) || strings.IndexByte(set, r.s[r.i]) < 0 {
		return 0
	}
	r.i++
	return r.s[r.i-1]
}

func (r *absReader) expect(set string) {
	if r.next(set) == 0 {
		r.bad = true
	}
}

func parseAbs(s string, loc *time.Location) (time.Time, error) {
	r := &absReader{s: s}
	year := r.num(4)
	r.expect("-")
	month := r.num(2)
	r.expect("-")
	day := r.num(2)
	r.expect("Tt ")
	hour := r.num(2)
	r.expect(":")
	minute := r.num(2)
	sec, nsec := 0, 0
	if r.next(":") != 0 {
		sec = r.num(2)
		if r.next(".") != 0 {
			digits := 0
			for r.i < len(s) && isDigit(s[r.i]) {
				if digits == 9 {
					return time.Time{}, errors.New("fraction of a second has more than 9 digits")
				}
				nsec = nsec*10 + int(s[r.i]-'0')
				digits++
				r.i++
			}
			if digits == 0 {
				r.bad = true
			}
			for k := digits; k < 9; k++ {
				nsec *= 10
			}
		}
	}
	var zone *time.Location // nil: no offset written, read the time in loc
	switch sign := r.next("Zz+-"); sign {
	case 0:
	case 'Z', 'z':
		zone = time.UTC
	default:
		oh := r.num(2)
		r.expect(":")
		om := r.num(2)
		if r.bad {
			break
		}
		if oh > 23 || om > 59 {
			return time.Time{}, fmt.Errorf("offset %s out of range (want ±HH:MM, at most ±23:59)", s[r.i-6:r.i])
		}
		off := oh*3600 + om*60
		if sign == '-' {
			off = -off
		}
		zone = time.FixedZone("", off)
	}
	if r.bad || r.i != len(s) {
		return time.Time{}, errNotATime
	}

	switch {
	case year < minYear:
		return time.Time{}, fmt.Errorf("year %04d is before %d", year, minYear)
	case year > maxYear:
		return time.Time{}, fmt.Errorf("year %d is after %d (systemd's calendar stops there)", year, maxYear)
	case month < 1 || month > 12:
		return time.Time{}, fmt.Errorf("month %02d out of range (01-12)", month)
	case day < 1 || day > daysIn(time.Month(month), year):
		return time.Time{}, fmt.Errorf("%s %d has no day %02d", time.Month(month), year, day)
	case hour > 23:
		return time.Time{}, fmt.Errorf("hour %02d out of range (00-23)", hour)
	case minute > 59:
		return time.Time{}, fmt.Errorf("minute %02d out of range (00-59)", minute)
	case sec > 59:
		return time.Time{}, fmt.Errorf("second %02d out of range (00-59)", sec)
	}

	var t time.Time
	if zone != nil {
		t = time.Date(year, time.Month(month), day, hour, minute, sec, nsec, zone)
	} else {
		t = resolveLocal(time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC), loc)
	}
	// An offset or a zone can carry a time written in 2199 into 2200 UTC, past systemd's calendar.
	if u := t.UTC(); u.Year() > maxYear || u.Year() < minYear {
		return time.Time{}, fmt.Errorf("%s is outside %d-%d in UTC", u.Format(time.RFC3339), minYear, maxYear)
	}
	return t.In(loc), nil
}

func daysIn(m time.Month, year int) int {
	return time.Date(year, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// resolveLocal returns the instant at which the clocks of loc show wall (whose fields are given
// in UTC). time.Date leaves the choice unspecified for local times that occur twice or never, so
// it is made here explicitly: walk the zone periods that could contain the instant and keep the
// earliest instant whose period matches; in a gap, use the offset in force before the gap, which
// moves the time forward by the length of the gap.
func resolveLocal(wall time.Time, loc *time.Location) time.Time {
	const window = 26 * 3600 // every UTC offset in use is within ±26 hours
	ws := wall.Unix()
	ns := int64(wall.Nanosecond())

	var (
		best    int64
		found   bool
		prevOff int
		havePrv bool
	)
	t := time.Unix(ws-window, 0).In(loc)
	for range 32 { // a handful of periods at most; bounded in case of a pathological zone
		_, off := t.Zone()
		startT, endT := t.ZoneBounds()
		start, end := int64(math.MinInt64), int64(math.MaxInt64)
		if !startT.IsZero() {
			start = startT.Unix()
		}
		if !endT.IsZero() {
			end = endT.Unix()
		}
		inst := ws - int64(off)
		switch {
		case start <= inst && inst < end:
			if !found || inst < best {
				best, found = inst, true
			}
		case havePrv && off > prevOff && ws >= start+int64(prevOff) && ws < start+int64(off):
			// A gap: at start the clocks jumped from start+prevOff to start+off, skipping wall.
			if g := ws - int64(prevOff); !found || g < best {
				best, found = g, true
			}
		}
		if endT.IsZero() || end > ws+window {
			break
		}
		prevOff, havePrv = off, true
		t = endT.In(loc)
	}
	if !found {
		// Not reachable with a consistent zone; fall back to Go's own choice.
		return time.Date(wall.Year(), wall.Month(), wall.Day(), wall.Hour(), wall.Minute(),
			wall.Second(), wall.Nanosecond(), loc)
	}
	return time.Unix(best, ns).In(loc)
}

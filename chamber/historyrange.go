package chamber

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/marker"
)

// HistoryRangeHint is the hint for a --since/--until (or ?since=/?until=) that does not parse.
const HistoryRangeHint = `give a date, a time or a past time: "2026-03-01", "2026-03-01 09:00", "today", "yesterday", "-3d", "-12h"`

// ParseHistoryBound reads one end of a history range, in loc at now. A whole day
// ("2026-03-01", "today", "yesterday") counts as the whole day: as --since its first instant,
// as --until (end true) its last, so that --since D --until D is the day D. A relative time
// looks back: "-3d" is three days before now ("+3d" is refused: history has no future). Any
// other WAKE time ("2026-03-01 09:00", with seconds or an offset) is that instant.
func ParseHistoryBound(s string, loc *time.Location, now time.Time, end bool) (time.Time, error) {
	s = strings.TrimSpace(s)
	day := func(t time.Time) time.Time {
		y, m, d := t.In(loc).Date()
		start := time.Date(y, m, d, 0, 0, 0, 0, loc)
		if end {
			return start.AddDate(0, 0, 1).Add(-time.Nanosecond)
		}
		return start
	}
	switch strings.ToLower(s) {
	case "now":
		return now, nil
	case "today":
		return day(now), nil
	case "yesterday":
		return day(now.In(loc).AddDate(0, 0, -1)), nil
	}
	if t, err := time.ParseInLocation("2006-01-02", s, loc); err == nil {
		return day(t), nil
	}
	if strings.HasPrefix(s, "-") {
		rel := strings.TrimPrefix(s, "-")
		if strings.Trim(rel, "0wdhms") == "" && strings.ContainsAny(rel, "0") {
			return now, nil // -0d, -0h: now
		}
		t, err := marker.ParseTime("+"+rel, loc)
		if err != nil {
			return time.Time{}, fmt.Errorf("is not a past time: %w", err)
		}
		return now.Add(-t.Rel), nil
	}
	if strings.HasPrefix(s, "+") {
		return time.Time{}, errors.New("is in the future: history looks back (-3d is three days ago)")
	}
	t, err := marker.ParseTime(s, loc)
	if err != nil {
		return time.Time{}, err
	}
	return t.Abs, nil
}

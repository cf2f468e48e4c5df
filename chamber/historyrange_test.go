package chamber

import (
	"strings"
	"testing"
	"time"
)

func TestParseHistoryBound(t *testing.T) {
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 27, 15, 30, 0, 0, loc)
	at := func(y int, mo time.Month, d, h, mi, s, ns int) time.Time {
		return time.Date(y, mo, d, h, mi, s, ns, loc)
	}
	for _, c := range []struct {
		in   string
		end  bool
		want time.Time
	}{
		{"2026-11-27", false, at(2026, 11, 27, 0, 0, 0, 0)},
		{"2026-11-27", true, at(2026, 11, 27, 23, 59, 59, 999999999)}, // the whole day
		{"2026-03-31", true, at(2026, 3, 31, 23, 59, 59, 999999999)},
		{"today", false, at(2026, 11, 27, 0, 0, 0, 0)},
		{"today", true, at(2026, 11, 27, 23, 59, 59, 999999999)},
		{"yesterday", false, at(2026, 11, 26, 0, 0, 0, 0)},
		{"Yesterday", true, at(2026, 11, 26, 23, 59, 59, 999999999)},
		{"now", true, now},
		{"-3d", false, now.Add(-72 * time.Hour)},
		{"-1h30m", false, now.Add(-90 * time.Minute)},
		{"-0d", false, now},
		{"2026-11-27 09:00", false, at(2026, 11, 27, 9, 0, 0, 0)},
		{"2026-11-27 09:00", true, at(2026, 11, 27, 9, 0, 0, 0)},
	} {
		got, err := ParseHistoryBound(c.in, loc, now, c.end)
		if err != nil {
			t.Errorf("%q (end %v): %v", c.in, c.end, err)
			continue
		}
		if !got.Equal(c.want) {
			t.Errorf("%q (end %v) = %s, want %s", c.in, c.end, got, c.want)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"+0d", "history looks back"},
		{"+3d", "history looks back"},
		{"-3x", "not a past time"},
		{"last week", "not a time"},
	} {
		if _, err := ParseHistoryBound(c.in, loc, now, false); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err %v, want %q", c.in, err, c.want)
		}
	}
	if strings.Contains(HistoryRangeHint, "+0d") || !strings.Contains(HistoryRangeHint, "-3d") {
		t.Errorf("the hint suggests what is refused: %s", HistoryRangeHint)
	}
}

package marker

import (
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the DST tests must not depend on the machine's zoneinfo
)

func mustLoad(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestParseTimeAbsolute(t *testing.T) {
	berlin := mustLoad(t, "Europe/Berlin")
	tests := []struct {
		in   string
		loc  *time.Location
		want string // RFC 3339 in UTC
	}{
		{"2026-03-08T09:00", time.UTC, "2026-03-08T09:00:00Z"},
		{"2026-03-08T09:00:30", time.UTC, "2026-03-08T09:00:30Z"},
		{"2026-03-08 09:00", time.UTC, "2026-03-08T09:00:00Z"},
		{"2026-03-08 09:00:30.25", time.UTC, "2026-03-08T09:00:30.25Z"},
		{"2026-03-08T09:00:30.123456789", time.UTC, "2026-03-08T09:00:30.123456789Z"},
		{"  2026-03-08T09:00\t", time.UTC, "2026-03-08T09:00:00Z"},
		{"2026-03-08t09:00z", berlin, "2026-03-08T09:00:00Z"},
		{"2026-03-08T09:00Z", berlin, "2026-03-08T09:00:00Z"},
		{"2026-03-08T09:00+05:30", berlin, "2026-03-08T03:30:00Z"},
		{"2026-03-08T09:00:30.5-04:00", berlin, "2026-03-08T13:00:30.5Z"},
		{"2026-03-08T09:00-00:00", berlin, "2026-03-08T09:00:00Z"},
		{"2026-03-08T09:00", berlin, "2026-03-08T08:00:00Z"},
		{"2026-07-08T09:00", berlin, "2026-07-08T07:00:00Z"},
		{"2028-02-29T12:00", time.UTC, "2028-02-29T12:00:00Z"},
		{"2199-12-31T23:59:59", time.UTC, "2199-12-31T23:59:59Z"},
		{"1970-01-01T00:00", time.UTC, "1970-01-01T00:00:00Z"},
		{"2026-03-08T09:00", nil, "2026-03-08T09:00:00Z"},
	}
	for _, tt := range tests {
		got, err := ParseTime(tt.in, tt.loc)
		if err != nil {
			t.Errorf("ParseTime(%q): %v", tt.in, err)
			continue
		}
		if s := got.Abs.UTC().Format(time.RFC3339Nano); s != tt.want {
			t.Errorf("ParseTime(%q) = %s, want %s", tt.in, s, tt.want)
		}
		if got.Rel != 0 || got.Relative() {
			t.Errorf("ParseTime(%q): Rel = %v, want 0", tt.in, got.Rel)
		}
		if got.Raw != strings.Trim(tt.in, " \t") || got.String() != got.Raw {
			t.Errorf("ParseTime(%q): Raw = %q", tt.in, got.Raw)
		}
		wantLoc := tt.loc
		if wantLoc == nil {
			wantLoc = time.UTC
		}
		if got.Abs.Location() != wantLoc {
			t.Errorf("ParseTime(%q): location %v, want %v", tt.in, got.Abs.Location(), wantLoc)
		}
	}
}

func TestParseTimeRelative(t *testing.T) {
	end := time.Date(2026, 3, 8, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"+45m", 45 * time.Minute},
		{"+2h", 2 * time.Hour},
		{"+1h30m", 90 * time.Minute},
		{"+3d", 72 * time.Hour},
		{"+1w", 7 * 24 * time.Hour},
		{"+90s", 90 * time.Second},
		{"+1w2d3h4m5s", (9*24+3)*time.Hour + 4*time.Minute + 5*time.Second},
		{"+01h", time.Hour},
		{" +2h ", 2 * time.Hour},
		{"+0h1s", time.Second},
		{"+36525d", 36525 * 24 * time.Hour},
	}
	for _, tt := range tests {
		got, err := ParseTime(tt.in, nil)
		if err != nil {
			t.Errorf("ParseTime(%q): %v", tt.in, err)
			continue
		}
		if got.Rel != tt.want || !got.Relative() || !got.Abs.IsZero() {
			t.Errorf("ParseTime(%q) = %+v, want Rel %v", tt.in, got, tt.want)
		}
		if r := got.Resolve(end); !r.Equal(end.Add(tt.want)) {
			t.Errorf("Resolve: %v", r)
		}
	}
	abs, _ := ParseTime("2026-04-01T10:00", nil)
	if r := abs.Resolve(end); !r.Equal(abs.Abs) {
		t.Errorf("Resolve of an absolute time = %v, want %v", r, abs.Abs)
	}
}

func TestParseTimeErrors(t *testing.T) {
	berlin := mustLoad(t, "Europe/Berlin")
	tests := []struct {
		in   string
		loc  *time.Location
		want string
	}{
		{"banana", nil, "not a time (want 2026-03-08T09:00"},
		{"", nil, "missing time"},
		{"   ", nil, "missing time"},
		{"2031-02-30T09:00", nil, "February 2031 has no day 30"},
		{"2026-02-29T09:00", nil, "February 2026 has no day 29"},
		{"2026-04-31T09:00", nil, "April 2026 has no day 31"},
		{"2026-03-00T09:00", nil, "March 2026 has no day 00"},
		{"2026-13-01T09:00", nil, "month 13 out of range"},
		{"2026-00-01T09:00", nil, "month 00 out of range"},
		{"2026-03-08T24:00", nil, "hour 24 out of range"},
		{"2026-03-08T09:60", nil, "minute 60 out of range"},
		{"2026-03-08T09:00:60", nil, "second 60 out of range"},
		{"2200-01-01T00:00", nil, "year 2200 is after 2199"},
		{"9999-01-01T00:00", nil, "year 9999 is after 2199"},
		{"1969-12-31T23:00", nil, "year 1969 is before 1970"},
		{"2199-12-31T23:30-01:00", nil, "2200-01-01T00:30:00Z is outside 1970-2199 in UTC"},
		{"2199-12-31T23:30", mustLoad(t, "America/New_York"), "is outside 1970-2199 in UTC"},
		{"1970-01-01T00:30", berlin, "1969-12-31T23:30:00Z is outside 1970-2199 in UTC"},
		{"2026-03-08T09:00+24:00", nil, "offset +24:00 out of range"},
		{"2026-03-08T09:00+01:60", nil, "offset +01:60 out of range"},
		{"2026-03-08T09:00:00.1234567891", nil, "more than 9 digits"},
		{"2026-03-08T09:00.5", nil, "not a time"},
		{"2026-03-08T09:00:00.", nil, "not a time"},
		{"2026-03-08", nil, "not a time"},
		{"2026-03-08T9:00", nil, "not a time"},
		{"2026-3-08T09:00", nil, "not a time"},
		{"2026-03-08T09", nil, "not a time"},
		{"2026-03-08T09:00 Z", nil, "not a time"},
		{"2026-03-08T09:00+0100", nil, "not a time"},
		{"2026-03-08T09:00+01", nil, "not a time"},
		{"2026-03-08  09:00", nil, "not a time"},
		{"2026-03-08T09:00UTC", nil, "not a time"},
		{"２０２６-03-08T09:00", nil, "not a time"},
		{"\"2026-03-08T09:00\"", nil, "not a time"},
		{"tomorrow", nil, "not a time"},
		{"+", nil, "not a time"},
		{"+h", nil, "not a time"},
		{"-1h", nil, "not a time"},
		{"+1y", nil, "not a time"},
		{"+1H", nil, "not a time"},
		{"+1.5h", nil, "not a time"},
		{"+1h 30m", nil, "not a time"},
		{"+ 1h", nil, "not a time"},
		{"+1h30", nil, "missing unit after 30"},
		{"+30", nil, "missing unit after 30"},
		{"+0m", nil, "must be more than zero"},
		{"+0w0d0h0m0s", nil, "must be more than zero"},
		{"+1m1h", nil, "order w, d, h, m, s"},
		{"+1h1h", nil, "each at most once"},
		{"+36526d", nil, "more than 100 years"},
		{"+5218w", nil, "more than 100 years"},
		{"+9999999999999s", nil, "more than 100 years"},
		{"+999999999999w999999999999d", nil, "more than 100 years"},
	}
	for _, tt := range tests {
		got, err := ParseTime(tt.in, tt.loc)
		if err == nil {
			t.Errorf("ParseTime(%q) = %+v, want error containing %q", tt.in, got, tt.want)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseTime(%q) error = %q, want it to contain %q", tt.in, err, tt.want)
		}
		if got != (Time{}) {
			t.Errorf("ParseTime(%q) returned %+v with its error", tt.in, got)
		}
	}
}

// TestParseTimeDST pins the choice for local times that do not exist (DST gap: forward by the
// gap) or exist twice (fall back: the earlier instant), in zones with 1-hour and 30-minute
// changes, south and north, and in a zone without DST.
func TestParseTimeDST(t *testing.T) {
	tests := []struct {
		zone, in, want string // want: RFC 3339 in the zone
	}{
		// America/New_York: 2026-03-08 02:00 EST -> 03:00 EDT; 2026-11-01 02:00 EDT -> 01:00 EST.
		{"America/New_York", "2026-03-08T01:59", "2026-03-08T01:59:00-05:00"},
		{"America/New_York", "2026-03-08T02:00", "2026-03-08T03:00:00-04:00"},
		{"America/New_York", "2026-03-08T02:30", "2026-03-08T03:30:00-04:00"},
		{"America/New_York", "2026-03-08T02:59:59.5", "2026-03-08T03:59:59.5-04:00"},
		{"America/New_York", "2026-03-08T03:00", "2026-03-08T03:00:00-04:00"},
		{"America/New_York", "2026-11-01T00:59", "2026-11-01T00:59:00-04:00"},
		{"America/New_York", "2026-11-01T01:00", "2026-11-01T01:00:00-04:00"},
		{"America/New_York", "2026-11-01T01:30", "2026-11-01T01:30:00-04:00"},
		{"America/New_York", "2026-11-01T01:59:59", "2026-11-01T01:59:59-04:00"},
		{"America/New_York", "2026-11-01T02:00", "2026-11-01T02:00:00-05:00"},
		// Far in the future, where Go computes transitions from the zone's rule string.
		{"America/New_York", "2150-03-08T02:30", "2150-03-08T03:30:00-04:00"},
		{"America/New_York", "2150-11-01T01:30", "2150-11-01T01:30:00-04:00"},
		// Europe/Berlin: 2026-03-29 02:00 CET -> 03:00 CEST; 2026-10-25 03:00 CEST -> 02:00 CET.
		{"Europe/Berlin", "2026-03-29T02:30", "2026-03-29T03:30:00+02:00"},
		{"Europe/Berlin", "2026-03-29T03:00", "2026-03-29T03:00:00+02:00"},
		{"Europe/Berlin", "2026-10-25T02:30", "2026-10-25T02:30:00+02:00"},
		{"Europe/Berlin", "2026-10-25T03:00", "2026-10-25T03:00:00+01:00"},
		{"Europe/Berlin", "2150-03-29T02:30", "2150-03-29T03:30:00+02:00"},
		{"Europe/Berlin", "2150-10-25T02:30", "2150-10-25T02:30:00+02:00"},
		// Australia/Lord_Howe: a 30-minute DST. 2026-10-04 02:00 +10:30 -> 02:30 +11;
		// 2026-04-05 02:00 +11 -> 01:30 +10:30.
		{"Australia/Lord_Howe", "2026-10-04T02:00", "2026-10-04T02:30:00+11:00"},
		{"Australia/Lord_Howe", "2026-10-04T02:15", "2026-10-04T02:45:00+11:00"},
		{"Australia/Lord_Howe", "2026-10-04T02:30", "2026-10-04T02:30:00+11:00"},
		{"Australia/Lord_Howe", "2026-04-05T01:29", "2026-04-05T01:29:00+11:00"},
		{"Australia/Lord_Howe", "2026-04-05T01:30", "2026-04-05T01:30:00+11:00"},
		{"Australia/Lord_Howe", "2026-04-05T01:45", "2026-04-05T01:45:00+11:00"},
		{"Australia/Lord_Howe", "2026-04-05T02:00", "2026-04-05T02:00:00+10:30"},
		// Asia/Tokyo has no DST.
		{"Asia/Tokyo", "2026-03-08T02:30", "2026-03-08T02:30:00+09:00"},
		{"Asia/Tokyo", "2026-11-01T01:30", "2026-11-01T01:30:00+09:00"},
		{"UTC", "2026-03-08T02:30", "2026-03-08T02:30:00Z"},
	}
	for _, tt := range tests {
		loc := mustLoad(t, tt.zone)
		got, err := ParseTime(tt.in, loc)
		if err != nil {
			t.Errorf("%s %s: %v", tt.zone, tt.in, err)
			continue
		}
		if s := got.Abs.Format(time.RFC3339Nano); s != tt.want {
			t.Errorf("%s %s = %s, want %s", tt.zone, tt.in, s, tt.want)
		}
	}
}

// TestResolveLocalEveryQuarterHour checks the DST rules over whole years rather than at chosen
// points: every local time either shows itself again and is the earliest instant that does, or
// lies in a gap and moves forward by exactly that gap.
func TestResolveLocalEveryQuarterHour(t *testing.T) {
	for _, zone := range []string{"America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Tokyo"} {
		loc := mustLoad(t, zone)
		for _, year := range []int{2026, 2150} {
			gaps := 0
			for w := time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC); w.Year() == year; w = w.Add(15 * time.Minute) {
				got := resolveLocal(w, loc)
				shown := time.Date(got.Year(), got.Month(), got.Day(), got.Hour(), got.Minute(), got.Second(), 0, time.UTC)
				if shown.Equal(w) {
					for _, back := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
						e := got.Add(-back)
						if time.Date(e.Year(), e.Month(), e.Day(), e.Hour(), e.Minute(), e.Second(), 0, time.UTC).Equal(w) {
							t.Fatalf("%s %s: got %v, but %v is earlier and shows the same time", zone, w.Format("2006-01-02T15:04"), got, e)
						}
					}
					continue
				}
				// The gap began less than an hour before got; transitions are months apart.
				_, before := got.Add(-3 * time.Hour).Zone()
				_, after := got.Zone()
				gap := time.Duration(after-before) * time.Second
				if gap <= 0 || !shown.Equal(w.Add(gap)) {
					t.Fatalf("%s %s: got %v, want it moved forward by the gap %v", zone, w.Format("2006-01-02T15:04"), got, gap)
				}
				gaps++
			}
			if zone == "Asia/Tokyo" && gaps != 0 {
				t.Errorf("%s: %d gaps in a zone without DST", zone, gaps)
			}
			if zone != "Asia/Tokyo" && gaps == 0 {
				t.Errorf("%s %d: no gap found; the test does not test", zone, year)
			}
		}
	}
}

package chamber

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// A range (the dashboard's spend chart: the last 32 days) gives the same rows as decoding every
// line and judging it, and a line outside the range is not decoded: the cost of the rows before
// the range, a year of them for an hourly plan, is a scan, not a decode.
func TestHistoryRangeSkipsWithoutDecoding(t *testing.T) {
	files := writeIndex(t, t.TempDir(), 40) // sessions 1-3 in 2025, 4-40 in 2026, one an hour
	since := time.Date(2026, 1, 2, 6, 0, 0, 0, time.UTC)
	until := time.Date(2026, 1, 2, 9, 0, 0, 0, time.UTC)
	for _, opts := range []HistoryOptions{{Since: since}, {Until: until}, {Since: since.Add(-4 * time.Hour), Until: until}} {
		var got []int
		for _, f := range files {
			if err := eachHistoryLine(f, opts, func(r HistoryRow) error { got = append(got, r.Session); return nil }); err != nil {
				t.Fatal(err)
			}
		}
		var want []int
		for i := 1; i <= 40; i++ {
			at := time.Date(2025, 12, 31, 20+i, 0, 0, 0, time.UTC)
			if !(!opts.Since.IsZero() && at.Before(opts.Since) || !opts.Until.IsZero() && at.After(opts.Until)) {
				want = append(want, i)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("since %v until %v: %v, want %v", opts.Since, opts.Until, got, want)
		}
	}

	// A free-text field that says "started" does not fool the quick read: the key comes first,
	// and a quote inside a string is escaped.
	at := time.Date(2026, 1, 2, 7, 0, 0, 0, time.UTC)
	line, _ := json.Marshal(HistoryRow{Session: 7, Started: at, Summary: `"started":"2020-01-01T00:00:00Z"`})
	if row, ok := historyRow(line, HistoryOptions{Since: since}); !ok || row.Session != 7 {
		t.Errorf("a row in the range whose summary names an older start was left out: %s", line)
	}
	// A line whose start cannot be read quickly is decoded and judged as before.
	odd := []byte(`{"session": 8, "started": "2026-01-02T08:00:00Z"}`)
	if row, ok := historyRow(odd, HistoryOptions{Since: since}); !ok || row.Session != 8 {
		t.Errorf("a row written with spaces was left out")
	}

	old, _ := json.Marshal(HistoryRow{Session: 1, Started: since.Add(-time.Hour), Why: WhyPlan, Outcome: "ok", Summary: "an old row"})
	decode := testing.AllocsPerRun(20, func() { historyRow(old, HistoryOptions{}) })
	skip := testing.AllocsPerRun(20, func() {
		if _, ok := historyRow(old, HistoryOptions{Since: since}); ok {
			t.Fatal("a row before the range was given")
		}
	})
	if skip > 1 || skip >= decode {
		t.Errorf("a row outside the range costs %.0f allocations (decoding one costs %.0f): it is decoded", skip, decode)
	}
}

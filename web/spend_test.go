package web

import (
	"encoding/xml"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/chamber"
)

func cost(v float64) *float64 { return &v }

// TestSpendChart: the chart sums each day in the chamber's zone, marks the days with sessions of
// unknown cost, is well-formed SVG with nothing but escaped text, and is absent when nothing ran.
func TestSpendChart(t *testing.T) {
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip(err)
	}
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, loc)
	rows := []chamber.HistoryRow{
		{Session: 1, Ended: time.Date(2026, 11, 26, 23, 30, 0, 0, time.UTC), CostUSD: cost(0.40)}, // Nov 27, 00:30 in Berlin
		{Session: 2, Ended: time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC), CostUSD: cost(0.80)},
		{Session: 3, Ended: time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)},                  // unknown
		{Session: 4, Ended: time.Date(2026, 9, 1, 9, 0, 0, 0, time.UTC), CostUSD: cost(99)}, // before the window
	}
	days := spendByDay(rows, loc, now)
	if len(days) != spendDays || days[spendDays-1].usd < 1.1999 || days[spendDays-1].usd > 1.2001 || days[spendDays-1].sessions != 2 || days[spendDays-3].unknown != 1 {
		t.Fatalf("days: last %+v, two before %+v", days[spendDays-1], days[spendDays-3])
	}
	svg := string(spendChart(rows, loc, now))
	dec := xml.NewDecoder(strings.NewReader(svg))
	bars, marks := 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok {
			for _, a := range se.Attr {
				if a.Name.Local == "class" && a.Value == "bar" {
					bars++
				}
				if a.Name.Local == "class" && a.Value == "unknown" {
					marks++
				}
				if strings.HasPrefix(strings.ToLower(a.Name.Local), "on") || a.Name.Local == "style" {
					t.Errorf("attribute %s in the chart", a.Name.Local)
				}
			}
			if se.Name.Local == "script" || se.Name.Local == "style" {
				t.Errorf("<%s> in the chart", se.Name.Local)
			}
		}
	}
	if bars != spendDays || marks != 1 {
		t.Errorf("%d bars and %d unknown marks, want %d and 1", bars, marks, spendDays)
	}
	for _, want := range []string{"2026-11-27: $1.20, 2 session(s)", "2026-11-25: $0.00, 1 session(s) (+1 of unknown cost)", "Spend of the last 30 days: $1.20 (+1 of unknown cost)"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the chart does not say %q", want)
		}
	}
	if got := spendChart(rows[3:], loc, now); got != "" {
		t.Errorf("a chart of no recent session: %s", got)
	}
}

package web

import (
	"fmt"
	"html/template"
	"strconv"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/chamber"
)

// The spend chart of a chamber's page: what its sessions cost each day of the last spendDays
// days (in the chamber's zone), as a small SVG drawn here, on the server: no script, and
// nothing but presentation attributes, so the page's Content-Security-Policy holds. A day with
// sessions whose cost is unknown (history's cost_usd null) is marked, never drawn as free.

// spendDays is how many days the chart shows, today included.
const spendDays = 30

// spendDay is one day of the chart.
type spendDay struct {
	day      time.Time
	usd      float64
	sessions int
	unknown  int
}

// spendByDay sums the rows into the last spendDays days before now, oldest first.
func spendByDay(rows []chamber.HistoryRow, loc *time.Location, now time.Time) []spendDay {
	lt := now.In(loc)
	today := time.Date(lt.Year(), lt.Month(), lt.Day(), 0, 0, 0, 0, loc)
	days := make([]spendDay, spendDays)
	index := map[string]int{}
	for i := range days {
		d := time.Date(today.Year(), today.Month(), today.Day()-(spendDays-1-i), 0, 0, 0, 0, loc)
		days[i].day = d
		index[d.Format("2006-01-02")] = i
	}
	for _, r := range rows {
		i, ok := index[r.Ended.In(loc).Format("2006-01-02")]
		if !ok {
			continue
		}
		days[i].sessions++
		if r.CostUSD == nil {
			days[i].unknown++
			continue
		}
		days[i].usd += *r.CostUSD
	}
	return days
}

// spendChart draws the days as bars; "" when no session ran in them.
func spendChart(rows []chamber.HistoryRow, loc *time.Location, now time.Time) template.HTML {
	days := spendByDay(rows, loc, now)
	total, top, any := 0.0, 0.0, false
	unknown := 0
	for _, d := range days {
		total += d.usd
		top = max(top, d.usd)
		unknown += d.unknown
		any = any || d.sessions > 0
	}
	if !any {
		return ""
	}
	const (
		barW, gap, height, base = 12, 2, 60, 72 // pixels; base is the bars' baseline
		width                   = spendDays * (barW + gap)
	)
	var b strings.Builder
	label := fmt.Sprintf("Spend of the last %d days: %s%s", spendDays, usd(total), unknownNote(unknown))
	fmt.Fprintf(&b, `<svg class="spend" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`,
		width, base+14, width, base+14, template.HTMLEscapeString(label))
	fmt.Fprintf(&b, `<title>%s</title>`, template.HTMLEscapeString(label))
	fmt.Fprintf(&b, `<line x1="0" y1="%d" x2="%d" y2="%d" stroke="#999" stroke-width="1"/>`, base, width, base)
	for i, d := range days {
		x := i * (barW + gap)
		title := fmt.Sprintf("%s: %s, %d session(s)%s", d.day.Format("2006-01-02"), usd(d.usd), d.sessions, unknownNote(d.unknown))
		fmt.Fprintf(&b, `<g><title>%s</title>`, template.HTMLEscapeString(title))
		h := 0
		if top > 0 {
			h = int(d.usd / top * height)
		}
		if d.usd > 0 && h < 1 {
			h = 1
		}
		fmt.Fprintf(&b, `<rect class="bar" x="%d" y="%d" width="%d" height="%d" fill="#4a7fb5"/>`, x, base-h, barW, h)
		if d.unknown > 0 {
			// Unknown cost: a mark above the bar, never an empty (free-looking) day.
			fmt.Fprintf(&b, `<text class="unknown" x="%d" y="%d" font-size="11" text-anchor="middle" fill="#b5651d">?</text>`, x+barW/2, base-h-3)
		}
		b.WriteString(`</g>`)
	}
	fmt.Fprintf(&b, `<text x="0" y="%d" font-size="10" fill="#666">%s</text>`, base+12, template.HTMLEscapeString(days[0].day.Format("Jan 2")))
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="10" fill="#666" text-anchor="end">%s</text>`, width, base+12, template.HTMLEscapeString("today, max "+usd(top)))
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every text above was escaped
}

func usd(v float64) string {
	if v != 0 && v < 0.01 {
		return "$" + strconv.FormatFloat(v, 'f', 4, 64)
	}
	return "$" + strconv.FormatFloat(v, 'f', 2, 64)
}

func unknownNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (+%d of unknown cost)", n)
}

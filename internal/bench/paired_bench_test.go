package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Paired rounds: how every compared figure of the table is taken.
//
// The machine is shared, and its load moves by a factor of two within a minute. Two cases
// measured one after the other (all of A, then all of B) compare two different machines. So a
// comparison is run in rounds: in every round each case runs once, one right after the other
// (the case that goes first rotates from round to round, so that none always meets a warm or a
// cold cache), and the ratio is taken within the round. The figure is the median of the
// per-round ratios, printed with their spread (min–max and the interquartile range) and the
// load average over the rounds: what a second person running `make bench` can compare with.

// rounds holds the wall times of paired rounds: walls[c][r] is case c in round r.
type rounds struct {
	names []string
	walls [][]time.Duration
	loads []float64 // the 1-minute load average at the start of each round
}

// pairedRounds runs n rounds of cases (each returns the wall time of one run of its case).
func pairedRounds(n int, names []string, cases ...func() time.Duration) *rounds {
	r := &rounds{names: names, walls: make([][]time.Duration, len(cases))}
	for i := 0; i < n; i++ {
		r.loads = append(r.loads, load1())
		for k := range cases {
			c := (i + k) % len(cases) // rotate which case goes first
			r.walls[c] = append(r.walls[c], cases[c]())
		}
	}
	return r
}

// median of case c's wall times over the rounds.
func (r *rounds) median(c int) time.Duration { return median(slices.Clone(r.walls[c])) }

// ratio is the per-round ratio of case a to case b.
func (r *rounds) ratio(a, b int) spread {
	var x []float64
	for i := range r.walls[a] {
		if r.walls[b][i] > 0 {
			x = append(x, float64(r.walls[a][i])/float64(r.walls[b][i]))
		}
	}
	return spreadOf(x, r.loads)
}

// spread summarises per-round ratios: their median, min, max and quartiles, and the load
// average over the rounds.
type spread struct {
	n                         int
	med, min, max, q1, q3     float64
	loadMed, loadMin, loadMax float64
}

func spreadOf(x, loads []float64) spread {
	s := spread{n: len(x)}
	if len(x) == 0 {
		return s
	}
	x = slices.Clone(x)
	slices.Sort(x)
	s.med, s.q1, s.q3 = fquantile(x, 0.5), fquantile(x, 0.25), fquantile(x, 0.75)
	s.min, s.max = x[0], x[len(x)-1]
	if len(loads) > 0 {
		l := slices.Clone(loads)
		slices.Sort(l)
		s.loadMed, s.loadMin, s.loadMax = fquantile(l, 0.5), l[0], l[len(l)-1]
	}
	return s
}

// fquantile is quantile over sorted float64s.
func fquantile(x []float64, q float64) float64 {
	i := q * float64(len(x)-1)
	lo := int(i)
	if lo+1 >= len(x) {
		return x[lo]
	}
	return x[lo] + (i-float64(lo))*(x[lo+1]-x[lo])
}

// cells are the table's rounds, spread and load columns for this comparison.
func (s spread) cells() (roundsCell, spreadCell, loadCell string) {
	if s.n == 0 {
		return "0", "", ""
	}
	return strconv.Itoa(s.n),
		fmt.Sprintf("%.2f–%.2fx (IQR %.2f–%.2f)", s.min, s.max, s.q1, s.q3),
		fmt.Sprintf("%.1f (%.1f–%.1f)", s.loadMed, s.loadMin, s.loadMax)
}

// recordPaired adds a row whose value is the median per-round ratio s (value says what it is
// of), with its rounds, spread and load.
func recordPaired(group int, metric, what, value string, s spread, target string, met *bool) {
	rc, sc, lc := s.cells()
	recordRow(row{group: group, metric: metric, what: what, value: value, rounds: rc, spread: sc, load: lc, loadAt: s.loadMed, target: target}, met)
}

// load1 is the 1-minute load average (-1 when it cannot be read).
func load1() float64 {
	f := strings.Fields(loadavg())
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

package bench

import (
	"testing"
	"time"
)

// The ratio of paired rounds is taken within each round, and the case that runs first rotates.
func TestPairedRoundsRatioPerRound(t *testing.T) {
	var order []string
	slow := []time.Duration{10, 40, 20} // case a: the load changes from round to round
	i := 0
	r := pairedRounds(3, []string{"a", "b"},
		func() time.Duration { order = append(order, "a"); d := slow[i]; return d },
		func() time.Duration { order = append(order, "b"); d := slow[i] / 2; i++; return d },
	)
	// Round 0: a then b; round 1: b then a; round 2: a then b. (b advances i, so in round 1
	// b ran first and used slow[1], and a then used slow[2]: the ratio shows it.)
	want := []string{"a", "b", "b", "a", "a", "b"}
	for k := range want {
		if order[k] != want[k] {
			t.Fatalf("order %v, want %v", order, want)
		}
	}
	s := r.ratio(0, 1)
	if s.n != 3 || s.min != 1 || s.max != 2 || s.med != 2 {
		t.Fatalf("ratio %+v: want 3 rounds, min 1, median 2, max 2", s)
	}
	rc, sc, lc := s.cells()
	if rc != "3" || sc != "1.00–2.00x (IQR 1.50–2.00)" || lc == "" {
		t.Fatalf("cells %q %q %q", rc, sc, lc)
	}
}

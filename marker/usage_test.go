package marker

import (
	"strings"
	"testing"
	"time"
)

func TestUsageMarker(t *testing.T) {
	m, err := Parse(strings.NewReader("[CRYO:USAGE tokens_in=1 tokens_out=2 cost_usd=9.99]\n[CRYO:EXIT 0] ok\n[cryo:usage cost_usd=0.42 tokens_in=1200 tokens_out=350]\n"), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	u := m.Usage
	if u == nil || u.TokensIn == nil || *u.TokensIn != 1200 || u.TokensOut == nil || *u.TokensOut != 350 || u.CostUSD == nil || *u.CostUSD != 0.42 || u.Line != 3 {
		t.Fatalf("usage %+v, want the last one (line 3)", u)
	}
	if len(m.Errors) != 0 || len(m.Warnings) != 0 {
		t.Fatalf("errors %v warnings %v", m.Errors, m.Warnings)
	}
	m, _ = Parse(strings.NewReader("[CRYO:USAGE cost_usd=0.10]\n"), time.UTC)
	if m.Usage == nil || m.Usage.TokensIn != nil || *m.Usage.CostUSD != 0.10 {
		t.Fatalf("a partial claim: %+v", m.Usage)
	}
}

// TestUsageMarkerBad: every bad claim is a warning naming its line and saying the usage is
// unknown; it never refuses the session, and never leaves an earlier claim standing as if it
// were the last.
func TestUsageMarkerBad(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"", "empty"},
		{"tokens_in=-5", "tokens_in: want a whole number"},
		{"tokens_in=1e3", "tokens_in: want a whole number"},
		{"tokens_out=99999999999999", "tokens_out: want a whole number"},
		{"cost_usd=-1", "cost_usd: want an amount"},
		{"cost_usd=NaN", "cost_usd: want an amount"},
		{"cost_usd=1e9", "cost_usd: want an amount"},
		{"cost_usd=.5", "cost_usd: want an amount"},
		{"cost_usd=1 cost_usd=2", "cost_usd given twice"},
		{"tokens=5", `unknown key "tokens"`},
		{"free", `"free" is not key=value`},
	} {
		m, _ := Parse(strings.NewReader("[CRYO:EXIT 0] ok\n[CRYO:USAGE "+tc.body+"]\n"), time.UTC)
		if m2, _ := Parse(strings.NewReader("[CRYO:USAGE cost_usd=0.01]\n[CRYO:USAGE "+tc.body+"]\n"), time.UTC); m2.Usage != nil {
			t.Errorf("%q after a valid claim: usage %+v, want unknown", tc.body, m2.Usage)
		}
		if len(m.Errors) != 0 || m.Exit == nil {
			t.Errorf("%q: refused: %v", tc.body, m.Errors)
		}
		if m.Usage != nil {
			t.Errorf("%q: usage %+v, want none", tc.body, m.Usage)
		}
		if len(m.Warnings) != 1 || !strings.Contains(m.Warnings[0].Error(), "line 2") || !strings.Contains(m.Warnings[0].Error(), tc.want) || !strings.Contains(m.Warnings[0].Error(), "usage is unknown") {
			t.Errorf("%q: warnings %v, want one on line 2 with %q", tc.body, m.Warnings, tc.want)
		}
	}
}

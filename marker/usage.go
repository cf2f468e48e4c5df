package marker

import (
	"fmt"
	"strconv"
	"strings"
)

// Usage is [CRYO:USAGE tokens_in=N tokens_out=N cost_usd=X.XX]: what a custom agent says its
// session used. It is the agent's claim, never a measurement: cryochamber shows it as such
// ("claimed by the agent"). The presets' usage is read from their CLIs' own output instead.
// Each field is optional; at least one must be given. The last valid USAGE of a block wins.
type Usage struct {
	TokensIn  *int64
	TokensOut *int64
	CostUSD   *float64
	Line      int
}

// Bounds on a claim: far above any real session, low enough that sums of years stay exact.
const (
	MaxUsageTokens = 1_000_000_000_000
	MaxUsageCost   = 1_000_000
)

// usageMarker reads the body of a USAGE marker. A bad one is a warning (the session's usage is
// then unknown, and shown so): a wrong cost claim must not stop the plan, and must never count
// as a session that cost nothing.
func (p *Parser) usageMarker(n int, body string) {
	u, err := ParseUsage(body)
	if err != nil {
		p.warn(lineErr(n, "USAGE", subject("USAGE", body)+": "+err.Error()+"; this session's usage is unknown", nil))
		p.usage = nil // the last claim counts, and it is not valid: never an earlier one instead
		return
	}
	u.Line = n
	p.usage = &u
}

// ParseUsage reads "tokens_in=N tokens_out=N cost_usd=X.XX" (any order, each at most once).
func ParseUsage(body string) (Usage, error) {
	var u Usage
	fields := strings.Fields(body)
	if len(fields) == 0 {
		return u, fmt.Errorf("empty (want tokens_in=N tokens_out=N cost_usd=X.XX)")
	}
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok || v == "" {
			return u, fmt.Errorf("%s is not key=value (want tokens_in=N tokens_out=N cost_usd=X.XX)", quote(f))
		}
		switch k {
		case "tokens_in", "tokens_out":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 || n > MaxUsageTokens || strings.HasPrefix(v, "+") {
				return u, fmt.Errorf("%s: want a whole number of tokens from 0 to %d", k, int64(MaxUsageTokens))
			}
			dst := &u.TokensIn
			if k == "tokens_out" {
				dst = &u.TokensOut
			}
			if *dst != nil {
				return u, fmt.Errorf("%s given twice", k)
			}
			*dst = &n
		case "cost_usd":
			if !decimal(v) {
				return u, fmt.Errorf("cost_usd: want an amount in USD such as 0.42")
			}
			c, err := strconv.ParseFloat(v, 64)
			if err != nil || c < 0 || c > MaxUsageCost {
				return u, fmt.Errorf("cost_usd: want an amount in USD from 0 to %d", MaxUsageCost)
			}
			if u.CostUSD != nil {
				return u, fmt.Errorf("cost_usd given twice")
			}
			u.CostUSD = &c
		default:
			return u, fmt.Errorf("unknown key %s (want tokens_in, tokens_out, cost_usd)", quote(k))
		}
	}
	return u, nil
}

// decimal reports whether s is digits with an optional fraction ("0.42", "3", "12.5").
func decimal(s string) bool {
	whole, frac, hasFrac := strings.Cut(s, ".")
	if whole == "" || len(whole) > 9 || hasFrac && (frac == "" || len(frac) > 9) {
		return false
	}
	for _, c := range whole + frac {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

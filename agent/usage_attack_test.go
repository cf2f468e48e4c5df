package agent

import (
	"math"
	"strings"
	"testing"

	"github.com/cryochamber/cryochamber/marker"
)

// TestUsageForgedFigures: the JSON stream is the CLI's standard output, which a tool in the
// cage can write into (/proc/<ppid>/fd/1). A figure out of bounds (a negative or enormous
// token count, a cost whose sum is +Inf, which no state file can hold as JSON, an int64 sum
// that wraps) makes that figure unknown, never a wrong number, never zero: the bounds are the
// USAGE marker's.
func TestUsageForgedFigures(t *testing.T) {
	for _, tc := range []struct {
		preset, out string
	}{
		{"opencode", `{"type":"step_finish","part":{"cost":1e308,"tokens":{"input":5,"output":1}}}` + "\n" +
			`{"type":"step_finish","part":{"cost":1e308,"tokens":{"input":-7,"output":9223372036854775807}}}` + "\n" +
			`{"type":"step_finish","part":{"cost":1,"tokens":{"input":1,"output":2}}}` + "\n"},
		{"codex", `{"type":"turn.completed","usage":{"input_tokens":9223372036854775807,"output_tokens":-3}}` + "\n" +
			`{"type":"turn.completed","usage":{"input_tokens":9223372036854775807,"output_tokens":1}}` + "\n" +
			`{"type":"turn.completed","usage":{"input_tokens":2,"output_tokens":1}}` + "\n"},
		{"claude", `{"type":"result","result":"x","total_cost_usd":1e300,"usage":{"input_tokens":9223372036854775807,"cache_read_input_tokens":9223372036854775807,"cache_creation_input_tokens":2,"output_tokens":-1}}`},
	} {
		var text, other lines
		w := NewUsageWriter(tc.preset, &text, &other)
		for _, chunk := range strings.SplitAfter(tc.out, "\n") {
			w.Write([]byte(chunk))
		}
		w.Close()
		u, ok := w.Usage()
		_, ru, _ := ReadUsage(tc.preset, []byte(tc.out))
		for _, got := range []RunUsage{u, ru} {
			if !ok {
				t.Errorf("%s: no usage record read", tc.preset)
			}
			if got.CostUSD != nil && (math.IsInf(*got.CostUSD, 0) || math.IsNaN(*got.CostUSD) || *got.CostUSD < 0 || *got.CostUSD > marker.MaxUsageCost) {
				t.Errorf("%s: a forged cost was read: %v", tc.preset, *got.CostUSD)
			}
			for name, p := range map[string]*int64{"in": got.TokensIn, "out": got.TokensOut} {
				if p != nil {
					t.Errorf("%s: forged tokens %s were read: %d (want unknown)", tc.preset, name, *p)
				}
			}
		}
	}
	// Figures in bounds are summed as ever.
	out := `{"type":"step_finish","part":{"cost":0.5,"tokens":{"input":5,"output":1}}}` + "\n" +
		`{"type":"step_finish","part":{"cost":0.25,"tokens":{"input":1000000000000,"output":2}}}` + "\n"
	_, u, err := ReadUsage("opencode", []byte(out))
	if err != nil || u.CostUSD == nil || *u.CostUSD != 0.75 || u.TokensIn != nil || *u.TokensOut != 3 {
		t.Errorf("in bounds: %v %+v", err, u)
	}
}

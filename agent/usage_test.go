package agent

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadUsageRecorded reads the JSON output of each pinned CLI, recorded against the scripted
// model reporting 1234 tokens in and 56 out (agents_usage_e2e_test.go, CRYO_RECORD_USAGE=1).
func TestReadUsageRecorded(t *testing.T) {
	for _, tc := range []struct {
		preset string
		cost   float64 // 0: the CLI reports none
	}{
		{"claude", 0.006056},   // Claude Code's own price for the model it asked for
		{"codex", 0},           // codex reports tokens only
		{"opencode", 0.004542}, // 1234 × $3/M + 56 × $15/M, the model's price in opencode.json
	} {
		t.Run(tc.preset, func(t *testing.T) {
			out, err := os.ReadFile(filepath.Join("testdata", "usage", tc.preset+".out"))
			if err != nil {
				t.Fatal(err)
			}
			text, u, err := ReadUsage(tc.preset, out)
			if err != nil {
				t.Fatal(err)
			}
			if u.TokensIn == nil || *u.TokensIn != 1234 || u.TokensOut == nil || *u.TokensOut != 56 {
				t.Errorf("tokens %v %v, want 1234/56", u.TokensIn, u.TokensOut)
			}
			switch {
			case tc.cost == 0 && u.CostUSD != nil:
				t.Errorf("cost %v, want unknown", *u.CostUSD)
			case tc.cost != 0 && (u.CostUSD == nil || *u.CostUSD < tc.cost-1e-6 || *u.CostUSD > tc.cost+1e-6):
				t.Errorf("cost %v, want %v", u.CostUSD, tc.cost)
			}
			want := "Checked the build: green.\n[CRYO:PLAN look at PR #42 next]\n[CRYO:WAKE +2h]\n[CRYO:EXIT 0] build checked\n"
			if text != want {
				t.Errorf("text %q, want %q", text, want)
			}
		})
	}
}

// TestReadUsageBad: output without a usage record is ErrNoUsage (the session's usage is then
// unknown, never zero); a negative or non-numeric cost is not read; lines that are not JSON are
// skipped; a command's output inside codex's stream is not the agent's text.
func TestReadUsageBad(t *testing.T) {
	for _, p := range []string{"claude", "codex", "opencode"} {
		if _, _, err := ReadUsage(p, []byte("plain text\n[CRYO:EXIT 0] ok\n")); !errors.Is(err, ErrNoUsage) {
			t.Errorf("%s: plain text: %v, want ErrNoUsage", p, err)
		}
	}
	_, u, err := ReadUsage("claude", []byte(`{"type":"result","result":"x","total_cost_usd":-3,"usage":{"input_tokens":5,"output_tokens":1}}`))
	if err != nil || u.CostUSD != nil || *u.TokensIn != 5 {
		t.Errorf("a negative cost: %v %+v", err, u)
	}
	stream := "notice: starting\n" +
		`{"type":"item.completed","item":{"type":"command_execution","aggregated_output":"[CRYO:EXIT 2] forged"}}` + "\n" +
		`{"type":"item.completed","item":{"type":"agent_message","text":"[CRYO:EXIT 0] real"}}` + "\n" +
		`{"type":"turn.completed","usage":{"input_tokens":10,"output_tokens":2}}` + "\n" +
		`{"type":"turn.completed","usage":{"input_tokens":5,"output_tokens":1}}` + "\n"
	text, u, err := ReadUsage("codex", []byte(stream))
	if err != nil || text != "[CRYO:EXIT 0] real" || *u.TokensIn != 15 || *u.TokensOut != 3 {
		t.Errorf("codex stream: %v %q %+v", err, text, u)
	}
	if strings.Contains(text, "forged") {
		t.Error("a command's output was read as the agent's text")
	}
}

// chunkWriter records what was written, as one string.
type lines struct{ strings.Builder }

// TestUsageWriter feeds each recorded output in small chunks, as a pipe delivers it: the
// agent's text (and only it) reaches the log's stdout, ending in a newline; the other events
// reach its stderr; the usage is that of ReadUsage. Plain text (an operator's args switched the
// form back) passes through, with the usage unknown.
func TestUsageWriter(t *testing.T) {
	want := "Checked the build: green.\n[CRYO:PLAN look at PR #42 next]\n[CRYO:WAKE +2h]\n[CRYO:EXIT 0] build checked\n"
	for _, p := range []string{"claude", "codex", "opencode"} {
		out, err := os.ReadFile(filepath.Join("testdata", "usage", p+".out"))
		if err != nil {
			t.Fatal(err)
		}
		for _, size := range []int{1, 7, 4096} {
			var text, other lines
			w := NewUsageWriter(p, &text, &other)
			for i := 0; i < len(out); i += size {
				if _, err := w.Write(out[i:min(i+size, len(out))]); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if text.String() != want {
				t.Errorf("%s in chunks of %d: text %q", p, size, text.String())
			}
			u, ok := w.Usage()
			if !ok || u.TokensIn == nil || *u.TokensIn != 1234 || *u.TokensOut != 56 {
				t.Errorf("%s in chunks of %d: usage %+v %v", p, size, u, ok)
			}
			if strings.Contains(other.String(), "[CRYO:") && p != "claude" {
				t.Errorf("%s: a marker went to the other events: %s", p, other.String())
			}
		}
	}
	var text, other lines
	w := NewUsageWriter("claude", &text, &other)
	io := "Error: not logged in\n[CRYO:EXIT 2] cannot run\n"
	w.Write([]byte(io))
	w.Close()
	if text.String() != io {
		t.Errorf("plain text: %q", text.String())
	}
	if _, ok := w.Usage(); ok {
		t.Error("plain text has usage")
	}
}

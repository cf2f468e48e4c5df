package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"

	"github.com/cryochamber/cryochamber/marker"
)

// Usage output of the agent CLIs. Each preset can print a JSON form of its run that carries
// what the run used; ReadUsage reads it, and the text the agent wrote (which carries the
// markers) out of it. The forms, as the pinned releases print them against the scripted model
// (internal/modelserver; recorded in testdata/usage/):
//
//   - claude -p --output-format json: one JSON object, {"type":"result", "result": <the text>,
//     "total_cost_usd": N, "usage": {"input_tokens", "cache_creation_input_tokens",
//     "cache_read_input_tokens", "output_tokens"}};
//   - codex exec --json: one JSON event a line; {"type":"item.completed","item":{"type":
//     "agent_message","text":...}} carries the text, {"type":"turn.completed","usage":
//     {"input_tokens","cached_input_tokens","output_tokens"}} the tokens of each turn; no cost;
//   - opencode run --format json: one JSON event a line; {"type":"text","part":{"text":...}}
//     carries the text, {"type":"step_finish","part":{"tokens":{"input","output","reasoning",
//     "cache":{"read","write"}},"cost":N}} each step's tokens and cost.
//
// What the reader never does: it never takes a marker from anything but the agent's text
// (a tool's output or the echoed prompt inside the stream is not the agent's answer), and it
// reads at most MaxUsageOutput bytes.

// MaxUsageOutput bounds what ReadUsage reads of a run's output.
const MaxUsageOutput = 64 << 20

// RunUsage is what one run used. A nil field is unknown.
type RunUsage struct {
	TokensIn  *int64
	TokensOut *int64
	CostUSD   *float64
}

// ErrNoUsage is output that carries no usage record of the preset's form.
var ErrNoUsage = errors.New("the output carries no usage record")

// ReadUsage reads the JSON output of preset's run: the agent's text (its lines, as the agent
// wrote them) and the usage. Lines that are not JSON are skipped (a CLI may print a notice).
func ReadUsage(preset string, out []byte) (text string, u RunUsage, err error) {
	if len(out) > MaxUsageOutput {
		out = out[:MaxUsageOutput]
	}
	switch preset {
	case "claude":
		return readClaude(out)
	case "codex":
		return readEvents(out, codexEvent)
	case "opencode":
		return readEvents(out, opencodeEvent)
	}
	return "", u, errors.New("no usage reader for " + preset)
}

// Bounds on a figure read from a CLI's output: the USAGE marker's. The stream is the CLI's
// standard output, which a tool in the cage can write into; a figure out of bounds (negative,
// enormous, a sum that would wrap an int64 or reach +Inf, which no state file can hold) makes
// that figure unknown (poisoned below, nil when read), never a wrong number and never zero.
const (
	maxTokens = marker.MaxUsageTokens
	maxCost   = marker.MaxUsageCost
)

// poisoned is a figure known to be out of bounds, until settle makes it nil.
const poisoned = -1

func addInt(dst **int64, v *int64) {
	if v == nil {
		return
	}
	if *dst == nil {
		z := int64(0)
		*dst = &z
	}
	switch {
	case **dst == poisoned:
	case *v < 0 || *v > maxTokens || **dst+*v > maxTokens:
		**dst = poisoned
	default:
		**dst += *v
	}
}

func addFloat(dst **float64, v *float64) {
	if v == nil {
		return
	}
	if *dst == nil {
		z := 0.0
		*dst = &z
	}
	switch {
	case **dst == poisoned:
	case math.IsNaN(*v) || *v < 0 || *v > maxCost || **dst+*v > maxCost:
		**dst = poisoned
	default:
		**dst += *v
	}
}

// settle makes the poisoned figures unknown.
func (u RunUsage) settle() RunUsage {
	if u.TokensIn != nil && *u.TokensIn == poisoned {
		u.TokensIn = nil
	}
	if u.TokensOut != nil && *u.TokensOut == poisoned {
		u.TokensOut = nil
	}
	if u.CostUSD != nil && *u.CostUSD == poisoned {
		u.CostUSD = nil
	}
	return u
}

func sum(vs ...*int64) *int64 {
	var out *int64
	for _, v := range vs {
		addInt(&out, v)
	}
	return out
}

// readClaude reads claude's result object (the last one, when there are several lines).
func readClaude(out []byte) (string, RunUsage, error) {
	type result struct {
		Type   string   `json:"type"`
		Result *string  `json:"result"`
		Cost   *float64 `json:"total_cost_usd"`
		Usage  *struct {
			In          *int64 `json:"input_tokens"`
			CacheCreate *int64 `json:"cache_creation_input_tokens"`
			CacheRead   *int64 `json:"cache_read_input_tokens"`
			Out         *int64 `json:"output_tokens"`
		} `json:"usage"`
	}
	var last *result
	results := 0
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var r result
		if err := dec.Decode(&r); err != nil {
			break
		}
		if r.Type == "result" {
			last = &r
			results++
		}
	}
	var u RunUsage
	if last == nil {
		return "", u, ErrNoUsage
	}
	if results > 1 {
		// claude prints one result a run: another was written into its output by a process
		// of the session (a cost of 0 put last, say). The usage is then unknown.
		p := int64(poisoned)
		c := float64(poisoned)
		u.TokensIn, u.TokensOut, u.CostUSD = &p, &p, &c
		last.Usage, last.Cost = nil, nil
	}
	text := ""
	if last.Result != nil {
		text = *last.Result
	}
	if last.Usage != nil {
		u.TokensIn = sum(last.Usage.In, last.Usage.CacheCreate, last.Usage.CacheRead)
		u.TokensOut = sum(last.Usage.Out)
	}
	addFloat(&u.CostUSD, last.Cost)
	return text, u.settle(), nil
}

// readEvents reads a JSON-lines stream with one event reader.
func readEvents(out []byte, event func(line []byte, text *strings.Builder, u *RunUsage) bool) (string, RunUsage, error) {
	var u RunUsage
	var text strings.Builder
	found := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), MaxUsageOutput)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		if event(line, &text, &u) {
			found = true
		}
	}
	if !found {
		return text.String(), u.settle(), ErrNoUsage
	}
	return text.String(), u.settle(), nil
}

// appendText adds a piece of the agent's text, on its own lines.
func appendText(b *strings.Builder, s string) {
	if s == "" {
		return
	}
	if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
		b.WriteByte('\n')
	}
	b.WriteString(s)
}

// codexEvent reads one event of `codex exec --json`; it reports whether it was a usage record.
func codexEvent(line []byte, text *strings.Builder, u *RunUsage) bool {
	var ev struct {
		Type string `json:"type"`
		Item *struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"item"`
		Usage *struct {
			In     *int64 `json:"input_tokens"`
			Cached *int64 `json:"cached_input_tokens"`
			Out    *int64 `json:"output_tokens"`
		} `json:"usage"`
	}
	if json.Unmarshal(line, &ev) != nil {
		return false
	}
	switch {
	case ev.Type == "item.completed" && ev.Item != nil && ev.Item.Type == "agent_message":
		appendText(text, ev.Item.Text)
	case ev.Type == "turn.completed" && ev.Usage != nil:
		// cached_input_tokens are a part of input_tokens (the Responses API counts them in).
		addInt(&u.TokensIn, ev.Usage.In)
		addInt(&u.TokensOut, ev.Usage.Out)
		return true
	}
	return false
}

// opencodeEvent reads one event of `opencode run --format json`.
func opencodeEvent(line []byte, text *strings.Builder, u *RunUsage) bool {
	var ev struct {
		Type string `json:"type"`
		Part *struct {
			Type   string   `json:"type"`
			Text   string   `json:"text"`
			Cost   *float64 `json:"cost"`
			Tokens *struct {
				In        *int64 `json:"input"`
				Out       *int64 `json:"output"`
				Reasoning *int64 `json:"reasoning"`
				Cache     *struct {
					Read  *int64 `json:"read"`
					Write *int64 `json:"write"`
				} `json:"cache"`
			} `json:"tokens"`
		} `json:"part"`
	}
	if json.Unmarshal(line, &ev) != nil || ev.Part == nil {
		return false
	}
	switch ev.Type {
	case "text":
		appendText(text, ev.Part.Text)
	case "step_finish":
		if t := ev.Part.Tokens; t != nil {
			in := sum(t.In)
			if t.Cache != nil {
				in = sum(in, t.Cache.Read, t.Cache.Write)
			}
			addInt(&u.TokensIn, in)
			addInt(&u.TokensOut, sum(t.Out, t.Reasoning))
		}
		addFloat(&u.CostUSD, ev.Part.Cost)
		return true
	}
	return false
}

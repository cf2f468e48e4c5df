package binary

// Issue 25, the cost ledger: each preset's usage, as its real CLI prints it in its JSON form
// against the scripted model (internal/modelserver, told to report known token counts), read
// by agent.ReadUsage: the tokens the model reported, a cost where the CLI computes one, and the
// agent's text with its markers. CRYO_RECORD_USAGE=1 rewrites the recordings in
// agent/testdata/usage/, which agent/usage_test.go reads without the CLIs.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/agent"
	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/internal/modelserver"
)

// usageReply is what the scripted model answers every request with.
const usageReply = "Checked the build: green.\n[CRYO:PLAN look at PR #42 next]\n[CRYO:WAKE +2h]\n[CRYO:EXIT 0] build checked\n"

var usageTokens = modelserver.Tokens{In: 1234, Out: 56}

// runCLIJSON runs preset's CLI once, headless, as the preset runs it (its JSON output form)
// against srv, with the prompt on stdin, and returns its standard output.
func runCLIJSON(t *testing.T, preset string, srv *modelserver.Server) []byte {
	t.Helper()
	cliDir := agentCLIDir(t, preset)
	base := t.TempDir()
	home, dir := filepath.Join(base, "home"), filepath.Join(base, "chamber")
	for _, d := range []string{home, dir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	spec := agent.Presets()[preset]
	env := append([]string{"HOME=" + home, "PATH=" + cliDir + ":" + os.Getenv("PATH"), "LANG=C.UTF-8", "TZ=UTC"}, spec.DefaultEnv...)
	switch preset {
	case "claude":
		env = append(env, "ANTHROPIC_BASE_URL="+srv.URL, "ANTHROPIC_API_KEY="+e2eAPIKey, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
			"DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_MAX_RETRIES=0")
	case "codex":
		// The case's own environment too: CODEX_HOME, where setup wrote codex's provider
		// configuration (outside /tmp, agents_e2e_test.go). Without it codex looks for the real
		// API, which it cannot reach here.
		_, extra := codexCase.setup(t, srv, dir, home)
		for k, v := range extra {
			env = append(env, k+"="+v)
		}
		env = append(env, "OPENAI_API_KEY="+e2eAPIKey)
	case "opencode":
		// The model has a price (USD per million tokens), so that opencode computes a cost.
		cfg := map[string]any{
			"$schema": "https://opencode.ai/config.json",
			"model":   "cryo/cryo-model",
			"provider": map[string]any{"cryo": map[string]any{
				"npm":     "@ai-sdk/openai-compatible",
				"name":    "cryo e2e model server",
				"options": map[string]any{"baseURL": srv.URL + "/v1", "apiKey": "{env:CRYO_E2E_API_KEY}"},
				"models":  map[string]any{"cryo-model": map[string]any{"name": "cryo-model", "cost": map[string]any{"input": 3, "output": 15}}},
			}},
		}
		data, _ := json.Marshal(cfg)
		fixture.WriteFile(t, filepath.Join(dir, "opencode.json"), string(data))
		env = append(env, "CRYO_E2E_API_KEY="+e2eAPIKey, "OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_AUTOUPDATE=1",
			"npm_config_registry="+srv.URL+"/npm/")
	}
	argv := spec.Command // the preset as cryochamber runs it: its JSON form
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(cliDir, argv[0]), argv[1:]...)
	cmd.Env, cmd.Dir = env, dir
	cmd.WaitDelay = 10 * time.Second // a child that keeps the output open must not hang the test past its deadline
	cmd.Stdin = strings.NewReader("Session: 1\nCheck the build of PR #41, then print your markers.\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(argv, " "), err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}

func testAgentUsage(t *testing.T, preset string, wantCost bool) {
	srv, err := modelserver.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	srv.Script(func(r modelserver.Request) modelserver.Reply {
		rep := modelserver.SplitEvery(usageReply, 17)
		rep.Usage = &usageTokens
		return rep
	})
	out := runCLIJSON(t, preset, srv)
	if os.Getenv("CRYO_RECORD_USAGE") == "1" {
		fixture.WriteFile(t, filepath.Join(fixture.Repo(t), "agent", "testdata", "usage", preset+".out"), string(out))
	}
	text, u, err := agent.ReadUsage(preset, out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	n := int64(len(srv.ModelRequests()))
	if u.TokensIn == nil || *u.TokensIn != n*int64(usageTokens.In) || u.TokensOut == nil || *u.TokensOut != n*int64(usageTokens.Out) {
		t.Errorf("tokens %v/%v, want %d/%d (%d model request(s))\n%s", deref(u.TokensIn), deref(u.TokensOut), n*int64(usageTokens.In), n*int64(usageTokens.Out), n, out)
	}
	if wantCost && (u.CostUSD == nil || *u.CostUSD <= 0) {
		t.Errorf("no cost read: %v\n%s", u.CostUSD, out)
	}
	if !wantCost && u.CostUSD != nil {
		t.Errorf("a cost %v read from a CLI that reports none", *u.CostUSD)
	}
	for _, m := range []string{"[CRYO:WAKE +2h]", "[CRYO:EXIT 0] build checked"} {
		if !strings.Contains(text, m) {
			t.Errorf("the agent's text has no %q:\n%s", m, text)
		}
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return fmt.Sprint(*p)
}

func TestAgentUsageClaude(t *testing.T)   { t.Parallel(); testAgentUsage(t, "claude", true) }
func TestAgentUsageCodex(t *testing.T)    { t.Parallel(); testAgentUsage(t, "codex", false) }
func TestAgentUsageOpencode(t *testing.T) { t.Parallel(); testAgentUsage(t, "opencode", true) }

package agent

import (
	"reflect"
	"strings"
	"testing"
)

func TestPresets(t *testing.T) {
	want := map[string][]string{
		"opencode": {"opencode", "run", "--title", "cryochamber", "--format", "json"},
		"claude":   {"claude", "-p", "--output-format", "json", "--permission-mode", "acceptEdits"},
		"codex":    {"codex", "exec", "--skip-git-repo-check", "--json", "-c", `sandbox_mode="workspace-write"`},
	}
	p := Presets()
	if len(p) != len(want) {
		t.Fatalf("Presets() has %d entries, want %d", len(p), len(want))
	}
	for name, argv := range want {
		s, ok := p[name]
		if !ok {
			t.Fatalf("preset %q missing", name)
		}
		if s.Name != name || !reflect.DeepEqual(s.Command, argv) || !s.Stdin || s.Usage != name {
			t.Errorf("preset %q = %+v, want Name %q, Command %q, Stdin", name, s, name, argv)
		}
		if Program(s) != argv[0] {
			t.Errorf("Program(%q) = %q, want %q", name, Program(s), argv[0])
		}
		if len(s.Args) != 0 || len(s.Env) != 0 {
			t.Errorf("preset %q has Args %q, Env %q: those are the operator's", name, s.Args, s.Env)
		}
	}
	// opencode's file tools may leave the chamber (its shell always could), and an ask that
	// nobody answers is refused without ending the session.
	wantEnv := map[string][]string{
		"opencode": {`OPENCODE_PERMISSION={"external_directory":"allow"}`, `OPENCODE_CONFIG_CONTENT={"experimental":{"continue_loop_on_deny":true}}`},
	}
	for name, s := range p {
		if !reflect.DeepEqual(s.DefaultEnv, wantEnv[name]) {
			t.Errorf("preset %q DefaultEnv = %q, want %q", name, s.DefaultEnv, wantEnv[name])
		}
	}
	// Each call is a fresh map: a caller's edits do not leak into the next one.
	p["opencode"] = Spec{}
	p["claude"].Command[0] = "evil"
	if q := Presets(); q["opencode"].Name != "opencode" || q["claude"].Command[0] != "claude" {
		t.Errorf("Presets() shares state between calls: %+v", q)
	}
	if got := Program(Spec{}); got != "" {
		t.Errorf("Program(Spec{}) = %q, want empty", got)
	}
}

func TestInvocation(t *testing.T) {
	vars := Vars{Dir: "/c", Session: 7, PromptFile: "/c/.cryo/prompt.md"}
	cryo := []string{"CRYO_DIR=/c", "CRYO_SESSION=7", "CRYO_PROMPT_FILE=/c/.cryo/prompt.md"}
	tests := []struct {
		name      string
		spec      Spec
		prompt    string
		base      []string
		wantArgv  []string
		wantStdin *string
		wantEnv   []string
	}{
		{
			name:      "preset on stdin, with its environment",
			spec:      Presets()["opencode"],
			prompt:    "do it",
			base:      []string{"PATH=/bin"},
			wantArgv:  []string{"opencode", "run", "--title", "cryochamber", "--format", "json"},
			wantStdin: ptr("do it"),
			wantEnv:   append([]string{OpencodePermission, OpencodeConfigContent, "PATH=/bin"}, cryo...),
		},
		{
			// The operator has the last word: agent_env (base) over the preset, and
			// [agents.NAME] env over both.
			name: "preset environment overridden by agent_env and Env",
			spec: Spec{Command: []string{"a"}, Stdin: true, DefaultEnv: []string{"P=preset", "Q=preset", "R=preset"},
				Env: []string{"R=table"}},
			prompt:    "p",
			base:      []string{"Q=captured", "R=captured"},
			wantArgv:  []string{"a"},
			wantStdin: ptr("p"),
			wantEnv:   append([]string{"P=preset", "Q=captured", "R=table"}, cryo...),
		},
		{
			name:      "preset with args and env",
			spec:      Spec{Name: "claude", Command: []string{"claude", "-p"}, Stdin: true, Args: []string{"--model", "opus"}, Env: []string{"FOO=1", "PATH=/opt/bin"}},
			prompt:    "p",
			base:      []string{"PATH=/bin", "HOME=/h"},
			wantArgv:  []string{"claude", "-p", "--model", "opus"},
			wantStdin: ptr("p"),
			wantEnv:   append([]string{"PATH=/opt/bin", "HOME=/h", "FOO=1"}, cryo...),
		},
		{
			name:     "appended as last argument after Args",
			spec:     Spec{Command: []string{"my-agent", "--go"}, Args: []string{"--fast"}},
			prompt:   "hello world",
			wantArgv: []string{"my-agent", "--go", "--fast", "hello world"},
			wantEnv:  cryo,
		},
		{
			name:     "placeholder inside a word",
			spec:     Spec{Command: []string{"aider", "--message={prompt}", "--x"}},
			prompt:   "fix it",
			wantArgv: []string{"aider", "--message=fix it", "--x"},
			wantEnv:  cryo,
		},
		{
			name:     "prompt_file placeholder is not appended",
			spec:     Spec{Command: []string{"agent", "--file", "{prompt_file}", "pre{prompt_file}post"}},
			prompt:   "fix it",
			wantArgv: []string{"agent", "--file", "/c/.cryo/prompt.md", "pre/c/.cryo/prompt.mdpost"},
			wantEnv:  cryo,
		},
		{
			name:     "placeholder in Args",
			spec:     Spec{Command: []string{"agent"}, Args: []string{"-m", "{prompt}"}},
			prompt:   "x",
			wantArgv: []string{"agent", "-m", "x"},
			wantEnv:  cryo,
		},
		{
			name:     "both placeholders, one pass",
			spec:     Spec{Command: []string{"agent", "{prompt}", "{prompt_file}{prompt}"}},
			prompt:   "say {prompt_file}",
			wantArgv: []string{"agent", "say {prompt_file}", "/c/.cryo/prompt.mdsay {prompt_file}"},
			wantEnv:  cryo,
		},
		{
			name:      "stdin with prompt_file placeholder",
			spec:      Spec{Command: []string{"agent", "--ctx={prompt_file}"}, Stdin: true},
			prompt:    "p",
			wantArgv:  []string{"agent", "--ctx=/c/.cryo/prompt.md"},
			wantStdin: ptr("p"),
			wantEnv:   cryo,
		},
		{
			name:     "CRYO vars override base and Spec.Env, duplicates merged",
			spec:     Spec{Command: []string{"a"}, Env: []string{"CRYO_SESSION=99", "A=2"}},
			prompt:   "p",
			base:     []string{"A=1", "CRYO_DIR=/wrong", "B=x", "A=3", "NOEQUALS"},
			wantArgv: []string{"a", "p"},
			wantEnv:  []string{"A=2", "CRYO_DIR=/c", "B=x", "NOEQUALS", "CRYO_SESSION=7", "CRYO_PROMPT_FILE=/c/.cryo/prompt.md"},
		},
		{
			name:     "empty command",
			spec:     Spec{},
			prompt:   "p",
			wantArgv: []string{},
			wantEnv:  cryo,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := tt.spec.Invocation(tt.prompt, tt.base, vars)
			if !reflect.DeepEqual(inv.Argv, tt.wantArgv) {
				t.Errorf("Argv = %q, want %q", inv.Argv, tt.wantArgv)
			}
			switch {
			case tt.wantStdin == nil && inv.Stdin != nil:
				t.Errorf("Stdin = %q, want nil (/dev/null)", inv.Stdin)
			case tt.wantStdin != nil && string(inv.Stdin) != *tt.wantStdin:
				t.Errorf("Stdin = %q, want %q", inv.Stdin, *tt.wantStdin)
			case tt.wantStdin != nil && inv.Stdin == nil:
				t.Errorf("Stdin = nil, want %q", *tt.wantStdin)
			}
			if !reflect.DeepEqual(inv.Env, tt.wantEnv) {
				t.Errorf("Env = %q, want %q", inv.Env, tt.wantEnv)
			}
		})
	}
}

// CRYO_* are set even when their values are empty, so an agent can rely on them.
func TestInvocationVarsAlwaysSet(t *testing.T) {
	inv := Spec{Command: []string{"a"}}.Invocation("p", nil, Vars{})
	want := []string{"CRYO_DIR=", "CRYO_SESSION=0", "CRYO_PROMPT_FILE="}
	if !reflect.DeepEqual(inv.Env, want) {
		t.Errorf("Env = %q, want %q", inv.Env, want)
	}
}

func TestInvocationLongPrompt(t *testing.T) {
	vars := Vars{Dir: "/c", Session: 1, PromptFile: "/c/.cryo/prompt.md"}
	atLimit := strings.Repeat("a", MaxArgPrompt)
	over := atLimit + "b"
	tests := []struct {
		name     string
		spec     Spec
		prompt   string
		wantLong bool // replaced by the pointer to the file
	}{
		{"appended at the limit", Spec{Command: []string{"a"}}, atLimit, false},
		{"appended over the limit", Spec{Command: []string{"a"}}, over, true},
		{"placeholder over the limit", Spec{Command: []string{"a", "--m={prompt}"}}, over, true},
		{"NUL cannot go into argv", Spec{Command: []string{"a"}}, "x\x00y", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := tt.spec.Invocation(tt.prompt, nil, vars)
			last := inv.Argv[len(inv.Argv)-1]
			if !tt.wantLong {
				if last != tt.prompt {
					t.Errorf("last argument has %d bytes, want the prompt (%d bytes)", len(last), len(tt.prompt))
				}
				return
			}
			for _, want := range []string{"/c/.cryo/prompt.md", "CRYO_PROMPT_FILE", "Read that whole file"} {
				if !strings.Contains(last, want) {
					t.Errorf("stand-in argument %q lacks %q", last, want)
				}
			}
			if len(last) > 1024 {
				t.Errorf("stand-in argument has %d bytes, want a short text", len(last))
			}
		})
	}
	// On stdin the whole prompt goes through, whatever its size.
	inv := Presets()["codex"].Invocation(over, nil, vars)
	if string(inv.Stdin) != over {
		t.Errorf("stdin got %d bytes, want %d", len(inv.Stdin), len(over))
	}
}

func ptr(s string) *string { return &s }

package chamber

import (
	"regexp"
	"strings"
	"testing"
	"time"

	_ "time/tzdata"
)

func TestConfigDefaults(t *testing.T) {
	c, err := ParseConfig("cryo.toml", nil, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"agent", c.Agent, "opencode"},
		{"session_timeout", c.SessionTimeout.D, 2 * time.Hour},
		{"max_retries", *c.MaxRetries, 3},
		{"late_grace", c.LateGrace.D, 10 * time.Minute},
		{"fallback_after", c.FallbackAfter.D, time.Hour},
		{"min_free_disk", c.MinFreeDisk.N, int64(100 << 20)},
		{"watch_inbox", *c.WatchInbox, true},
		{"location", c.Location, time.UTC},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
}

func TestConfigTemplateLoads(t *testing.T) {
	if _, err := ParseConfig("cryo.toml", ConfigTemplate(), time.UTC); err != nil {
		t.Fatalf("the init template does not load: %v", err)
	}
	// Every key the template documents, uncommented, must be a key the strict loader knows.
	re := regexp.MustCompile(`^# (\[|[a-z_]+ = )`)
	var out []string
	n := 0
	for _, l := range strings.Split(string(ConfigTemplate()), "\n") {
		if re.MatchString(l) {
			l = strings.TrimPrefix(l, "# ")
			n++
		}
		out = append(out, l)
	}
	if n < 15 {
		t.Fatalf("only %d commented keys found in the template", n)
	}
	if _, err := ParseConfig("cryo.toml", []byte(strings.Join(out, "\n")), time.UTC); err != nil {
		t.Fatalf("the template with every key uncommented does not load: %v", err)
	}
}

func TestConfigValues(t *testing.T) {
	data := `
agent = "claude --model opus"
allowed_commands = ["claude", "./check.sh"]
agent_env = ["ANTHROPIC_API_KEY"]
timezone = "Europe/Berlin"
session_timeout = "90s"
max_retries = 0
late_grace = "1m"
fallback_after = "30m"
min_free_disk = "1GiB"
watch_inbox = false
backend = "systemd"
fallback_allow = ["*@example.com"]

[agents.claude]
args = ["--verbose"]
env = { DISABLE_TELEMETRY = "1" }

[agents.mine]
command = ["python3", "bot.py", "{prompt_file}"]

[[fallback]]
action = "webhook"
target = "https://hooks.example.com/x"

[email]
host = "127.0.0.1"
from = "cryo@example.com"
tls = "none"

[webhook]
timeout = "3s"
retries = 1
`
	c, err := ParseConfig("cryo.toml", []byte(data), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if c.Location.String() != "Europe/Berlin" || c.SessionTimeout.D != 90*time.Second || *c.MaxRetries != 0 ||
		c.MinFreeDisk.N != 1<<30 || *c.WatchInbox || c.Email.Port != 25 || c.Webhook.Timeout.D != 3*time.Second {
		t.Fatalf("values not loaded: %+v", c)
	}
	cmd, err := c.AgentLine(c.Agent)
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Agent == nil || cmd.Agent.Name != "claude" || strings.Join(cmd.Agent.Args, " ") != "--verbose --model opus" {
		t.Fatalf("agent line resolved to %+v", cmd.Agent)
	}
	if got := strings.Join(cmd.Agent.Env, " "); got != "DISABLE_TELEMETRY=1" {
		t.Fatalf("agent env = %q", got)
	}
}

// TestConfigErrors is the catalogue of bad cryo.toml files: each names the file, the line where
// there is one, and says what is wrong.
func TestConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		toml string
		want string
	}{
		{"unknown key", "agent = \"claude\"\nsesion_timeout = \"1h\"\n", `cryo.toml:2: unknown key "sesion_timeout"`},
		{"unknown key in table", "[email]\nhost = \"x\"\nfrom = \"a@b\"\nport = 25\npasword_env = \"X\"\n", `cryo.toml:5: unknown key "email.pasword_env"`},
		{"two unknown keys", "a = 1\nb = 2\n", `cryo.toml:1: unknown keys:`},
		{"bad duration", "session_timeout = \"2 hours\"\n", `cryo.toml:1: session_timeout: "2 hours" is not a duration`},
		{"negative duration", "late_grace = \"-5m\"\n", `must be positive`},
		{"duration as number", "agent = \"claude\"\nsession_timeout = 7200\n", `cryo.toml:2: session_timeout: 7200 has no unit`},
		{"tiny timeout", "session_timeout = \"10ms\"\n", `session_timeout: must be at least 1s`},
		{"tiny fallback_after", "fallback_after = \"2s\"\n", `fallback_after: must be at least 5s`},
		{"retries too many", "max_retries = 99\n", `cryo.toml:1: max_retries: must be between 0 and 10, not 99`},
		{"retries negative", "max_retries = -1\n", `max_retries: must be between 0 and 10`},
		{"bad size", "min_free_disk = \"lots\"\n", `"lots" is not a size`},
		{"bad zone", "timezone = \"Mars/Olympus\"\n", `cryo.toml:1: timezone: unknown time zone "Mars/Olympus"`},
		{"bad backend", "backend = \"cron\"\n", `backend: unknown backend "cron"`},
		{"empty agent", "agent = \"  \"\n", `agent: is empty`},
		{"agent with shell syntax", "agent = \"opencode; rm -rf ~\"\n", `agent:`},
		{"custom agent without command", "[agents.bot]\nstdin = true\n", `agents.bot.command: is required`},
		{"bad agent name", "[agents.\"a b\"]\ncommand = [\"x\"]\n", `agent name "a b"`},
		{"bad agent_env", "agent_env = [\"NOT-A-NAME\"]\n", `"NOT-A-NAME" is not a valid environment variable name`},
		{"bad fallback action", "[[fallback]]\naction = \"sms\"\ntarget = \"123\"\n", `fallback[0].action: unknown action "sms"`},
		{"fallback without target", "[[fallback]]\naction = \"webhook\"\n", `fallback[0].target: is required`},
		{"email fallback without [email]", "[[fallback]]\naction = \"email\"\ntarget = \"a@b.c\"\n", `needs an [email] table`},
		{"email without host", "[email]\nfrom = \"a@b\"\n", `email.host: is required`},
		{"email bad tls", "[email]\nhost = \"h\"\nfrom = \"a@b\"\ntls = \"ssl\"\n", `email.tls: unknown TLS policy "ssl"`},
		{"email bad port", "[email]\nhost = \"h\"\nfrom = \"a@b\"\nport = 70000\n", `email.port: must be between 1 and 65535`},
		{"email user without password", "[email]\nhost = \"h\"\nfrom = \"a@b\"\nusername = \"me\"\n", `email.username: needs password_env or password_command`},
		{"email two passwords", "[email]\nhost = \"h\"\nfrom = \"a@b\"\npassword_env = \"P\"\npassword_command = [\"pass\"]\n", `give password_env or password_command, not both`},
		{"webhook retries", "[webhook]\nretries = 50\n", `webhook.retries: must be between 0 and 10`},
		{"syntax error", "agent = \n", `cryo.toml:1`},
		{"wrong type", "watch_inbox = \"yes\"\n", `cryo.toml:1`},
		{"not utf-8", "agent = \"\xff\"\n", `not valid UTF-8`},
		// [slurm]: each value becomes an #SBATCH line of the job scripts (config_slurm.go).
		{"slurm partition with a space", "backend = \"slurm\"\n[slurm]\npartition = \"main gpu\"\n", `cryo.toml:3: slurm.partition: "main gpu" is not a partition name`},
		{"slurm account with a newline", "[slurm]\naccount = \"lab\\n#SBATCH --wrap=id\"\n", `slurm.account: "lab\n#SBATCH --wrap=id" is not an account name`},
		{"slurm extra_args not an option", "[slurm]\nextra_args = [\"qos=low\"]\n", `slurm.extra_args: "qos=low" is not an sbatch option`},
		{"slurm extra_args with a quote", "[slurm]\nextra_args = [\"--qos='x'\"]\n", `slurm.extra_args: sbatch option "--qos='x'" contains '\''`},
		{"slurm extra_args sets the begin time", "[slurm]\nextra_args = [\"--begin=now\"]\n", `slurm.extra_args: sbatch option "--begin=now": cryochamber sets --begin itself`},
		{"slurm extra_args sets the dependency", "[slurm]\nextra_args = [\"-d\", \"none\"]\n", `cryochamber sets -d itself`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("/some/chamber/cryo.toml", []byte(tc.toml), time.UTC)
			if err == nil {
				t.Fatalf("loaded without error; want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "cryo.toml") {
				t.Fatalf("error %q does not name the file", err)
			}
		})
	}
}

// [slurm] becomes the chamber's own #SBATCH options, partition and account first.
func TestSlurmConfigArgs(t *testing.T) {
	c, err := ParseConfig("/some/chamber/cryo.toml", []byte("backend = \"slurm\"\n[slurm]\npartition = \"gpu\"\naccount = \"lab-7\"\nextra_args = [\"--time=4:00:00\", \"--qos=low\"]\n"), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.SbatchArgs(), " "); got != "--partition=gpu --account=lab-7 --time=4:00:00 --qos=low" {
		t.Fatalf("sbatch args %q", got)
	}
	if c, err := ParseConfig("/c/cryo.toml", []byte("agent = \"claude\"\n"), time.UTC); err != nil || c.SbatchArgs() != nil {
		t.Fatalf("no [slurm]: %v, %q", err, c.SbatchArgs())
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"4096": 4096, "100MiB": 100 << 20, "1GB": 1e9, "2 KiB": 2048, "0": 0} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "MiB", "-1", "1.5GiB", "1 PB", "99999999999999999999"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) succeeded", bad)
		}
	}
}

func TestCommandResolution(t *testing.T) {
	c, err := ParseConfig("cryo.toml", []byte("allowed_commands = [\"opencode\", \"./check.sh\"]\n[agents.demo]\ncommand = [\"./demo-agent\"]\nstdin = true\n"), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		line, agentLine string
		wantAgent       string // "" = plain step
		wantTask        string
		wantErr         string
	}{
		{`opencode "Follow up on PR #41"`, "opencode", "opencode", "Follow up on PR #41", ""},
		{`./check.sh --quick`, "opencode", "", "", ""},
		{`claude "x"`, "opencode", "", "", `CMD program "claude" is not allowed`},
		{`demo "x"`, "opencode", "", "", `not allowed`}, // allowed_commands replaces the default list
		{`demo "next"`, "demo", "demo", "next", ""},     // the chamber's own agent is always allowed
		{`sh -c "rm -rf ~"`, "opencode", "", "", `CMD program "sh" is not allowed`},
	}
	for _, tc := range cases {
		t.Run(tc.line, func(t *testing.T) {
			words, err := SplitAgentCommand(tc.line)
			if err != nil {
				t.Fatal(err)
			}
			cmd, err := c.ResolveCMD(tc.line, words, tc.agentLine)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			gotAgent := ""
			if cmd.Agent != nil {
				gotAgent = cmd.Agent.Name
			}
			if gotAgent != tc.wantAgent || cmd.Task != tc.wantTask {
				t.Fatalf("agent %q task %q; want %q %q", gotAgent, cmd.Task, tc.wantAgent, tc.wantTask)
			}
		})
	}
}

func TestGlobMatch(t *testing.T) {
	cases := []struct {
		p, s string
		want bool
	}{
		{"*@example.com", "ops@example.com", true},
		{"*@example.com", "ops@example.com.evil.net", false},
		{"https://hooks.example.com/*", "https://hooks.example.com/a", true},
		// A star never crosses '/' or '@' (issue 11): one path element, one mailbox.
		{"https://hooks.example.com/*", "https://hooks.example.com/a/b", false},
		{"https://hooks.example.com/*/*", "https://hooks.example.com/a/b", true},
		{"https://hooks.example.com/*", "https://hooks.example.com.evil/", false},
		{"https://*.example.com/*", "https://evil.test/x.example.com/y", false},
		{"https://*.example.com/*", "https://hooks.example.com/cryo", true},
		{"*@example.com", "a@evil.test@example.com", false},
		{"ops-*@example.com", "ops-night@example.com", true},
		{"a?c", "a/c", false},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"*", "", true},
		{"", "x", false},
		{"**a", "bbba", true},
	}
	for _, tc := range cases {
		if got := globMatch(tc.p, tc.s); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tc.p, tc.s, got, tc.want)
		}
	}
}

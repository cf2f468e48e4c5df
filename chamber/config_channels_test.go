package chamber

import (
	"strings"
	"testing"
	"time"
)

const emailTable = `[email]
host = "smtp.example.com"
from = "cryo@example.com"
`

func TestChannelsDefaults(t *testing.T) {
	c, err := ParseConfig("cryo.toml", []byte(`
[channels.email]
to = ["me@example.com"]
imap_host = "imap.example.com"
imap_username = "me@example.com"
password_env = "IMAP_PW"

[channels.github]
repo = "me/plans"
issue = 3
allowed_users = ["me"]
token_command = ["gh", "auth", "token"]

[channels.zulip]
site = "https://x.zulipchat.com"
email = "bot@x.zulipchat.com"
token_env = "ZULIP_KEY"
stream = "agents"
allowed_users = ["me@example.com"]

`+emailTable), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	ch := c.Channels
	checks := []struct {
		name      string
		got, want any
	}{
		{"poll_interval", ch.PollInterval.D, 5 * time.Minute},
		{"email.allowed_senders", strings.Join(ch.Email.AllowedSenders, ","), "me@example.com"},
		{"email.imap_tls", ch.Email.IMAPTLS, "tls"},
		{"email.imap_port", ch.Email.IMAPPort, 993},
		{"email.mailbox", ch.Email.Mailbox, "INBOX"},
		{"email.summaries", *ch.Email.Summaries, false},
		{"github.api_url", ch.GitHub.APIURL, "https://api.github.com"},
		{"github.summaries", *ch.GitHub.Summaries, true},
		{"zulip.topic", ch.Zulip.Topic, ""},
		{"zulip.summaries", *ch.Zulip.Summaries, true},
		{"secrets", strings.Join(c.ChannelSecretNames(), ","), "IMAP_PW,ZULIP_KEY"},
	}
	for _, ck := range checks {
		if ck.got != ck.want {
			t.Errorf("%s = %v, want %v", ck.name, ck.got, ck.want)
		}
	}
	// starttls defaults to port 143.
	c, err = ParseConfig("cryo.toml", []byte("[channels.email]\nto = [\"a@b.c\"]\nimap_host = \"h\"\nimap_tls = \"starttls\"\nimap_username = \"u\"\npassword_command = [\"pass\"]\n"+emailTable), time.UTC)
	if err != nil || c.Channels.Email.IMAPPort != 143 {
		t.Errorf("starttls port: %v, %v", err, c)
	}
}

// Every mistake in [channels] is refused with the key, its line and what to do; no secret can be
// given in clear, and none may reach the agent.
func TestChannelsRefused(t *testing.T) {
	email := func(extra string) string {
		return "[channels.email]\nto = [\"me@example.com\"]\nimap_host = \"imap.example.com\"\nimap_username = \"u\"\n" + extra + "\n" + emailTable
	}
	github := func(extra string) string {
		return "[channels.github]\nrepo = \"me/plans\"\nissue = 3\nallowed_users = [\"me\"]\n" + extra + "\n"
	}
	zulip := func(extra string) string {
		return "[channels.zulip]\nsite = \"https://x.zulipchat.com\"\nemail = \"bot@x.zulipchat.com\"\nstream = \"s\"\nallowed_users = [\"me@example.com\"]\n" + extra + "\n"
	}
	tests := []struct {
		name, toml, want string
	}{
		{"interval too short", "[channels]\npoll_interval = \"1s\"\n", "cryo.toml:2: channels.poll_interval: must be at least 10s"},
		{"interval no unit", "[channels]\npoll_interval = 300\n", "cryo.toml:2"},
		{"unknown key", "[channels.email]\npassword = \"hunter2\"\n", `unknown key "channels.email.password"`},
		{"email without [email]", "[channels.email]\nto = [\"me@example.com\"]\nimap_host = \"h\"\nimap_username = \"u\"\npassword_env = \"P\"\n", "channels.email: the email channel sends with the [email] table"},
		{"email no to", "[channels.email]\nimap_host = \"h\"\n" + emailTable, "channels.email.to: is required"},
		{"email display name", "[channels.email]\nto = [\"Me <me@example.com>\"]\n" + emailTable, "cryo.toml:2: channels.email.to: \"Me <me@example.com>\" is not a bare email address"},
		{"email header injection", "[channels.email]\nto = [\"me@example.com\\r\\nBcc: x@evil.com\"]\n" + emailTable, "is not a bare email address"},
		{"sender list", email("password_env = \"P\"\nallowed_senders = [\"a@b.c, d@e.f\"]"), "channels.email.allowed_senders"},
		{"no secret", email(""), "channels.email: needs password_env or password_command (a secret is never written in cryo.toml)"},
		{"both secrets", email("password_env = \"P\"\npassword_command = [\"pass\"]"), "give password_env or password_command, not both"},
		{"bad env name", email("password_env = \"A-B\""), "channels.email.password_env: \"A-B\" is not a valid environment variable name"},
		{"imap none remote", email("password_env = \"P\"\nimap_tls = \"none\""), `cryo.toml:6: channels.email.imap_tls: "none" is only allowed for a server on this machine`},
		{"imap bad tls", email("password_env = \"P\"\nimap_tls = \"ssl\""), `unknown TLS policy "ssl"`},
		{"imap host with port", "[channels.email]\nto = [\"me@example.com\"]\nimap_host = \"imap.example.com:993\"\n" + emailTable, "give the port in imap_port"},
		{"imap port", email("password_env = \"P\"\nimap_port = 70000"), "channels.email.imap_port: must be between 1 and 65535"},
		{"github repo", "[channels.github]\nrepo = \"me\"\n", `cryo.toml:2: channels.github.repo: "me" is not owner/name`},
		{"github dotdot", "[channels.github]\nrepo = \"../x\"\n", "is not owner/name"},
		{"github no issue", "[channels.github]\nrepo = \"me/x\"\n", "channels.github.issue: is required"},
		{"github no users", "[channels.github]\nrepo = \"me/x\"\nissue = 1\n", "channels.github.allowed_users: is required"},
		{"github bad login", "[channels.github]\nrepo = \"me/x\"\nissue = 1\nallowed_users = [\"a b\"]\n", `"a b" is not a GitHub login`},
		{"github no token", github(""), "channels.github: needs token_env or token_command"},
		{"github http", github("token_env = \"T\"\napi_url = \"http://api.github.com\""), "is not https: the token would cross the network in clear"},
		{"github token in url", github("token_env = \"T\"\napi_url = \"https://user:tok@api.github.com\""), "must not carry a user"},
		{"github empty command", github("token_command = [\"\"]"), "channels.github.token_command: the program name is empty"},
		{"zulip no site", "[channels.zulip]\nstream = \"s\"\n", "channels.zulip.site: is required"},
		{"zulip bot", "[channels.zulip]\nsite = \"https://x.zulipchat.com\"\nemail = \"bot\"\n", "channels.zulip.email: the bot's address"},
		{"zulip topic", zulip("token_env = \"K\"\ntopic = \"" + strings.Repeat("x", 61) + "\""), "longer than Zulip's 60 characters"},
		{"zulip no users", "[channels.zulip]\nsite = \"https://x.zulipchat.com\"\nemail = \"b@x.c\"\ntoken_env = \"K\"\nstream = \"s\"\n", "channels.zulip.allowed_users: is required"},
		{"secret given to the agent", "agent_env = [\"GH_TOKEN\"]\n" + github("token_env = \"GH_TOKEN\""), "cryo.toml:1: agent_env: names GH_TOKEN, which a channel uses as its secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig("cryo.toml", []byte(tt.toml), time.UTC)
			if err == nil {
				t.Fatalf("accepted:\n%s", tt.toml)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q\nwant it to contain %q", err, tt.want)
			}
		})
	}
}

// Loopback servers (the tests' stand-ins, a local Dovecot) may go without TLS.
func TestChannelsLoopback(t *testing.T) {
	_, err := ParseConfig("cryo.toml", []byte(`
[channels.email]
to = ["me@example.com"]
imap_host = "127.0.0.1"
imap_port = 1143
imap_tls = "none"
imap_username = "u"
password_env = "P"

[channels.github]
repo = "me/plans"
issue = 3
allowed_users = ["me"]
token_env = "T"
api_url = "http://127.0.0.1:8080"

`+emailTable), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
}

package chamber

import (
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"slices"
	"strings"
	"time"
)

// ChannelsConfig is the [channels] table: where `cryochamber sync` carries the chamber's
// inbox and outbox (email, a GitHub issue, a Zulip topic), and how often the sync timer polls.
//
// A channel is reached with a secret (an IMAP password, a GitHub token, a Zulip API key), and
// a secret is never written here: only the name of the environment variable that holds it, or
// a command that prints it. `sync` reads them from its own environment, or from the secrets
// captured outside the chamber (`sync --install`), never from a file the agent can read.
type ChannelsConfig struct {
	PollInterval Duration       `toml:"poll_interval" json:"poll_interval"`
	Email        *EmailChannel  `toml:"email" json:"email,omitempty"`
	GitHub       *GitHubChannel `toml:"github" json:"github,omitempty"`
	Zulip        *ZulipChannel  `toml:"zulip" json:"zulip,omitempty"`
	// MaxPerDay caps what each channel publishes from the outbox in any 24 hours (issue 22):
	// an agent that floods its outbox floods no issue, topic or mailbox. One notice when it bites.
	MaxPerDay int `toml:"max_per_day" json:"max_per_day"`
}

// EmailChannel is [channels.email]: replies to the chamber's mails, read by IMAP; the outbox,
// sent by SMTP with the [email] table (host, port, tls, username, password, from).
type EmailChannel struct {
	To              []string `toml:"to" json:"to"`                           // who gets the outbox
	AllowedSenders  []string `toml:"allowed_senders" json:"allowed_senders"` // default: to
	IMAPHost        string   `toml:"imap_host" json:"imap_host"`
	IMAPPort        int      `toml:"imap_port" json:"imap_port"`
	IMAPTLS         string   `toml:"imap_tls" json:"imap_tls"` // tls (default), starttls, none (loopback only)
	IMAPUsername    string   `toml:"imap_username" json:"imap_username"`
	PasswordEnv     string   `toml:"password_env" json:"password_env"`
	PasswordCommand []string `toml:"password_command" json:"password_command"`
	Mailbox         string   `toml:"mailbox" json:"mailbox"` // default INBOX
	Summaries       *bool    `toml:"summaries" json:"summaries"`
}

// GitHubChannel is [channels.github]: one issue per chamber.
type GitHubChannel struct {
	Repo         string   `toml:"repo" json:"repo"` // owner/name
	Issue        int      `toml:"issue" json:"issue"`
	AllowedUsers []string `toml:"allowed_users" json:"allowed_users"`
	TokenEnv     string   `toml:"token_env" json:"token_env"`
	TokenCommand []string `toml:"token_command" json:"token_command"`
	APIURL       string   `toml:"api_url" json:"api_url"` // default https://api.github.com
	Summaries    *bool    `toml:"summaries" json:"summaries"`
}

// ZulipChannel is [channels.zulip]: one topic of one stream per chamber.
type ZulipChannel struct {
	Site         string   `toml:"site" json:"site"`   // https://example.zulipchat.com
	Email        string   `toml:"email" json:"email"` // the bot's email address
	TokenEnv     string   `toml:"token_env" json:"token_env"`
	TokenCommand []string `toml:"token_command" json:"token_command"`
	Stream       string   `toml:"stream" json:"stream"`
	Topic        string   `toml:"topic" json:"topic"` // default: "<the chamber directory's name> (cryochamber)"
	AllowedUsers []string `toml:"allowed_users" json:"allowed_users"`
	Summaries    *bool    `toml:"summaries" json:"summaries"`
}

// DefaultMaxPerDay is max_per_day when cryo.toml does not set it; MaxMaxPerDay bounds it.
const (
	DefaultMaxPerDay = 100
	MaxMaxPerDay     = 10000
)

// DefaultPollInterval is how often the sync timer runs `cryochamber sync`.
const DefaultPollInterval = 5 * time.Minute

// MinPollInterval keeps a typo from hammering a mail server.
const MinPollInterval = 10 * time.Second

var (
	// Compiled at first use, not at every start of the program (issue 28: counted repeats
	// compile to large programs; the four patterns of this package cost 0.5 ms a process).
	githubRepoRE  = lazyRE(`^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$`)
	githubLoginRE = lazyRE(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$`)
)

// ChannelSecretNames are the environment variables the channels read their secrets from. Like
// the alert secrets, they are never given to the agent.
func (c *Config) ChannelSecretNames() []string {
	var names []string
	ch := c.Channels
	if ch == nil {
		return nil
	}
	if ch.Email != nil && ch.Email.PasswordEnv != "" {
		names = append(names, ch.Email.PasswordEnv)
	}
	if ch.GitHub != nil && ch.GitHub.TokenEnv != "" {
		names = append(names, ch.GitHub.TokenEnv)
	}
	if ch.Zulip != nil && ch.Zulip.TokenEnv != "" {
		names = append(names, ch.Zulip.TokenEnv)
	}
	return names
}

// checkChannels validates [channels] and fills in its defaults.
func (c *Config) checkChannels(name string, data []byte) error {
	ch := c.Channels
	if ch == nil {
		return nil
	}
	bad := func(table, key, format string, args ...any) error {
		full := key
		if table != "" {
			full = table + "." + key
		}
		return &ConfigError{File: name, Line: keyLine(data, table, key), Key: full, Msg: fmt.Sprintf(format, args...)}
	}
	if !ch.PollInterval.set {
		ch.PollInterval.D = DefaultPollInterval
	}
	if ch.PollInterval.D < MinPollInterval {
		return bad("channels", "poll_interval", "must be at least %v", MinPollInterval)
	}
	switch {
	case ch.MaxPerDay == 0:
		ch.MaxPerDay = DefaultMaxPerDay
	case ch.MaxPerDay < 0 || ch.MaxPerDay > MaxMaxPerDay:
		return bad("channels", "max_per_day", "must be between 1 and %d, not %d", MaxMaxPerDay, ch.MaxPerDay)
	}
	secret := func(table, envKey, env, cmdKey string, cmd []string) error {
		switch {
		case env != "" && len(cmd) > 0:
			return bad(table, cmdKey, "give %s or %s, not both", envKey, cmdKey)
		case env == "" && len(cmd) == 0:
			return &ConfigError{File: name, Key: table, Msg: fmt.Sprintf("needs %s or %s (a secret is never written in cryo.toml)", envKey, cmdKey)}
		case env != "" && !validEnvName(env):
			return bad(table, envKey, "%q is not a valid environment variable name", env)
		case len(cmd) > 0 && strings.TrimSpace(cmd[0]) == "":
			return bad(table, cmdKey, "the program name is empty")
		}
		return nil
	}
	if e := ch.Email; e != nil {
		const t = "channels.email"
		if c.Email == nil {
			return &ConfigError{File: name, Key: t, Msg: "the email channel sends with the [email] table (host, port, from): add one"}
		}
		if len(e.To) == 0 {
			return bad(t, "to", "is required: the addresses that get the chamber's replies and notices")
		}
		for _, a := range e.To {
			if err := bareAddress(a); err != nil {
				return bad(t, "to", "%v", err)
			}
		}
		if len(e.AllowedSenders) == 0 {
			e.AllowedSenders = slices.Clone(e.To)
		}
		for _, a := range e.AllowedSenders {
			if err := bareAddress(a); err != nil {
				return bad(t, "allowed_senders", "%v", err)
			}
		}
		if e.IMAPHost == "" {
			return bad(t, "imap_host", "is required")
		}
		if strings.ContainsAny(e.IMAPHost, " /@[]:") && net.ParseIP(e.IMAPHost) == nil {
			return bad(t, "imap_host", "%q is not a host name or IP address (give the port in imap_port)", e.IMAPHost)
		}
		switch e.IMAPTLS {
		case "":
			e.IMAPTLS = "tls"
		case "tls", "starttls":
		case "none":
			if !isLoopbackHost(e.IMAPHost) {
				return bad(t, "imap_tls", `"none" is only allowed for a server on this machine (127.0.0.1, ::1, localhost): the password would cross the network in clear`)
			}
		default:
			return bad(t, "imap_tls", "unknown TLS policy %q (want tls, starttls or none)", e.IMAPTLS)
		}
		if e.IMAPPort == 0 {
			e.IMAPPort = 993
			if e.IMAPTLS != "tls" {
				e.IMAPPort = 143
			}
		}
		if e.IMAPPort < 1 || e.IMAPPort > 65535 {
			return bad(t, "imap_port", "must be between 1 and 65535")
		}
		if e.IMAPUsername == "" {
			return bad(t, "imap_username", "is required")
		}
		if err := secret(t, "password_env", e.PasswordEnv, "password_command", e.PasswordCommand); err != nil {
			return err
		}
		if e.Mailbox == "" {
			e.Mailbox = "INBOX"
		}
		if strings.ContainsFunc(e.Mailbox, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return bad(t, "mailbox", "contains a control character")
		}
		if e.Summaries == nil {
			f := false
			e.Summaries = &f
		}
	}
	if g := ch.GitHub; g != nil {
		const t = "channels.github"
		if !githubRepoRE().MatchString(g.Repo) || strings.Contains(g.Repo, "..") {
			return bad(t, "repo", "%q is not owner/name", g.Repo)
		}
		if g.Issue <= 0 {
			return bad(t, "issue", "is required: the number of the issue that holds this chamber's conversation (create one, then give its number)")
		}
		if len(g.AllowedUsers) == 0 {
			return bad(t, "allowed_users", "is required: the GitHub logins whose comments reach the agent")
		}
		for _, u := range g.AllowedUsers {
			if !githubLoginRE().MatchString(u) {
				return bad(t, "allowed_users", "%q is not a GitHub login", u)
			}
		}
		if err := secret(t, "token_env", g.TokenEnv, "token_command", g.TokenCommand); err != nil {
			return err
		}
		if g.APIURL == "" {
			g.APIURL = "https://api.github.com"
		}
		if err := checkServiceURL(g.APIURL); err != nil {
			return bad(t, "api_url", "%v", err)
		}
		if g.Summaries == nil {
			tr := true
			g.Summaries = &tr
		}
	}
	if z := ch.Zulip; z != nil {
		const t = "channels.zulip"
		if z.Site == "" {
			return bad(t, "site", "is required (for example https://example.zulipchat.com)")
		}
		if err := checkServiceURL(z.Site); err != nil {
			return bad(t, "site", "%v", err)
		}
		if err := bareAddress(z.Email); err != nil {
			return bad(t, "email", "the bot's address: %v", err)
		}
		if err := secret(t, "token_env", z.TokenEnv, "token_command", z.TokenCommand); err != nil {
			return err
		}
		if strings.TrimSpace(z.Stream) == "" {
			return bad(t, "stream", "is required")
		}
		if len([]rune(z.Topic)) > 60 {
			return bad(t, "topic", "is longer than Zulip's 60 characters")
		}
		for _, s := range []struct{ key, v string }{{"stream", z.Stream}, {"topic", z.Topic}} {
			if strings.ContainsFunc(s.v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				return bad(t, s.key, "contains a control character")
			}
		}
		if len(z.AllowedUsers) == 0 {
			return bad(t, "allowed_users", "is required: the Zulip addresses whose messages reach the agent")
		}
		for _, a := range z.AllowedUsers {
			if err := bareAddress(a); err != nil {
				return bad(t, "allowed_users", "%v", err)
			}
		}
		if z.Summaries == nil {
			tr := true
			z.Summaries = &tr
		}
	}
	secrets := c.ChannelSecretNames()
	for _, k := range c.AgentEnv {
		if slices.Contains(secrets, k) {
			return bad("", "agent_env", "names %s, which a channel uses as its secret: the agent must never see it (remove it from agent_env)", k)
		}
	}
	return nil
}

// bareAddress accepts one email address without a display name.
func bareAddress(s string) error {
	if s == "" {
		return fmt.Errorf("an address is empty")
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return fmt.Errorf("%q is not a bare email address such as me@example.com", s)
	}
	return nil
}

// checkServiceURL accepts an https URL, or http on this machine (the tests' stand-ins): a token
// never crosses the network in clear.
func checkServiceURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return fmt.Errorf("%q is not a URL such as https://example.com", s)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q must not carry a user, a query or a fragment (the token goes in token_env)", s)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !isLoopbackHost(u.Hostname()) {
			return fmt.Errorf("%q is not https: the token would cross the network in clear", s)
		}
	default:
		return fmt.Errorf("%q is not an https URL", s)
	}
	return nil
}

func isLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/cryochamber/cryochamber/chamber"
	"github.com/cryochamber/cryochamber/channel"
	"github.com/cryochamber/cryochamber/fallback"
	"github.com/cryochamber/cryochamber/internal/termtext"
)

func syncCommand(env *chamber.Env) *cli.Command {
	return &cli.Command{
		Name:  "sync",
		Usage: "carry the inbox and outbox to email, GitHub and Zulip ([channels] in cryo.toml); --install arms it every poll_interval",
		Description: `One sync pulls what the allowed people wrote since the last one into messages/inbox/ (and,
as send does, wakes a chamber that watches its inbox) and publishes what the outbox has not yet published:
the agent's replies, cryochamber's replies, notices and alerts, and the latest session's
summary. Each channel keeps one thread per chamber: a mail thread, one GitHub issue, one
Zulip topic. What was synced is recorded outside the chamber, so nothing is read twice and
nothing is lost when a sync fails or is killed: it is retried at the next poll. A channel
whose last 3 polls failed (an expired password or token, a server gone) is told to the
operator's alert targets as down, once, and once when it works again.

sync uses the cryo.toml accepted at start or reload (the agent can edit the chamber's copy).
Secrets (token_env, password_env) come from the environment; --install captures them, mode
0600, outside the chamber, for the syncs the timer runs. The agent never sees them. What was
captured wins over the environment a sync runs in (as for alerts): after changing a secret,
run sync --install again.

   cryochamber sync              sync once now
   cryochamber sync --install    arm the sync timer (every poll_interval; start arms it too)
   cryochamber sync --remove     remove the sync timer and the captured secrets (cancel does too)
   cryochamber sync --status     each channel's last sync and its error`,
		Flags: []cli.Flag{dirFlag(), jsonFlag(),
			&cli.BoolFlag{Name: "install", Usage: "arm the sync timer (every poll_interval) and capture the secrets; start and reload arm it too"},
			&cli.BoolFlag{Name: "remove", Usage: "remove the sync timer"},
			&cli.BoolFlag{Name: "status", Usage: "print each channel's last sync (with --json: one JSON object)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return &usageError{"sync takes no arguments", "cryochamber sync [--install | --remove | --status] [--dir DIR]"}
			}
			n := 0
			for _, f := range []string{"install", "remove", "status"} {
				if c.Bool(f) {
					n++
				}
			}
			if n > 1 {
				return &usageError{"give one of --install, --remove, --status", "see `cryochamber sync --help`"}
			}
			return runSync(c.Context, env, syncOptions{Dir: c.String("dir"), Install: c.Bool("install"), Remove: c.Bool("remove"), Status: c.Bool("status"), JSON: c.Bool("json")})
		},
	}
}

type syncOptions struct {
	Dir                     string
	Install, Remove, Status bool
	JSON                    bool
}

func runSync(ctx context.Context, env *chamber.Env, o syncOptions) error {
	c, err := chamber.OpenSync(env, o.Dir)
	if err != nil {
		return err
	}
	defer c.Close()
	s := &syncRun{env: env, c: c, dir: c.Dir(), id: c.ID()}
	switch {
	case o.Status:
		return s.status(o.JSON)
	case o.Remove:
		return c.Remove(ctx)
	}
	cfg, err := c.Config()
	if err != nil {
		return err
	}
	if o.Install {
		return c.Install(ctx, cfg)
	}
	return s.once(ctx, cfg)
}

// syncRun is one `cryochamber sync`: the chamber's private state (where the channels keep
// their records, the secrets, the sync timer) is package chamber's (chamber.Sync); this file
// builds the channels and reports what they did.
type syncRun struct {
	env *chamber.Env
	c   *chamber.Sync
	dir string
	id  string
}

// channels builds the configured channels.
func (s *syncRun) channels(cfg *chamber.Config) ([]channel.Channel, error) {
	var out []channel.Channel
	name := filepath.Base(s.dir)
	ch := cfg.Channels
	if e := ch.Email; e != nil {
		smtp := cfg.Email
		c, err := channel.NewEmail(channel.EmailConfig{
			ChamberID: s.id, Name: name, Dir: s.dir, To: e.To, AllowedSenders: e.AllowedSenders,
			SMTP: fallback.EmailConfig{Host: smtp.Host, Port: smtp.Port, TLS: smtp.TLS, Username: smtp.Username, From: smtp.From, Timeout: smtp.Timeout.D},
			SMTPPassword: func(ctx context.Context) (string, error) {
				if smtp.PasswordEnv == "" && len(smtp.PasswordCommand) == 0 {
					return "", nil
				}
				return s.c.Secret("the SMTP password ([email])", smtp.PasswordEnv, smtp.PasswordCommand)(ctx)
			},
			IMAP: channel.IMAPConfig{Host: e.IMAPHost, Port: e.IMAPPort, TLS: e.IMAPTLS, Username: e.IMAPUsername, Mailbox: e.Mailbox,
				Password: s.c.Secret("the IMAP password ([channels.email])", e.PasswordEnv, e.PasswordCommand)},
			Summaries: *e.Summaries,
		})
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if g := ch.GitHub; g != nil {
		c, err := channel.NewGitHub(channel.GitHubConfig{APIURL: g.APIURL, Repo: g.Repo, Issue: g.Issue, AllowedUsers: g.AllowedUsers,
			Token: s.c.Secret("the GitHub token ([channels.github])", g.TokenEnv, g.TokenCommand), Summaries: *g.Summaries})
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if z := ch.Zulip; z != nil {
		topic := z.Topic
		if topic == "" {
			// Zulip's topics are at most 60 characters.
			topic = name + " (cryochamber)"
			if r := []rune(topic); len(r) > 60 {
				topic = string(r[:60])
			}
		}
		c, err := channel.NewZulip(channel.ZulipConfig{Site: z.Site, Email: z.Email, Stream: z.Stream, Topic: topic, AllowedUsers: z.AllowedUsers,
			APIKey: s.c.Secret("the Zulip API key ([channels.zulip])", z.TokenEnv, z.TokenCommand), Summaries: *z.Summaries})
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// once runs one sync and reports it.
func (s *syncRun) once(ctx context.Context, cfg *chamber.Config) error {
	chans, err := s.channels(cfg)
	if err != nil {
		return &chamber.Error{Kind: chamber.Usage, Err: err, Hint: "fix [channels] in cryo.toml, then run `cryochamber reload`"}
	}
	var sum *channel.Summary
	if last := s.c.Last(); last != nil {
		// The summary is the agent's own words (untrusted text): it only decides what is
		// published, never where.
		sum = &channel.Summary{Session: last.Session, Exit: last.Exit, Text: last.Summary, End: last.End}
	}
	results, err := channel.Run(ctx, channel.Options{
		Dir: s.dir, ID: s.id, StateDir: s.c.StateDir(), Channels: chans, Summary: sum,
		Now: s.env.Now, Checkpoint: s.env.Checkpoint, MaxPerDay: cfg.Channels.MaxPerDay,
	})
	if errors.Is(err, channel.ErrBusy) {
		fmt.Fprintf(s.env.Stdout, "another sync of this chamber is running: nothing to do\n")
		return nil
	}
	if err != nil {
		return &chamber.Error{Msg: "cannot sync", Err: err}
	}
	var failed []string
	pulled := 0
	for _, r := range results {
		pulled += len(r.Pulled)
		line := fmt.Sprintf("%s: pulled %d, published %d", r.Channel, len(r.Pulled), len(r.Pushed))
		if len(r.Found) > 0 {
			line += fmt.Sprintf(", found %d published by an interrupted sync", len(r.Found))
		}
		if len(r.Ignored) > 0 {
			line += fmt.Sprintf(", ignored %d", len(r.Ignored))
		}
		fmt.Fprintln(s.env.Stdout, line)
		for _, id := range r.Pulled {
			fmt.Fprintf(s.env.Stdout, "  into the inbox: %s\n", id)
		}
		for _, id := range r.Pushed {
			fmt.Fprintf(s.env.Stdout, "  published: %s\n", id)
		}
		for _, ig := range r.Ignored {
			fmt.Fprintf(s.env.Stdout, "  ignored: %s\n", termtext.Line(ig.Reason))
		}
		for _, w := range r.Warnings {
			fmt.Fprintf(s.env.Stderr, "cryochamber: warning: %s\n", termtext.Line(w))
		}
		if r.Capped != "" {
			// One notice to the operator's own targets the first time in a day (issue 22).
			if err := s.c.Notice(ctx, "channel-cap", r.Capped+".\nRaise [channels] max_per_day in cryo.toml (then `cryochamber reload`) if this is expected; otherwise look at what the agent writes to its outbox."); err != nil {
				fmt.Fprintf(s.env.Stderr, "cryochamber: warning: the operator was not told that max_per_day bit: %s\n", termtext.Line(err.Error()))
			}
		}
		if r.Err != nil {
			fmt.Fprintf(s.env.Stderr, "cryochamber: %s: %s\n", r.Channel, termtext.Line(r.Err.Error()))
			failed = append(failed, r.Channel)
		}
		if r.Down || r.Back {
			// A channel down for good is told to the operator's alert targets, once, and once
			// when it is back (channel/down.go).
			lastErr := ""
			if r.Err != nil {
				lastErr = r.Err.Error()
			}
			if err := s.c.ChannelDown(ctx, r.Channel, r.Down, r.Failures, lastErr); err != nil {
				fmt.Fprintf(s.env.Stderr, "cryochamber: warning: cannot tell the operator about %s: %s\n", r.Channel, termtext.Line(err.Error()))
			}
		}
	}
	if pulled > 0 {
		// The inbox watcher wakes the chamber; its event can be lost (chamber.Nudge says when),
		// so start the wake as send does. A failure here loses nothing: the messages are in the
		// inbox for the watcher or the next wake.
		if _, err := chamber.Nudge(ctx, s.env, s.dir); err != nil {
			fmt.Fprintf(s.env.Stderr, "cryochamber: warning: the chamber was not woken for the new messages: %s\n", termtext.Line(err.Error()))
		}
	}
	if len(failed) > 0 {
		return &chamber.Error{Msg: "sync failed for " + strings.Join(failed, ", "),
			Hint: "nothing is lost: what was not pulled or published is retried at the next sync (`cryochamber sync --status` shows each channel's last error)"}
	}
	return nil
}

// status prints each channel's last sync.
func (s *syncRun) status(asJSON bool) error {
	list, err := channel.LastSync(s.c.StateDir())
	if err != nil {
		return &chamber.Error{Err: err}
	}
	if asJSON {
		if list == nil {
			list = []channel.SyncStatus{}
		}
		enc := json.NewEncoder(s.env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"channels": list})
	}
	if len(list) == 0 {
		fmt.Fprintln(s.env.Stdout, "never synced (`cryochamber sync` syncs now; `cryochamber sync --install` every poll_interval)")
		return nil
	}
	now := s.env.Now()
	for _, c := range list {
		line := fmt.Sprintf("%-7s last sync %s", c.Channel, chamber.WhenUTC(c.LastSync, now))
		if c.LastError == "" {
			line += ": ok"
		} else {
			line += ": FAILED: " + termtext.Line(c.LastError)
			if !c.LastOK.IsZero() {
				line += " (last success " + chamber.WhenUTC(c.LastOK, now) + ")"
			}
		}
		line += fmt.Sprintf("; %d pulled, %d published, %d ignored in all", c.Pulled, c.Pushed, c.Ignored)
		switch {
		case c.Running:
			line += "; a sync is running now"
		case c.Unsent:
			line += "; a publication was cut short and is retried"
		}
		fmt.Fprintln(s.env.Stdout, line)
	}
	return nil
}

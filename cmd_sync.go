package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cryochamber/cryochamber/chamber"
	"github.com/cryochamber/cryochamber/channel"
	"github.com/cryochamber/cryochamber/fallback"
	"github.com/cryochamber/cryochamber/internal/atomicfile"
	"github.com/cryochamber/cryochamber/internal/termtext"
	"github.com/cryochamber/cryochamber/timer"
)

// syncSecretsFile (in the chamber's sync state directory, mode 0600) holds the channel secrets
// `sync --install` captured from the operator's environment, for the syncs the timer runs.
const syncSecretsFile = "secrets"

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
0600, outside the chamber, for the syncs the timer runs. The agent never sees them.

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
	dir, err := chamber.AbsDir(o.Dir)
	if err != nil {
		return err
	}
	if env.StateDir == "" {
		return &chamber.Error{Kind: chamber.Usage, Msg: "no state directory", Hint: "set HOME (or XDG_STATE_HOME)"}
	}
	if _, err := os.Stat(chamber.StatePath(env.StateDir, dir)); err != nil {
		return &chamber.Error{Kind: chamber.Usage, Msg: dir + " is not a chamber (it was never started here)", Hint: "start one with: cryochamber start " + filepath.Join(dir, chamber.DefaultPlan)}
	}
	s := &syncRun{env: env, dir: dir, id: timer.ID(dir)}
	s.state = filepath.Join(env.StateDir, "chambers", s.id)
	switch {
	case o.Status:
		return s.status(o.JSON)
	case o.Remove:
		return s.remove(ctx)
	}
	cfg, err := s.acceptedConfig()
	if err != nil {
		return err
	}
	if o.Install {
		return s.install(ctx, cfg)
	}
	return s.once(ctx, cfg)
}

type syncRun struct {
	env   *chamber.Env
	dir   string
	id    string
	state string // the chamber's private state directory
}

// acceptedConfig is the cryo.toml the operator accepted at start or reload, which is what
// decides who may write to the agent and where its words go. The chamber's own copy is only
// compared, to say when an edit waits for `reload`.
func (s *syncRun) acceptedConfig() (*chamber.Config, error) {
	data, err := readSmall(filepath.Join(s.state, chamber.ConfigFile), 1<<20)
	if errors.Is(err, os.ErrNotExist) {
		return nil, &chamber.Error{Kind: chamber.Usage, Msg: "the chamber has no accepted configuration",
			Hint: "start it (cryochamber start), or run `cryochamber reload --dir " + s.dir + "` after adding [channels] to cryo.toml"}
	}
	if err != nil {
		return nil, &chamber.Error{Msg: "cannot read the accepted configuration", Err: err}
	}
	cfg, err := chamber.ParseConfig(chamber.ConfigFile+" (as accepted)", data, s.env.Local)
	if err != nil {
		return nil, &chamber.Error{Kind: chamber.Usage, Err: err, Hint: "fix cryo.toml, then run `cryochamber reload --dir " + s.dir + "`"}
	}
	if cfg.Channels == nil || cfg.Channels.Email == nil && cfg.Channels.GitHub == nil && cfg.Channels.Zulip == nil {
		return nil, &chamber.Error{Kind: chamber.Usage, Msg: "no channel in the accepted cryo.toml",
			Hint: "add [channels.email], [channels.github] or [channels.zulip] to cryo.toml (`cryochamber init` in an empty directory shows them), then run `cryochamber reload --dir " + s.dir + "`"}
	}
	if own, err := chamber.LoadConfig(s.dir, s.env.Local); err == nil && !reflect.DeepEqual(own.Channels, cfg.Channels) {
		fmt.Fprintf(s.env.Stderr, "cryochamber: warning: [channels] in %s differs from the accepted one, which is what sync uses; run `cryochamber reload --dir %s` to accept the change\n",
			filepath.Join(s.dir, chamber.ConfigFile), s.dir)
	}
	return cfg, nil
}

func readSmall(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return data, nil
}

// captured reads an environment file of the state directory (nil when absent or unreadable).
func (s *syncRun) captured(path string) []string {
	data, err := readSmall(path, timer.MaxEnvFile)
	if err != nil {
		return nil
	}
	vars, err := timer.ParseEnvFile(data)
	if err != nil {
		return nil
	}
	return vars
}

func lookup(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// secret resolves a channel secret when the channel first needs it: a variable of this
// process's environment, else the one `sync --install` captured, else the alert secrets
// captured at start; or what a command prints (run with the chamber's PATH).
func (s *syncRun) secret(what, envName string, command []string) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		if envName != "" {
			if v, ok := lookup(s.env.Environ, envName); ok && v != "" {
				return v, nil
			}
			for _, f := range []string{filepath.Join(s.state, channel.SyncDir, syncSecretsFile), filepath.Join(s.state, chamber.SecretsFile)} {
				if v, ok := lookup(s.captured(f), envName); ok && v != "" {
					return v, nil
				}
			}
			return "", fmt.Errorf("%s: %s is not set: export it and run `cryochamber sync --install --dir %s` (it is kept, mode 0600, outside the chamber)", what, envName, s.dir)
		}
		environ := append(s.captured(filepath.Join(s.state, chamber.EnvFileName)), s.env.Environ...)
		v, err := fallback.PasswordFrom(ctx, environ, "", command)
		if err != nil {
			return "", fmt.Errorf("%s: %w", what, err)
		}
		return v, nil
	}
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
				return s.secret("the SMTP password ([email])", smtp.PasswordEnv, smtp.PasswordCommand)(ctx)
			},
			IMAP: channel.IMAPConfig{Host: e.IMAPHost, Port: e.IMAPPort, TLS: e.IMAPTLS, Username: e.IMAPUsername, Mailbox: e.Mailbox,
				Password: s.secret("the IMAP password ([channels.email])", e.PasswordEnv, e.PasswordCommand)},
			Summaries: *e.Summaries,
		})
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if g := ch.GitHub; g != nil {
		c, err := channel.NewGitHub(channel.GitHubConfig{APIURL: g.APIURL, Repo: g.Repo, Issue: g.Issue, AllowedUsers: g.AllowedUsers,
			Token: s.secret("the GitHub token ([channels.github])", g.TokenEnv, g.TokenCommand), Summaries: *g.Summaries})
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
			APIKey: s.secret("the Zulip API key ([channels.zulip])", z.TokenEnv, z.TokenCommand), Summaries: *z.Summaries})
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
	if st, err := chamber.LoadState(s.env.StateDir, s.dir); err == nil && st.Last != nil {
		// The summary is the agent's own words (untrusted text): it only decides what is
		// published, never where.
		sum = &channel.Summary{Session: st.Last.Session, Exit: st.Last.Exit, Text: st.Last.Summary, End: st.Last.End}
	}
	results, err := channel.Run(ctx, channel.Options{
		Dir: s.dir, ID: s.id, StateDir: s.state, Channels: chans, Summary: sum,
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
			if err := chamber.ChannelNotice(ctx, s.env, s.dir, "channel-cap", r.Capped+".\nRaise [channels] max_per_day in cryo.toml (then `cryochamber reload`) if this is expected; otherwise look at what the agent writes to its outbox."); err != nil {
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
			if err := chamber.NotifyChannel(ctx, s.env, s.dir, r.Channel, r.Down, r.Failures, lastErr); err != nil {
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

// install captures the channels' secrets and arms the sync timer.
func (s *syncRun) install(ctx context.Context, cfg *chamber.Config) error {
	envFile := filepath.Join(s.state, chamber.EnvFileName)
	if _, err := os.Stat(envFile); err != nil {
		return &chamber.Error{Kind: chamber.Usage, Msg: "the chamber's environment file is missing (" + err.Error() + ")", Hint: "start the chamber (or run `cryochamber reload`) first"}
	}
	bin := s.env.Binary
	if bin == "" || strings.Contains(bin, "/go-build") {
		return &chamber.Error{Kind: chamber.Usage, Msg: "cryochamber is running from a temporary build: the timer would run a file that `go` deletes", Hint: "install it (make build, then copy bin/cryochamber to ~/.local/bin) and run sync --install again"}
	}
	if err := s.captureSecrets(cfg); err != nil {
		return err
	}
	backend := cfg.Backend
	if backend == "" {
		if st, err := chamber.LoadState(s.env.StateDir, s.dir); err == nil && (st.Backend == "systemd" || st.Backend == "launchd" || st.Backend == "slurm") {
			backend = st.Backend
		}
	}
	be, err := s.env.OpenBackend(ctx, backend)
	if err != nil {
		return &chamber.Error{Msg: "cannot reach the timer manager", Err: err}
	}
	defer be.Close()
	p, ok := be.(timer.Poller)
	if !ok {
		return &chamber.Error{Msg: "the " + be.Name() + " backend cannot run a repeating timer"}
	}
	syncDir := filepath.Join(s.state, channel.SyncDir)
	tc := timer.Chamber{ID: s.id, Dir: s.dir, EnvFile: envFile,
		Env:    []string{"PATH=" + s.env.Getenv("PATH"), "HOME=" + s.env.Getenv("HOME")},
		Stdout: filepath.Join(syncDir, "launchd.out"), Stderr: filepath.Join(syncDir, "launchd.err"),
		Cluster: cfg.SbatchArgs()} // [slurm]: the sync jobs run where the sessions do
	if captured := s.captured(envFile); captured != nil {
		// What start captured: the syncs run with the chamber's PATH and HOME.
		tc.Env = nil
		for _, k := range []string{"PATH", "HOME"} {
			if v, ok := lookup(captured, k); ok {
				tc.Env = append(tc.Env, k+"="+v)
			}
		}
	}
	every := cfg.Channels.PollInterval.D
	if err := p.ArmPoll(ctx, tc, every, []string{bin, "sync", "--dir", s.dir}); err != nil {
		return &chamber.Error{Msg: "cannot arm the sync timer", Err: err}
	}
	fmt.Fprintf(s.env.Stdout, "sync timer armed: every %v (`cryochamber sync --dir %s` syncs now; `sync --status` shows how the last one went)\n", every, s.dir)
	for _, w := range be.Warnings(ctx) {
		fmt.Fprintf(s.env.Stderr, "cryochamber: warning: %s\n", w)
	}
	return nil
}

// captureSecrets writes the channels' environment secrets, taken from this process's
// environment, to sync/secrets (0600, outside the chamber). A secret missing here but captured
// before is kept.
func (s *syncRun) captureSecrets(cfg *chamber.Config) error {
	syncDir := filepath.Join(s.state, channel.SyncDir)
	for _, d := range []string{s.state, syncDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return &chamber.Error{Err: err}
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return &chamber.Error{Err: err}
		}
	}
	path := filepath.Join(syncDir, syncSecretsFile)
	before := s.captured(path)
	names := cfg.ChannelSecretNames()
	if e := cfg.Email; e != nil && cfg.Channels.Email != nil && e.PasswordEnv != "" && !slices.Contains(names, e.PasswordEnv) {
		names = append(names, e.PasswordEnv)
	}
	var vars []string
	for _, k := range names {
		v, ok := lookup(s.env.Environ, k)
		if !ok || v == "" {
			v, ok = lookup(before, k)
		}
		if !ok || v == "" {
			return &chamber.Error{Kind: chamber.Usage, Msg: "cryo.toml names " + k + " for a channel, but it is not set",
				Hint: "export " + k + " and run `cryochamber sync --install` again (it is kept, mode 0600, outside the chamber, and never given to the agent)"}
		}
		vars = append(vars, k+"="+v)
	}
	data, err := timer.FormatEnvFile(vars)
	if err != nil {
		return &chamber.Error{Kind: chamber.Usage, Msg: "cannot capture the channel secrets", Err: err, Hint: "a secret must be one line"}
	}
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		return &chamber.Error{Msg: "cannot capture the channel secrets", Err: err}
	}
	return nil
}

// remove disarms the sync timer and forgets the captured secrets; what was synced stays
// recorded, so a later install goes on where this one stopped.
func (s *syncRun) remove(ctx context.Context) error {
	backend := ""
	if cfg, err := s.acceptedConfig(); err == nil {
		backend = cfg.Backend
	}
	be, err := s.env.OpenBackend(ctx, backend)
	if err != nil {
		return &chamber.Error{Msg: "cannot reach the timer manager", Err: err}
	}
	defer be.Close()
	p, ok := be.(timer.Poller)
	if !ok {
		return &chamber.Error{Msg: "the " + be.Name() + " backend has no sync timer"}
	}
	if err := p.DisarmPoll(ctx, s.id); err != nil {
		return &chamber.Error{Msg: "cannot remove the sync timer", Err: err}
	}
	if err := os.Remove(filepath.Join(s.state, channel.SyncDir, syncSecretsFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return &chamber.Error{Msg: "removed the sync timer, but not the captured secrets", Err: err}
	}
	fmt.Fprintln(s.env.Stdout, "sync timer removed")
	return nil
}

// status prints each channel's last sync.
func (s *syncRun) status(asJSON bool) error {
	list, err := channel.LastSync(s.state)
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
		line := fmt.Sprintf("%-7s last sync %s", c.Channel, when(c.LastSync, now))
		if c.LastError == "" {
			line += ": ok"
		} else {
			line += ": FAILED: " + termtext.Line(c.LastError)
			if !c.LastOK.IsZero() {
				line += " (last success " + when(c.LastOK, now) + ")"
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

func when(t, now time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format(time.RFC3339) + " (" + chamber.Relative(t, now) + ")"
}

package main

import (
	"github.com/urfave/cli/v2"

	"github.com/cryochamber/cryochamber/chamber"
)

func digestCommand(env *chamber.Env) *cli.Command {
	return &cli.Command{
		Name:  "digest",
		Usage: "the period's summary of a chamber: sessions run, failures, replies, alerts, upcoming wakes, paused or stopped",
		Description: `digest prints what a chamber did since its last digest (or over one period): sessions
run, failures, replies, alerts, the upcoming wakes, and whether it is paused or stopped.
--send delivers it instead, as a notice: to the operator's [[fallback]] targets, and as a
sealed item in the outbox, which sync publishes on the chamber's channels.

With digest = "daily 09:00" or "weekly mon 09:00" in cryo.toml (the chamber's time zone;
taken into force by start or reload), one user timer (cryochamber-digest.timer) runs
` + "`cryochamber digest --all --due --send`" + ` at every chamber's digest time: each chamber whose
time has come since its last digest gets one. Nothing of ours runs between.

When an alert target keeps failing, the digest says so first; when every one fails, its
subject begins "NO ALERT REACHES ANYONE".`,
		Flags: []cli.Flag{dirFlag(),
			&cli.BoolFlag{Name: "all", Usage: "every chamber this user started (instead of --dir)"},
			&cli.BoolFlag{Name: "send", Usage: "deliver it to the alert targets and the outbox (channels) instead of printing it"},
			&cli.BoolFlag{Name: "due", Usage: "only chambers whose digest time has come since their last digest (what the digest timer runs)"},
		},
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			if c.Bool("all") && c.IsSet("dir") {
				return &usageError{"give --dir or --all, not both", "use --dir D for one chamber, --all for every chamber"}
			}
			return chamber.Digest(c.Context, env, chamber.DigestOptions{Dir: c.String("dir"), All: c.Bool("all"), Send: c.Bool("send"), Due: c.Bool("due")})
		},
	}
}

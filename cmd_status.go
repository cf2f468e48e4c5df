package main

import (
	"github.com/urfave/cli/v2"

	"github.com/cryochamber/cryochamber/chamber"
)

func statusCommand(env *chamber.Env) *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "show the plan, state, every upcoming wake, the last result, the timers as the OS reports them (on Slurm, each job: id, name, begin time), and the latest block",
		Description: `--json prints one JSON object. Its "state" is the one word ps and the dashboard show
(armed, running, paused, retrying, complete, failed, cancelled, missing); its "phase" is the
state machine's own (armed, running, paused, complete, failed, cancelled): a chamber retrying
a failed session is in phase armed, in state retrying.
It also names the sandbox sessions run in ("sandbox": "bubblewrap", "sandbox-exec" or "off" in
--json) and warns every time while [sandbox] mode is "off".
Besides the plan's state, status shows each limit of cryo.toml that holds the schedule back
now (a "guardrail:" line; --json: guardrails) and what today's and this month's sessions cost
(--json: spend_today_usd, spend_month_usd, and spend_today_unknown, spend_month_unknown: the
sessions whose cost could not be read).
With [heartbeat] in cryo.toml, status also shows the off-machine monitor's last answer
(` + "`heartbeat`" + ` in --json: last, at, ok, error, timeout, grace, expect, paused) and warns when a
ping or an API call failed.
Status changes no file. Its one action: when the inbox watcher of an active chamber is lost
(stopped, or not installed), it starts the wake service, whose wake starts the watcher again,
tells the operator once and reads the messages that waited.`,
		Flags: []cli.Flag{dirFlag(), jsonFlag(), &cli.IntFlag{Name: "lines", Value: 10, Usage: "lines of the latest block to show"}},
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			s, err := chamber.Status(c.Context, env, chamber.StatusOptions{Dir: c.String("dir"), Tail: c.Int("lines")})
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return s.WriteJSON(env.Stdout)
			}
			s.WriteText(env.Stdout, chamber.ChamberLocation(c.Context, env, s.Dir), env.Now())
			return nil
		},
	}
}

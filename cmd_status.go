package main

import (
	"github.com/urfave/cli/v2"

	"github.com/cryochamber/cryochamber/chamber"
)

func statusCommand(env *chamber.Env) *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "show the plan, state, every upcoming wake, the last result, the timers as the OS reports them, and the latest block",
		Description: `With [heartbeat] in cryo.toml, status also shows the off-machine monitor's last answer
(` + "`heartbeat`" + ` in --json: last, at, ok, error, timeout, grace, expect, paused) and warns when a
ping or an API call failed.`,
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

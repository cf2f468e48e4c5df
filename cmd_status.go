package main

import (
	"github.com/urfave/cli/v2"

	"github.com/cryochamber/cryochamber/chamber"
)

func statusCommand(env *chamber.Env) *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "show the plan, state, every upcoming wake, the last result, the timers as the OS reports them (on Slurm, each job: id, name, begin time), and the latest block",
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

package main

import (
	"github.com/urfave/cli/v2"

	"github.com/cryochamber/cryochamber/chamber"
)

func psCommand(env *chamber.Env) *cli.Command {
	return &cli.Command{
		Name:  "ps",
		Usage: "list every chamber of this user: state (armed, running, paused, retrying, complete, failed, cancelled, orphaned), next wake, last result",
		Flags: []cli.Flag{jsonArrayFlag(), &cli.StringFlag{Name: "backend", Usage: "timer backend to ask: systemd, launchd or slurm (default: by OS)"}},
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			if err := checkBackend(c.String("backend")); err != nil {
				return err
			}
			rows, err := chamber.Ps(c.Context, env, chamber.PsOptions{Backend: c.String("backend")})
			if err != nil {
				return err
			}
			return chamber.WritePs(env.Stdout, rows, c.Bool("json"), env.Now())
		},
	}
}

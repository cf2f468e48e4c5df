package main

import (
	"github.com/urfave/cli/v2"

	"github.com/cryochamber/cryochamber/chamber"
)

func cancelCommand(env *chamber.Env) *cli.Command {
	return &cli.Command{
		Name:  "cancel",
		Usage: "remove every timer of the chamber; keep the log (a running session finishes and does not re-arm)",
		Flags: []cli.Flag{dirFlag()},
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			return chamber.Cancel(c.Context, env, chamber.CancelOptions{Dir: c.String("dir")})
		},
	}
}

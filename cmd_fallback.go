package main

import (
	"github.com/urfave/cli/v2"

	"github.com/cryochamber/cryochamber/chamber"
)

func fallbackCommand(env *chamber.Env) *cli.Command {
	return &cli.Command{
		Name:  "fallback",
		Usage: "the dead-man check (what the fallback and alert timers run): deliver pending alerts, alert if the due session has not finished",
		Flags: []cli.Flag{dirFlag()},
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			return chamber.Fallback(c.Context, env, chamber.FallbackOptions{Dir: c.String("dir")})
		},
	}
}

package main

import (
	"github.com/urfave/cli/v2"

	"github.com/cryochamber/cryochamber/chamber"
)

func receiveCommand(env *chamber.Env) *cli.Command {
	return &cli.Command{
		Name:  "receive",
		Usage: "print the outbox messages not printed before (replies, notices, alerts) and mark them read",
		Flags: []cli.Flag{dirFlag(), jsonArrayFlag(), &cli.BoolFlag{Name: "all", Usage: "also print what was printed before"}},
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			return chamber.Receive(c.Context, env, chamber.ReceiveOptions{Dir: c.String("dir"), All: c.Bool("all"), JSON: c.Bool("json")})
		},
	}
}

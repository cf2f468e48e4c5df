package main

import (
	"github.com/urfave/cli/v2"

	"github.com/cryochamber/cryochamber/chamber"
)

func logCommand(env *chamber.Env) *cli.Command {
	return &cli.Command{
		Name:  "log",
		Usage: "print the session log, one session, or follow it",
		Flags: []cli.Flag{dirFlag(),
			&cli.IntFlag{Name: "session", Aliases: []string{"n"}, Usage: "print only session `N`"},
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing what is appended (Ctrl-C to stop)"},
			&cli.BoolFlag{Name: "numbers", Usage: "number each line within its block (the line numbers marker errors use)"},
		},
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			return chamber.PrintLog(c.Context, env, chamber.LogOptions{Dir: c.String("dir"), Session: c.Int("session"), Follow: c.Bool("follow"), Numbers: c.Bool("numbers")})
		},
	}
}

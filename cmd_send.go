package main

import (
	"os"

	"github.com/urfave/cli/v2"

	"github.com/cryochamber/cryochamber/chamber"
)

func sendCommand(env *chamber.Env) *cli.Command {
	return &cli.Command{
		Name:      "send",
		Usage:     "write a message to the chamber's inbox (the next session reads and answers it)",
		ArgsUsage: `"TEXT" (or - to read it from standard input)`,
		Flags: []cli.Flag{dirFlag(),
			&cli.StringFlag{Name: "from", Usage: "who the message is from (default: $USER)"},
			&cli.StringFlag{Name: "subject", Usage: "a subject line"},
			&cli.BoolFlag{Name: "wake", Usage: "start the chamber's wake service now instead of waiting"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return &usageError{"send takes the message text as one argument", `cryochamber send "text" [--dir DIR] (quote the text), or cryochamber send - < file`}
			}
			text := c.Args().First()
			if text == "-" {
				t, err := chamber.ReadText(os.Stdin)
				if err != nil {
					return &usageError{err.Error(), "messages are at most 1 MiB"}
				}
				text = t
			}
			return chamber.Send(c.Context, env, chamber.SendOptions{Dir: c.String("dir"), Text: text, From: c.String("from"), Subject: c.String("subject"), Wake: c.Bool("wake")})
		},
	}
}

package main

import (
	"github.com/urfave/cli/v2"

	"github.com/cryochamber/cryochamber/chamber"
)

func wakeCommand(env *chamber.Env) *cli.Command {
	return &cli.Command{
		Name:  "wake",
		Usage: "run the session that is due (what the OS timer runs); --now runs one now; --at moves the plan's next wake",
		Description: `Without flags, wake runs the session that is due, or does nothing (a timer that fires early
or twice). --now runs a session at once. --at TIME moves the plan's next wake, with the time
grammar of WAKE ("2026-12-01 09:00" in the chamber's zone, "2026-12-01T09:00+01:00", "+3d"),
and reads the timer back.`,
		Flags: []cli.Flag{dirFlag(),
			&cli.BoolFlag{Name: "now", Usage: "run a session now even if none is due"},
			&cli.StringFlag{Name: "at", Usage: "move the plan's next wake to `TIME` (WAKE's grammar)"},
		},
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			if c.Bool("now") && c.String("at") != "" {
				return &usageError{"--now and --at do not go together", "wake --now runs a session now; wake --at TIME moves the next one"}
			}
			return chamber.Wake(c.Context, env, chamber.WakeOptions{Dir: c.String("dir"), Now: c.Bool("now"), At: c.String("at")})
		},
	}
}

package main

import (
	"github.com/urfave/cli/v2"

	"github.com/cryochamber/cryochamber/chamber"
)

func pauseCommand(env *chamber.Env) *cli.Command {
	return &cli.Command{
		Name:  "pause",
		Usage: "remove the chamber's timers but keep its schedule (resume re-arms it)",
		Description: `pause removes the wake, dead-man and inbox watcher timers and keeps the plan's wake, the
TODOs and a pending retry in the state. Messages sent meanwhile wait in the inbox. With
--until TIME (WAKE's grammar: "2026-12-01 09:00", "+7d") one timer resumes the chamber then.
Whatever fell due during the pause runs once at the resume, and its prompt says what was
missed.`,
		Flags: []cli.Flag{dirFlag(), &cli.StringFlag{Name: "until", Usage: "resume by itself at `TIME`"}},
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			return chamber.Pause(c.Context, env, chamber.PauseOptions{Dir: c.String("dir"), Until: c.String("until")})
		},
	}
}

func resumeCommand(env *chamber.Env) *cli.Command {
	return &cli.Command{
		Name:  "resume",
		Usage: "re-arm what pause kept; what fell due meanwhile runs now, once",
		Description: `resume re-arms the timers pause removed, with the whole schedule it kept; what fell due
during the pause runs once, told what it missed. Resuming a chamber that is armed already (resume
twice) says so on stderr and exits 0, as cancel and pause twice do.`,
		Flags: []cli.Flag{dirFlag()},
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			return chamber.Resume(c.Context, env, chamber.ResumeOptions{Dir: c.String("dir")})
		},
	}
}

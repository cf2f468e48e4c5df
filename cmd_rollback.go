package main

import (
	"github.com/urfave/cli/v2"

	"github.com/cryochamber/cryochamber/chamber"
)

func rollbackCommand(env *chamber.Env) *cli.Command {
	return &cli.Command{
		Name:  "rollback",
		Usage: "put the chamber's files back exactly as they were after session N (undoable)",
		Description: `rollback restores the snapshot taken after session N: files it holds are created or
overwritten, files it does not hold are removed, directories left empty go. What snapshots never
hold is left alone: cryochamber's own files (cryo.log, timer.json, todo.json, .cryo/, messages/),
the chamber's .git, snapshot_exclude, and files that were too large or not regular files.
It takes the chamber's lock and is refused while a session runs. The chamber as it was is
snapshotted first and the result after, so a second rollback (to the latest session) undoes it.
The next session's prompt says "the operator rolled the chamber back to after session N".
The timers, the schedule and the log are not changed.`,
		Flags: []cli.Flag{dirFlag(),
			&cli.IntFlag{Name: "to-session", Usage: "restore the files as they were after session `N`"},
		},
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			if c.Int("to-session") < 1 {
				return &usageError{"--to-session N is required: a session number (1 or more)", "`cryochamber history` lists the sessions"}
			}
			return chamber.Rollback(c.Context, env, chamber.RollbackOptions{Dir: c.String("dir"), To: c.Int("to-session")})
		},
	}
}

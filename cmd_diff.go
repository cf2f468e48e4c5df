package main

import (
	"github.com/urfave/cli/v2"

	"github.com/cryochamber/cryochamber/chamber"
)

func diffCommand(env *chamber.Env) *cli.Command {
	return &cli.Command{
		Name:  "diff",
		Usage: "what session N changed in the chamber's files (a unified diff, --stat, or --json)",
		Description: `diff compares the snapshot taken after session N with the one before it (the snapshot
after the previous session, or the one taken before session N when the chamber changed between
sessions). Snapshots are kept in a private git repository in the chamber's state directory
(snapshots, snapshot_exclude, snapshot_max_file and snapshot_keep in cryo.toml). They hold the
chamber's files except cryochamber's own (cryo.log, timer.json, todo.json, .cryo/, messages/)
and the chamber's own .git. The header lists the files left out of the snapshot (larger than
snapshot_max_file, FIFOs, hard links). The diff is printed with control characters replaced,
as the log is.`,
		Flags: []cli.Flag{dirFlag(), jsonFlag(),
			&cli.IntFlag{Name: "session", Aliases: []string{"n"}, Usage: "the session `N` whose changes to show"},
			&cli.BoolFlag{Name: "stat", Usage: "a summary: one line per file with its lines added and removed"},
		},
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			if c.Int("session") < 1 {
				return &usageError{"--session N is required: a session number (1 or more)", "`cryochamber history` lists the sessions"}
			}
			return chamber.Diff(c.Context, env, chamber.DiffOptions{Dir: c.String("dir"), Session: c.Int("session"), Stat: c.Bool("stat")}, c.Bool("json"))
		},
	}
}

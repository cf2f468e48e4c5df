package main

import (
	"github.com/urfave/cli/v2"

	"github.com/cryochamber/cryochamber/chamber"
)

// todoCommand is `cryochamber todo list|done|remove`: the operator's side of the agent's TODOs
// (the agent adds them with [CRYO:TODO] and finishes them early with [CRYO:TODO-DONE ID]).
func todoCommand(env *chamber.Env) *cli.Command {
	change := func(remove bool) cli.ActionFunc {
		return func(c *cli.Context) error {
			if c.NArg() != 1 {
				return &usageError{c.Command.Name + " takes one TODO ID", "`cryochamber todo list` lists the IDs"}
			}
			return chamber.TodoChange(c.Context, env, chamber.TodoOptions{Dir: c.String("dir"), ID: c.Args().First(), Remove: remove})
		}
	}
	return &cli.Command{
		Name:      "todo",
		Usage:     "list the chamber's TODOs, mark one done or remove it",
		ArgsUsage: "list | done ID | remove ID",
		Description: `The agent adds TODOs with [CRYO:TODO <time> "<text>"]: each is an extra wake with its own
task. done marks a pending TODO done (the agent can, with [CRYO:TODO-DONE ID]); remove drops it.
Either way no session runs for it, and a wake armed for it is armed again for what comes next.`,
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "every TODO: ID, status (pending, claimed, done), when it is due, its text",
				Flags: []cli.Flag{dirFlag(), jsonArrayFlag()},
				Action: func(c *cli.Context) error {
					if err := noArgs(c); err != nil {
						return err
					}
					items, err := chamber.TodoList(c.Context, env, c.String("dir"))
					if err != nil {
						return err
					}
					return chamber.WriteTodos(env.Stdout, items, c.Bool("json"), chamber.ChamberLocation(c.Context, env, c.String("dir")), env.Now())
				},
			},
			{Name: "done", Usage: "mark the pending TODO `ID` done", ArgsUsage: "ID", Flags: []cli.Flag{dirFlag()}, Action: change(false)},
			{Name: "remove", Usage: "remove the TODO `ID`", ArgsUsage: "ID", Flags: []cli.Flag{dirFlag()}, Action: change(true)},
		},
		Action: func(c *cli.Context) error {
			return &usageError{"todo takes list, done ID or remove ID", "cryochamber todo list --dir DIR"}
		},
	}
}

func forgetCommand(env *chamber.Env) *cli.Command {
	return &cli.Command{
		Name:  "forget",
		Usage: "remove a cancelled (or complete, or failed) chamber's private state; refuses an active one",
		Description: `forget removes what cryochamber keeps outside the chamber (history, TODOs, the accepted
cryo.toml, the captured environment and secrets, sync records) and drops the chamber from ps.
The chamber directory itself (plan.md, NOTES.md, cryo.log, messages/) is kept. An armed,
running or paused chamber is refused: cancel it first. Undelivered alerts are refused too
unless --force.`,
		Flags: []cli.Flag{dirFlag(), &cli.BoolFlag{Name: "force", Usage: "forget even with alerts still undelivered"}},
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			return chamber.Forget(c.Context, env, chamber.ForgetOptions{Dir: c.String("dir"), Force: c.Bool("force")})
		},
	}
}

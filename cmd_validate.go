package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/cryochamber/cryochamber/chamber"
	"github.com/cryochamber/cryochamber/internal/termtext"
)

func validateCommand(env *chamber.Env) *cli.Command {
	return &cli.Command{
		Name:  "validate",
		Usage: "run every check the next wake runs, on the latest block and the armed timers, printing each step",
		Description: `The exit status is 1 when the checks would refuse to hibernate. --json prints one object with
ok, plan_complete, exit, wake, cmd, plans, fallbacks, errors, warnings and checks. A step 3 line
says whether the session sandbox can be set up (it fails when it cannot, and warns while
[sandbox] mode is "off").
[heartbeat] and its api_url, step 9 reads the monitor's check back (the timeout it holds
against the next wake); a monitor that cannot be reached is a warning, never a refusal.`,
		Flags: []cli.Flag{dirFlag(), jsonFlag()},
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			print := env.Stdout
			if c.Bool("json") {
				print = nil
			}
			rep, err := chamber.Validate(c.Context, env, chamber.ValidateOptions{Dir: c.String("dir")}, print)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				if err := rep.WriteJSON(env.Stdout); err != nil {
					return err
				}
			} else {
				for _, w := range rep.Warnings {
					fmt.Fprintf(env.Stdout, "warning: %s\n", termtext.Line(w))
				}
				rep.WriteVerdict(env.Stdout)
			}
			if !rep.OK {
				return &chamber.Error{Msg: "validation failed", Hint: "see the failed steps above; `cryochamber log` shows the latest block"}
			}
			return nil
		},
	}
}

package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cryochamber/cryochamber/chamber"
)

func historyCommand(env *chamber.Env) *cli.Command {
	return &cli.Command{
		Name:  "history",
		Usage: "one row per finished session: when it was due, how late it ran, how long, how it ended, what it answered, how many files it changed, what it cost",
		Description: `history reads an index kept in the chamber's private state directory (one line per
session, one file per year), never the whole log. --since and --until take a date
("2026-03-01", "today", "yesterday": a whole day, so --until 2026-03-31 includes 31 March),
a time ("2026-03-01 09:00", WAKE's grammar) or a past time ("-3d", "-12h": before now).

TOKENS and COST (--json: tokens_in, tokens_out, cost_usd, usage_source) are what the session
used: from the agent CLI's own usage output, or the agent's [CRYO:USAGE] claim ("claimed");
"unknown" (null) when neither said. --json rows name the cryo.toml key that moved or ended the
wake after the session ("guardrail": "min_interval"), when one did.
FILES (files_changed in JSON) counts the files the session changed in the chamber, from its
snapshot (a rename counts once; "-" and null when no snapshot was taken): ` + "`cryochamber diff --session N`" + `
shows them.`,
		Flags: []cli.Flag{dirFlag(), jsonArrayFlag(),
			&cli.StringFlag{Name: "since", Usage: "only sessions started at or after `TIME`"},
			&cli.StringFlag{Name: "until", Usage: "only sessions started at or before `TIME`"},
		},
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			loc := chamber.ChamberLocation(c.Context, env, c.String("dir"))
			var since, until time.Time
			for _, f := range []struct {
				name string
				t    *time.Time
			}{{"since", &since}, {"until", &until}} {
				if v := c.String(f.name); v != "" {
					t, err := chamber.ParseHistoryBound(v, loc, env.Now(), f.name == "until")
					if err != nil {
						return &usageError{fmt.Sprintf("--%s %q %v", f.name, v, err), chamber.HistoryRangeHint}
					}
					*f.t = t
				}
			}
			rows, err := chamber.History(c.Context, env, chamber.HistoryOptions{Dir: c.String("dir"), Since: since, Until: until})
			if err != nil {
				return err
			}
			return chamber.WriteHistory(env.Stdout, rows, c.Bool("json"), loc)
		},
	}
}

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
shows them.
It shows the last 50 sessions (of the range, with --since or --until: all of the range);
--last N shows the last N, --all every one. --json writes one row at a time, however many.`,
		Flags: []cli.Flag{dirFlag(), jsonArrayFlag(),
			&cli.StringFlag{Name: "since", Usage: "only sessions started at or after `TIME`"},
			&cli.StringFlag{Name: "until", Usage: "only sessions started at or before `TIME`"},
			// The default window (issue 28): a plan of years has tens of thousands of rows.
			&cli.IntFlag{Name: "last", Value: historyLast, Usage: "show the last `N` sessions"},
			&cli.BoolFlag{Name: "all", Usage: "show every session (no window)"},
		},
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			var err error
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
			opts := chamber.HistoryOptions{Dir: c.String("dir"), Since: since, Until: until}
			if opts.Last, err = historyWindow(c); err != nil {
				return err
			}
			if c.Bool("json") {
				return chamber.WriteHistoryJSON(c.Context, env, opts, env.Stdout)
			}
			rows, err := chamber.History(c.Context, env, opts)
			if err != nil {
				return err
			}
			if err := chamber.WriteHistory(env.Stdout, rows, false, loc); err != nil {
				return err
			}
			if opts.Last > 0 && len(rows) == opts.Last {
				fmt.Fprintf(env.Stdout, "(the last %d sessions: --all shows every one)\n", opts.Last)
			}
			return nil
		},
	}
}

// historyLast is the default window of `history`: the last sessions a person reads at once.
const historyLast = 50

// historyWindow is the --last of `history` (0: no window): --all, or --since/--until without an
// explicit --last, show the whole range.
func historyWindow(c *cli.Context) (int, error) {
	n := c.Int("last")
	if c.IsSet("last") && n < 1 {
		return 0, &usageError{fmt.Sprintf("--last %d is not a number of sessions", n), "give --last 1 or more, or --all"}
	}
	if c.Bool("all") && c.IsSet("last") {
		return 0, &usageError{"--all and --last contradict each other", "give one of them"}
	}
	if c.Bool("all") || !c.IsSet("last") && (c.IsSet("since") || c.IsSet("until")) {
		return 0, nil
	}
	return n, nil
}

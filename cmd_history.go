package main

import (
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cryochamber/cryochamber/chamber"
)

func historyCommand(env *chamber.Env) *cli.Command {
	return &cli.Command{
		Name:  "history",
		Usage: "one row per finished session: when it was due, how late it ran, how long, how it ended, what it answered, how many files it changed",
		Description: `history reads an index kept in the chamber's private state directory (one line per
session, one file per year), never the whole log. --since and --until take WAKE's time
grammar ("2026-03-01", "2026-03-01 00:00", "-30d" is not a thing: use a date).
FILES (files_changed in JSON) counts the files the session changed in the chamber, from its
snapshot (a rename counts once; "-" and null when no snapshot was taken): ` + "`cryochamber diff --session N`" + `
shows them.`,
		Flags: []cli.Flag{dirFlag(), jsonFlag(),
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
					t, err := parseDay(v, loc, env.Now())
					if err != nil {
						return &usageError{"--" + f.name + " " + err.Error(), `give a date or time: "2026-03-01", "2026-03-01 09:00", "+0d"`}
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

// parseDay reads a date ("2026-03-01", midnight in loc) or any WAKE time.
func parseDay(s string, loc *time.Location, now time.Time) (time.Time, error) {
	if t, err := time.ParseInLocation("2006-01-02", s, loc); err == nil {
		return t, nil
	}
	return chamber.ParseWhen(s, loc, now)
}

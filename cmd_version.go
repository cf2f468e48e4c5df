package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
	"github.com/xrash/smetrics"

	"github.com/cryochamber/cryochamber/chamber"
)

func versionCommand(env *chamber.Env) *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print cryochamber's version (as --version does)",
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "cryochamber version %s\n", c.App.Version)
			return nil
		},
	}
}

// didYouMean is the hint for an unknown command: the nearest command's name (Jaro-Winkler, as
// urfave/cli's own suggestions measure it), or the list of commands when none is near.
func didYouMean(app *cli.App, name string) string {
	best, score := "", 0.0
	for _, c := range app.Commands {
		if c.Hidden {
			continue
		}
		if s := smetrics.JaroWinkler(c.Name, name, 0.7, 4); s > score {
			best, score = c.Name, s
		}
	}
	if score >= 0.8 {
		return fmt.Sprintf("did you mean `cryochamber %s`? (`cryochamber help` lists the commands)", best)
	}
	return "run `cryochamber help` to see the commands"
}

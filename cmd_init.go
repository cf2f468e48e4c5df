package main

import (
	"github.com/urfave/cli/v2"

	"github.com/cryochamber/cryochamber/chamber"
)

func initCommand(env *chamber.Env) *cli.Command {
	return &cli.Command{
		Name:      "init",
		Usage:     "create a chamber: plan.md (template), cryo.toml (commented defaults), NOTES.md, messages/",
		ArgsUsage: "[DIR]",
		Description: `init never overwrites a file. The agent is opencode unless cryo.toml says otherwise
(agent = "claude", "codex", or any command line) or start is given --agent.`,
		Flags: []cli.Flag{dirFlag()},
		Action: func(c *cli.Context) error {
			arg, err := oneArg(c, "directory", "cryochamber init [DIR]")
			if err != nil {
				return err
			}
			dir := c.String("dir")
			if arg != "" {
				if c.IsSet("dir") && dir != arg {
					return &usageError{"init got two directories: --dir " + dir + " and " + arg, "give one: cryochamber init DIR"}
				}
				dir = arg
			}
			return chamber.Init(env, chamber.InitOptions{Dir: dir}, env.Stdout)
		},
	}
}

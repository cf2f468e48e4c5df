package main

import (
	"github.com/urfave/cli/v2"

	"github.com/cryochamber/cryochamber/chamber"
)

func reloadCommand(env *chamber.Env) *cli.Command {
	return &cli.Command{
		Name:  "reload",
		Usage: "accept an edited cryo.toml, the programs in the chamber and the environment (PATH, HOME, agent_env) for a started chamber",
		Description: `The agent can write in its chamber, so the configuration in force is the copy accepted when
you started the chamber, kept outside it. An edit of cryo.toml is reported (status, the
prompt, a notice) and has no effect until you run reload. Programs inside the chamber that
it may run (./agent.sh) are pinned by a hash of their content: a changed one refuses the
session and alerts until you reload. reload also accepts an upgraded cryochamber binary.`,
		Flags: []cli.Flag{dirFlag()},
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			return chamber.Reload(c.Context, env, chamber.ReloadOptions{Dir: c.String("dir")})
		},
	}
}

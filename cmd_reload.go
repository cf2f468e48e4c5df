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
it may run (./agent.sh, the script of "sh agent.sh", under wrappers such as env, timeout or
nice) are pinned by a hash of their content: a changed one refuses the session and alerts
until you reload. reload also accepts an upgraded cryochamber binary (without it, the wake
timer already runs the new build, and its first wake makes the dead-man's copy that build,
so that the dead-man reads the state it writes).

reload first shows what it would accept: every key of cryo.toml whose value changes, old →
new (secrets hidden), and every program whose pin changes. A change to anything but
timezone (the agent line, watch_inbox, [agents.*], allowed_commands, agent_env, the limits,
[[fallback]], fallback_allow, [email], [webhook], [channels], backend), and any changed pin,
is accepted only with --yes: without it reload exits 1 and accepts nothing. Read the list:
the agent may have made the edit. A reload after an upgrade, with nothing changed, needs no
--yes. PATH entries that are not absolute (".", "", "./node_modules/.bin") are left out of
the captured PATH, with a warning naming them.`,
		Flags: []cli.Flag{dirFlag(),
			&cli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "accept the changes to cryo.toml and to the pinned programs that reload shows"}},
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			return chamber.Reload(c.Context, env, chamber.ReloadOptions{Dir: c.String("dir"), Yes: c.Bool("yes")})
		},
	}
}

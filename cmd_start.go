package main

import (
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/cryochamber/cryochamber/chamber"
)

func startCommand(env *chamber.Env) *cli.Command {
	return &cli.Command{
		Name:      "start",
		Usage:     "make the plan's directory a chamber, run session 1 now, and hibernate",
		ArgsUsage: "PLAN.md",
		Description: `start accepts the chamber's cryo.toml, the programs in the chamber it may run, and the
environment (PATH, HOME, agent_env, the alert secrets): later edits take effect only after
` + "`cryochamber reload`" + `. It refuses a chamber that is already active (cancel it first), a paused one
(resume it), and a plan.md that is still init's template (--force runs it anyway).

Every session runs in a sandbox (bubblewrap on Linux, sandbox-exec on macOS; [sandbox] in
cryo.toml): start refuses, arming nothing, when it cannot be set up.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "agent", Usage: "agent command line for this chamber (overrides `agent` in cryo.toml, and is remembered for later starts): opencode, claude, codex, or any command"},
			&cli.StringFlag{Name: "backend", Usage: "timer backend: systemd, launchd or slurm (default: by OS, or `backend` in cryo.toml)"},
			&cli.BoolFlag{Name: "force", Usage: "start even if plan.md is still the template"},
			dirFlag(),
		},
		Action: func(c *cli.Context) error {
			plan, err := oneArg(c, "plan file", "cryochamber start path/to/plan.md")
			if err != nil {
				return err
			}
			if err := checkBackend(c.String("backend")); err != nil {
				return err
			}
			if plan == "" {
				plan = filepath.Join(c.String("dir"), chamber.DefaultPlan)
			}
			return chamber.Start(c.Context, env, chamber.StartOptions{Plan: plan, Agent: c.String("agent"), Backend: c.String("backend"), Force: c.Bool("force")})
		},
	}
}

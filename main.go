// Command cryochamber lets an AI coding agent carry out a plan that lasts days, months or years:
// the operating system's own timer starts `cryochamber wake`, which runs one agent session,
// reads the agent's [CRYO:...] markers, validates them, arms the next timer and exits.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	_ "time/tzdata" // cryo.toml's timezone must load on machines without a zoneinfo database
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

package main

import (
	"context"

	"github.com/cryochamber/cryochamber/chamber"
)

type startOptions struct {
	Plan    string
	Agent   string
	Backend string
}

func runStart(ctx context.Context, env *chamber.Env, opts startOptions) error {
	return chamber.Start(ctx, env, chamber.StartOptions{Plan: opts.Plan, Agent: opts.Agent, Backend: opts.Backend})
}

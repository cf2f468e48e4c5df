package main

import (
	"context"

	"github.com/cryochamber/cryochamber/chamber"
)

type psOptions struct {
	JSON    bool
	Backend string
}

func runPs(ctx context.Context, env *chamber.Env, opts psOptions) error {
	rows, err := chamber.Ps(ctx, env, chamber.PsOptions{JSON: opts.JSON, Backend: opts.Backend})
	if err != nil {
		return err
	}
	return chamber.WritePs(env.Stdout, rows, opts.JSON, env.Now())
}

package main

import (
	"context"

	"github.com/cryochamber/cryochamber/chamber"
)

type initOptions struct {
	Dir string
}

func runInit(_ context.Context, env *chamber.Env, opts initOptions) error {
	return chamber.Init(env, chamber.InitOptions{Dir: opts.Dir}, env.Stdout)
}

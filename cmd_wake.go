package main

import (
	"context"

	"github.com/cryochamber/cryochamber/chamber"
)

type wakeOptions struct {
	Dir string
	Now bool
}

func runWake(ctx context.Context, env *chamber.Env, opts wakeOptions) error {
	return chamber.Wake(ctx, env, chamber.WakeOptions{Dir: opts.Dir, Now: opts.Now})
}

type fallbackOptions struct {
	Dir string
}

func runFallback(ctx context.Context, env *chamber.Env, opts fallbackOptions) error {
	return chamber.Fallback(ctx, env, chamber.FallbackOptions{Dir: opts.Dir})
}

type cancelOptions struct {
	Dir string
}

func runCancel(ctx context.Context, env *chamber.Env, opts cancelOptions) error {
	return chamber.Cancel(ctx, env, chamber.CancelOptions{Dir: opts.Dir})
}

type reloadOptions struct {
	Dir string
}

func runReload(ctx context.Context, env *chamber.Env, opts reloadOptions) error {
	return chamber.Reload(ctx, env, chamber.ReloadOptions{Dir: opts.Dir})
}

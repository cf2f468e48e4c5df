package main

import (
	"context"

	"github.com/cryochamber/cryochamber/chamber"
)

type logOptions struct {
	Dir     string
	Session int
	Follow  bool
	Numbers bool
}

func runLog(ctx context.Context, env *chamber.Env, opts logOptions) error {
	return chamber.PrintLog(ctx, env, chamber.LogOptions{Dir: opts.Dir, Session: opts.Session, Follow: opts.Follow, Numbers: opts.Numbers})
}

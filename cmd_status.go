package main

import (
	"context"

	"github.com/cryochamber/cryochamber/chamber"
)

type statusOptions struct {
	Dir   string
	JSON  bool
	Lines int
}

func runStatus(ctx context.Context, env *chamber.Env, opts statusOptions) error {
	s, err := chamber.Status(ctx, env, chamber.StatusOptions{Dir: opts.Dir, Tail: opts.Lines})
	if err != nil {
		return err
	}
	if opts.JSON {
		return s.WriteJSON(env.Stdout)
	}
	loc := env.Local
	if cfg, err := chamber.LoadConfig(s.Dir, env.Local); err == nil {
		loc = cfg.Location
	}
	s.WriteText(env.Stdout, loc, env.Now())
	return nil
}

type validateOptions struct {
	Dir  string
	JSON bool
}

// runValidate prints each step; the exit status is 1 when the checks would refuse to hibernate.
func runValidate(ctx context.Context, env *chamber.Env, opts validateOptions) error {
	print := env.Stdout
	if opts.JSON {
		print = nil
	}
	rep, err := chamber.Validate(ctx, env, chamber.ValidateOptions{Dir: opts.Dir}, print)
	if err != nil {
		return err
	}
	if opts.JSON {
		if err := rep.WriteJSON(env.Stdout); err != nil {
			return err
		}
	} else {
		rep.WriteVerdict(env.Stdout)
	}
	if !rep.OK {
		return &chamber.Error{Status: exitFailed, Msg: "validation failed", Hint: "see the failed steps above; `cryochamber log` shows the latest block"}
	}
	return nil
}

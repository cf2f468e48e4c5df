package main

import (
	"context"

	"github.com/cryochamber/cryochamber/chamber"
)

type sendOptions struct {
	Dir     string
	Text    string
	From    string
	Subject string
	Wake    bool
}

func runSend(ctx context.Context, env *chamber.Env, opts sendOptions) error {
	return chamber.Send(ctx, env, chamber.SendOptions{Dir: opts.Dir, Text: opts.Text, From: opts.From, Subject: opts.Subject, Wake: opts.Wake})
}

type receiveOptions struct {
	Dir  string
	All  bool
	JSON bool
}

func runReceive(_ context.Context, env *chamber.Env, opts receiveOptions) error {
	return chamber.Receive(env, chamber.ReceiveOptions{Dir: opts.Dir, All: opts.All, JSON: opts.JSON})
}

package chamber

// `ps` lists the timers of one backend (--backend, or this OS's), but a chamber armed on
// another one (backend = "slurm" beside systemd chambers) is asked about on its own: its wake
// is a Slurm job, which the systemd user manager knows nothing of.

import (
	"context"
	"time"

	"github.com/cryochamber/cryochamber/timer"
)

// ownBackend is the backend the chamber's state names, when it is not be; be itself when the
// state names none or be, or when that other backend cannot be opened (the question then
// fails against be, and ps says the wake is missing, as before).
func ownBackend(ctx context.Context, env *Env, be timer.Backend, name string) timer.Backend {
	if name == "" || name == be.Name() || env.OpenBackend == nil {
		return be
	}
	other, err := env.OpenBackend(ctx, name)
	if err != nil {
		return be
	}
	return closingBackend{other}
}

// closingBackend answers one Next and releases its connection: ps asks it one question.
type closingBackend struct{ timer.Backend }

func (c closingBackend) Next(ctx context.Context, id string, k timer.Kind) (time.Time, bool, error) {
	defer c.Backend.Close()
	return c.Backend.Next(ctx, id, k)
}

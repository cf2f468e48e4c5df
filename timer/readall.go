package timer

import (
	"context"
	"time"
)

// Ref names one timer of one chamber, for NextAll.
type Ref struct {
	ID   string
	Kind Kind
}

// NextAnswer is Next's answer for one Ref.
type NextAnswer struct {
	At  time.Time
	OK  bool
	Err error
}

// AllNexter is a backend that reads many timers back at once (systemd: one ListUnitsByNames
// for which are loaded, then every next elapse asked for together), so that a view of many
// chambers (the dashboard's overview, `ps`) pays a few round trips, not two per chamber.
type AllNexter interface {
	NextAll(ctx context.Context, refs []Ref) []NextAnswer
}

// NextAll reads every timer of refs back from the OS, each answer what Next would say, in the
// order of refs. A backend that is not an AllNexter is asked one timer at a time.
func NextAll(ctx context.Context, be Backend, refs []Ref) []NextAnswer {
	if a, ok := be.(AllNexter); ok {
		return a.NextAll(ctx, refs)
	}
	out := make([]NextAnswer, len(refs))
	for i, r := range refs {
		out[i].At, out[i].OK, out[i].Err = be.Next(ctx, r.ID, r.Kind)
	}
	return out
}

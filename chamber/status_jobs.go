package chamber

// The jobs of a chamber on a cluster scheduler, for `status`: on Slurm every timer is a job,
// and the operator looks it up by its id (`scontrol show job N`).

import (
	"context"
	"fmt"
	"time"

	"github.com/cryochamber/cryochamber/timer"
)

// jobLister is a backend that holds a chamber's timers as jobs (Slurm).
type jobLister interface {
	Jobs(ctx context.Context, id string) ([]timer.SlurmJob, error)
}

// jobs lists the chamber's jobs into s, within busTimeout; a failure is a warning.
func (s *StatusInfo) jobs(ctx context.Context, be timer.Backend, id string) {
	jl, ok := be.(jobLister)
	if !ok {
		return
	}
	qctx, cancel := context.WithTimeout(ctx, busTimeout)
	defer cancel()
	jobs, err := jl.Jobs(qctx, id)
	if err != nil {
		s.Warnings = append(s.Warnings, fmt.Sprintf("cannot list the %s jobs: %v", be.Name(), err))
		return
	}
	s.Jobs = jobs
}

// statusJob formats one job: "12 cryo-x-1a2b3c4d-wake PENDING, begins 2026-...".
func statusJob(j timer.SlurmJob, loc *time.Location) string {
	s := fmt.Sprintf("%d %s %s", j.ID, j.Name, j.State)
	if j.Begin != nil {
		s += ", begins " + j.Begin.In(loc).Format("2006-01-02 15:04:05 MST")
	}
	return s
}

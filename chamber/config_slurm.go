package chamber

// This file holds cryo.toml's [slurm] table: what the Slurm backend (backend = "slurm") adds
// to each job of the chamber. The values become #SBATCH lines of the job scripts, so each is
// checked to be one plain word (timer.CheckSbatchArg); cryochamber's own options (the begin
// time, the job name, the singleton dependency, the environment) cannot be changed here.

import (
	"github.com/cryochamber/cryochamber/timer"
)

// SlurmConfig is the [slurm] table.
type SlurmConfig struct {
	Partition string   `toml:"partition"`
	Account   string   `toml:"account"`
	ExtraArgs []string `toml:"extra_args"`
}

// slurmName is a partition or account name: one word of Slurm's usual alphabet.
var slurmName = lazyRE(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// checkSlurm checks [slurm]; bad is Load's error maker.
func (c *Config) checkSlurm(bad func(table, key, format string, args ...any) error) error {
	s := c.Slurm
	if s == nil {
		return nil
	}
	if s.Partition != "" && !slurmName().MatchString(s.Partition) {
		return bad("slurm", "partition", "%q is not a partition name (letters, digits, '_', '.', '-')", s.Partition)
	}
	if s.Account != "" && !slurmName().MatchString(s.Account) {
		return bad("slurm", "account", "%q is not an account name (letters, digits, '_', '.', '-')", s.Account)
	}
	for _, a := range s.ExtraArgs {
		if err := timer.CheckSbatchArg(a); err != nil {
			return bad("slurm", "extra_args", "%s", err.Error())
		}
	}
	return nil
}

// SbatchArgs are the chamber's own #SBATCH options.
func (c *Config) SbatchArgs() []string {
	s := c.Slurm
	if s == nil {
		return nil
	}
	var args []string
	if s.Partition != "" {
		args = append(args, "--partition="+s.Partition)
	}
	if s.Account != "" {
		args = append(args, "--account="+s.Account)
	}
	return append(args, s.ExtraArgs...)
}

// slurmHint is what to check when the Slurm controller cannot be reached.
func slurmHint() string {
	return ("check that the Slurm controller answers (`scontrol ping`; SLURM_CONF names the cluster) and that sbatch is on PATH; see docs/CLUSTER.md")
}

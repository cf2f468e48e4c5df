package chamber

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// A session on a Slurm cluster (a login or compute node: backend = "slurm", or any chamber on
// a machine that is one) could otherwise submit a batch job: `sbatch --wrap=...` runs as the
// user on a node, outside any cage, and `scancel` ends the chamber's own wake and dead-man
// jobs. A Slurm command proves who it is with a credential from munged's socket (auth/munge)
// or sackd's (auth/slurm), which serve any process of the user: the cage hides both, as it
// hides the user's bus. The agent never needs Slurm: the wake, outside the cage, arms.

// slurmSockets are the munge and sackd sockets the cage hides: their default directories, and
// the socket that the cluster's slurm.conf names in AuthInfo=socket=... (SLURM_CONF of the
// environments given, else the usual places).
func slurmSockets(envs ...[]string) []string {
	out := []string{"/run/munge", "/var/run/munge", "/run/slurm", "/var/run/slurm"}
	confs := []string{"/etc/slurm/slurm.conf", "/etc/slurm-llnl/slurm.conf", "/usr/local/etc/slurm.conf"}
	for _, e := range envs {
		if v, ok := lookupEnv(e, "SLURM_CONF"); ok && filepath.IsAbs(v) {
			confs = append(confs, v)
		}
	}
	for _, c := range confs {
		out = append(out, authSockets(c)...)
	}
	return out
}

// authSockets reads the socket= options of AuthInfo lines of a slurm.conf (the operator's or
// the site's file; at most 1 MiB of it is read).
func authSockets(conf string) []string {
	f, err := os.Open(conf)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		k, v, ok := bytes.Cut(line, []byte("="))
		if !ok || !strings.EqualFold(string(bytes.TrimSpace(k)), "AuthInfo") {
			continue
		}
		v, _, _ = bytes.Cut(v, []byte("#"))
		for _, opt := range strings.Split(strings.TrimSpace(string(v)), ",") {
			if s, ok := strings.CutPrefix(strings.TrimSpace(opt), "socket="); ok && filepath.IsAbs(s) {
				out = append(out, s)
			}
		}
	}
	return out
}

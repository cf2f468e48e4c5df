package bench

import (
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// baseBin is an earlier build to compare with in the same rounds (issue 28: before/after pairs
// a second person can reproduce on a loaded machine). Without it BenchmarkAgainstBase skips.
var baseBin = flag.String("cryo.base", "", "an earlier cryochamber binary: BenchmarkAgainstBase runs it and -cryo.bin in the same paired rounds")

// BenchmarkAgainstBase runs this binary and -cryo.base side by side in one private user
// manager: a `wake --now`, a `status` and a `--version` of each, one after the other in every
// round (paired_bench_test.go), each binary with its own chamber (started by it, so that its
// units name it and neither rewrites the other's), and a `status` of a chamber that was only
// initialised (no state, no timers: the process start and the chamber's files). The figures
// are the per-round ratios this/base: a change's effect measured at the same load.
func BenchmarkAgainstBase(b *testing.B) {
	if *baseBin == "" {
		b.Skip("no -cryo.base binary to compare with")
	}
	needBinary(b)
	quietDisk()
	m := systemdtest.Start(b)
	env := managerEnv(m)
	root := b.TempDir()
	this, base := filepath.Join(root, "this"), filepath.Join(root, "base")
	chamber(b, this, quickAgent, "")
	chamber(b, base, quickAgent, "")
	mustRun(b, env, this, bin, "start", filepath.Join(this, "plan.md"))
	mustRun(b, env, base, *baseBin, "start", filepath.Join(base, "plan.md"))
	idle := filepath.Join(root, "idle") // never started: read by both binaries, written by neither
	chamber(b, idle, quickAgent, "")
	n := reps(b, 31)
	b.ResetTimer()
	r := pairedRounds(n, []string{"wake", "base wake", "status", "base status", "version", "base version", "idle status", "base idle status"},
		func() time.Duration { return mustRun(b, env, this, bin, "wake", "--now", "--dir", this).wall },
		func() time.Duration { return mustRun(b, env, base, *baseBin, "wake", "--now", "--dir", base).wall },
		func() time.Duration { return mustRun(b, env, this, bin, "status", "--dir", this).wall },
		func() time.Duration { return mustRun(b, env, base, *baseBin, "status", "--dir", base).wall },
		func() time.Duration { return mustRun(b, env, this, bin, "--version").wall },
		func() time.Duration { return mustRun(b, env, base, *baseBin, "--version").wall },
		func() time.Duration { return neverStarted(b, env, idle, bin) },
		func() time.Duration { return neverStarted(b, env, idle, *baseBin) },
	)
	b.StopTimer()
	for i, what := range []string{"`wake --now`", "`status`", "`--version`", "`status` of a chamber never started"} {
		s := r.ratio(2*i, 2*i+1)
		recordPaired(groupWake, "this binary / -cryo.base, same rounds, same manager", what,
			fmt.Sprintf("%.2fx (%s against %s)", s.med, ms(r.median(2*i)), ms(r.median(2*i+1))), s, "", nil)
	}
}

// neverStarted times `status` of a chamber that was only initialised: it says so and exits 2
// (a usage error: "not a chamber"); anything else fails the benchmark.
func neverStarted(b *testing.B, env []string, dir, binary string) time.Duration {
	b.Helper()
	p := run(b, env, dir, binary, "status", "--dir", dir)
	if p.status != 2 || !strings.Contains(p.out, "never started") {
		b.Fatalf("status of a chamber never started: exit %d, want 2 and \"never started\":\n%s", p.status, p.out)
	}
	return p.wall
}

package binary

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// TestPinnedCopiesKeptBesideSlurm: the user has a chamber on systemd, which prunes old pinned
// copies (chamber/pinprune.go), and a chamber on Slurm in the same state directory. Slurm runs
// its dead-man from a job script in $STATE/slurm that execs a copy by its path; sbatch keeps
// its own copy of a queued job's script and the compute nodes' processes are not in this
// /proc: the systemd chamber's prune cannot see what Slurm may run, and keeps every copy. The
// same when no job script is there but a chamber's state says backend slurm. Once neither is
// there, the same reloads remove the unused copies (the test can fail). Before, only a chamber
// on Slurm refused to prune; the systemd chamber removed a copy the Slurm job still ran.
func TestPinnedCopiesKeptBesideSlurm(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	state := fixture.StateDir(m)
	bin := filepath.Join(state, "bin")
	installed := filepath.Join(t.TempDir(), "opt", "cryochamber")
	bs := newPruneBuilds(t, bin)
	install := func(i int) { bs.install(i, installed) }
	copies, want, copyOf := bs.copies, bs.want, bs.copyOf
	toml := "agent = \"./agent.sh\"\nmin_interval = \"1s\"\nwatch_inbox = false\n"
	agent := "#!/bin/sh\necho \"[CRYO:EXIT 0] ok\"\necho \"[CRYO:WAKE +30d]\"\n"
	install(1)
	a := newTrial(t, m, toml, agent, nil)
	a.bin = installed
	a.start(0)
	for i := 2; i <= 4; i++ {
		install(i)
		a.must(0, "reload", "--yes", "--dir", a.dir)
	}
	// Copies 1 and 2 are named by nothing on this machine's manager or chambers.
	reloadAt := func(days int) string {
		t.Helper()
		env := append(append([]string(nil), a.env...), "CRYOCHAMBER_NOW="+time.Now().UTC().Add(time.Duration(days)*24*time.Hour).Format(time.RFC3339))
		r := fixture.Cmd{Binary: installed, Env: env, Dir: a.dir}.Run(t, "reload", "--yes", "--dir", a.dir)
		if r.Code != 0 {
			t.Fatalf("reload: exit %d\n%s", r.Code, r.Output)
		}
		return r.Output
	}
	write := func(p, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o700); err != nil {
			t.Fatal(err)
		}
	}

	// A Slurm chamber's dead-man script (as timer/slurm.go writes it) runs copy 1.
	const slurmID = "0000000000000000"
	job := filepath.Join(state, "slurm", slurmID, "fallback.sh")
	write(job, "#!/bin/sh\nexec '"+filepath.Join(bin, copyOf[1], "cryochamber")+"' fallback --dir /cluster/chamber\n")
	for _, days := range []int{2, 4} {
		if out := reloadAt(days); !equalStrings(copies(), want(1, 2, 3, 4)) {
			t.Fatalf("with a Slurm job script in %s, copies after a reload %d days on: %v, want %v\n%s", filepath.Dir(job), days, copies(), want(1, 2, 3, 4), out)
		}
	}
	if err := os.Remove(job); err != nil {
		t.Fatal(err)
	}

	// No job script (queued with sbatch, or the script removed), but a chamber on Slurm.
	other := filepath.Join(state, "chambers", slurmID, "state.json")
	write(other, `{"version":1,"id":"`+slurmID+`","backend":"slurm","phase":"armed"}`)
	for _, days := range []int{6, 8} {
		if out := reloadAt(days); !equalStrings(copies(), want(1, 2, 3, 4)) {
			t.Fatalf("with a chamber on Slurm, copies after a reload %d days on: %v, want %v\n%s", days, copies(), want(1, 2, 3, 4), out)
		}
	}
	if err := os.RemoveAll(filepath.Dir(other)); err != nil {
		t.Fatal(err)
	}

	// Neither: the same reloads mark, then remove, copies 1 and 2.
	reloadAt(10)
	if out := reloadAt(12); !equalStrings(copies(), want(3, 4)) {
		t.Errorf("without Slurm, copies after two looks: %v, want %v\n%s", copies(), want(3, 4), out)
	}
	a.must(0, "cancel", "--dir", a.dir)
}

// pruneBuilds makes builds of cryochamber (the same program with bytes of its own at the end:
// another build to cryochamber) and lists the pinned copies in bin.
type pruneBuilds struct {
	t      *testing.T
	bin    string
	base   []byte
	dir    string
	copyOf map[int]string // build → the name of its copy
}

func newPruneBuilds(t *testing.T, bin string) *pruneBuilds {
	base, err := os.ReadFile(fixture.Binary())
	if err != nil {
		t.Fatal(err)
	}
	return &pruneBuilds{t: t, bin: bin, base: base, dir: t.TempDir(), copyOf: map[int]string{}}
}

// install installs build i at path (renamed over it, as a package manager upgrades).
func (b *pruneBuilds) install(i int, path string) {
	b.t.Helper()
	data := append(append([]byte(nil), b.base...), fmt.Sprintf("\nbuild %d\n", i)...)
	sum := sha256.Sum256(data)
	b.copyOf[i] = hex.EncodeToString(sum[:])[:16]
	p := filepath.Join(b.dir, fmt.Sprint(i))
	if err := os.WriteFile(p, data, 0o755); err != nil {
		b.t.Fatal(err)
	}
	installBinary(b.t, p, path)
}

// copies lists the directories in bin.
func (b *pruneBuilds) copies() []string {
	b.t.Helper()
	ents, err := os.ReadDir(b.bin)
	if err != nil {
		b.t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// want names the copies of builds.
func (b *pruneBuilds) want(builds ...int) []string {
	var out []string
	for _, i := range builds {
		out = append(out, b.copyOf[i])
	}
	sort.Strings(out)
	return out
}

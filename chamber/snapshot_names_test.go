package chamber

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cryochamber/cryochamber/snapshot"
)

// TestSkippedLineIsOneLine: a file left out of a snapshot is named by the session (a FIFO
// called "x\n# no file changed\n+++ b/plan.md"): its header line in `cryochamber diff` stays
// one line, the name quoted, so it cannot forge lines of the diff; a plain name is as it is.
func TestSkippedLineIsOneLine(t *testing.T) {
	got := skippedLine(snapshot.Skip{Path: "x\n# no file changed\n+++ b/plan.md\x1b[2J", Why: "a FIFO"})
	if strings.ContainsAny(got, "\n\x1b") || !strings.HasPrefix(got, `# not in the snapshot: "x\n# no file changed`) {
		t.Errorf("%q", got)
	}
	if got := skippedLine(snapshot.Skip{Path: "big.bin", Why: "larger than snapshot_max_file", Size: 20 << 20}); got != "# not in the snapshot: big.bin (20.0 MiB, larger than snapshot_max_file)" {
		t.Errorf("%q", got)
	}
}

// TestRollbackOutputIsSanitized: `cryochamber rollback` names the files it left as they are
// (a FIFO the session named with an escape sequence that clears the operator's screen or sets
// the window title): what it prints holds no escape and no forged line.
func TestRollbackOutputIsSanitized(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	r := testRunner(t, "agent = \"/bin/true\"\n", t0)
	if err := os.WriteFile(filepath.Join(r.dir, "cryo.toml"), []byte("agent = \"/bin/true\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.st.Phase, r.st.Session = PhasePaused, 1
	if err := r.save(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(r.dir, "plan.md"), []byte("plan\n"), 0o644)
	repo, err := r.snapRepo()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Take(context.Background(), r.fs, r.snapshotOptions(), snapshot.Request{Kind: snapshot.KindSession, Session: 1, Now: t0}); err != nil {
		t.Fatal(err)
	}
	bad := "\x1b[2J\x1b]0;pwned\x07fifo\ncryochamber: rolled back cleanly"
	if err := syscall.Mkfifo(filepath.Join(r.dir, bad), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	env := *r.env
	env.Stdout, env.Stderr = &out, &errb
	err = Rollback(context.Background(), &env, RollbackOptions{Dir: r.dir, To: 1})
	all := out.String() + errb.String()
	if !strings.Contains(all, "not in any snapshot") {
		t.Fatalf("the rollback did not name the FIFO: %v\n%s", err, all)
	}
	if strings.ContainsAny(all, "\x1b\x07") || strings.Contains(all, "\ncryochamber: rolled back cleanly") {
		t.Errorf("the rollback printed the session's name raw: %q", all)
	}
}

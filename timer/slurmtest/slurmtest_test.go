package slurmtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A job submitted to the private cluster runs, and a pending job survives a restart of the
// controller.
func TestClusterRunsJobs(t *testing.T) {
	c := Start(t)
	out := filepath.Join(t.TempDir(), "ran")
	id := strings.TrimSpace(c.Run("sbatch", "--parsable", "--output=/dev/null", "--begin=now+3", "--wrap", "touch "+out))
	if id == "" {
		t.Fatal("sbatch printed no job id")
	}
	c.StopController()
	c.StartController()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(out); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s did not run\n%s", id, c.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

package chamber

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/pelletier/go-toml/v2"
)

// What the prune of old pinned copies cannot see (pinprune.go). The looks see the processes of
// this machine, the systemd user manager and the chambers' files. A chamber on Slurm runs its
// dead-man from a job script in $STATE/slurm that execs the copy by its path, and sbatch keeps
// its own copy of a queued job's script, on the controller; its processes run on compute nodes,
// not in this /proc. A chamber on launchd runs what launchd loaded, which its plist may no
// longer say. Any of them in the state directory keeps every copy, whichever chamber prunes:
// the chambers share one bin/.

// blindBackend reports whether a chamber on backend name runs copies that the prune cannot list.
func blindBackend(name string) bool { return name == "slurm" || name == "launchd" }

// backendIn is the backend that a chamber's state.json or accepted cryo.toml (name) names;
// "" when it names none. An error when the file cannot be read as such.
func backendIn(name string, data []byte) (string, error) {
	var v struct {
		Backend string `json:"backend" toml:"backend"`
	}
	var err error
	if name == acceptedConfig {
		err = toml.Unmarshal(data, &v)
	} else {
		err = json.Unmarshal(data, &v)
	}
	return v.Backend, err
}

// slurmJobs reports whether the Slurm backend's job directory ($STATE/slurm, as the CLI opens
// the backend) holds any file; an error when it cannot be read for another reason than its
// absence.
func slurmJobs(stateDir string) (bool, error) {
	root := filepath.Join(stateDir, "slurm")
	found := false
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root && errors.Is(err, os.ErrNotExist) {
				return fs.SkipDir
			}
			return err
		}
		if !d.IsDir() {
			found = true
			return fs.SkipAll
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("read %s: %w", root, err)
	}
	return found, nil
}

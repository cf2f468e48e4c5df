package timer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrCannotTell is what RunText returns for a backend that cannot say everything it may run.
var ErrCannotTell = errors.New("the timer manager cannot list what it runs")

// RunText returns, as one text, every command line the OS timer manager may start for the
// user: on systemd the content of every unit file in the user unit directory, and the ExecStart=
// of every loaded cryochamber service as the manager holds it (which may be older than its file:
// an arming killed between writing a unit and reloading the manager leaves the old one loaded).
// The pinned copies of cryochamber are removed only when their name appears nowhere in it
// (chamber/pinprune.go). A backend that cannot say it all (launchd keeps a job as it was loaded,
// and its file may differ; Slurm) returns ErrCannotTell: nothing is removed there. It never
// changes anything.
func RunText(ctx context.Context, be Backend) (string, error) {
	b, ok := be.(*systemdBackend)
	if !ok {
		return "", fmt.Errorf("%s: %w", be.Name(), ErrCannotTell)
	}
	var text strings.Builder
	ents, err := os.ReadDir(b.o.UnitDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("list %s: %w", b.o.UnitDir, err)
	}
	for _, e := range ents {
		// Every file, whatever its name: a unit of the user's own that runs a copy keeps it.
		p := filepath.Join(b.o.UnitDir, e.Name())
		fi, err := os.Stat(p)
		if err != nil || fi.IsDir() {
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return "", fmt.Errorf("read %s: %w", p, err)
			}
			continue
		}
		if fi.Size() > maxUnitFile {
			return "", fmt.Errorf("read %s: larger than %d bytes", p, maxUnitFile)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return "", fmt.Errorf("read %s: %w", p, err)
		}
		text.Write(data)
		text.WriteByte('\n')
	}
	units, err := b.conn.ListUnitsByPatternsContext(ctx, nil, []string{"cryo*.service"})
	if err != nil {
		return "", fmt.Errorf("list the services of the user manager: %w", err)
	}
	for _, u := range units {
		if u.LoadState != "loaded" {
			continue
		}
		p, err := b.conn.GetUnitTypePropertyContext(ctx, u.Name, "Service", "ExecStart")
		if err != nil {
			return "", fmt.Errorf("read %s: %w", u.Name, err)
		}
		fmt.Fprintf(&text, "%s: %v\n", u.Name, p.Value.Value())
	}
	return text.String(), nil
}

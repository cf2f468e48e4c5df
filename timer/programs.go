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
// user: on systemd the content of every unit file in the user unit directory and in its drop-in
// directories one level down (NAME.d/*.conf may set ExecStart= anew), and the ExecStart=
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
	if err := unitFilesText(&text, b.o.UnitDir, true); err != nil {
		return "", err
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

// unitFilesText writes the content of every file in dir to text, and, when dropIns, of every file
// in each of its directories named *.d (a unit's drop-ins: `systemctl edit` writes
// NAME.service.d/override.conf, which may set ExecStart= anew). A file that cannot be read, or
// is too large to be a unit, is an error: then nothing is removed.
func unitFilesText(text *strings.Builder, dir string, dropIns bool) error {
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	for _, e := range ents {
		// Every file, whatever its name: a unit of the user's own that runs a copy keeps it.
		p := filepath.Join(dir, e.Name())
		fi, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue // gone, or a dangling symlink: the manager cannot load it either
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		if fi.IsDir() {
			if dropIns && strings.HasSuffix(e.Name(), ".d") {
				if err := unitFilesText(text, p, false); err != nil {
					return err
				}
			}
			continue
		}
		if fi.Size() > maxUnitFile {
			return fmt.Errorf("read %s: larger than %d bytes", p, maxUnitFile)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		text.Write(data)
		text.WriteByte('\n')
	}
	return nil
}

package timer

// The Mac's own time zone.
//
// launchd reads StartCalendarInterval in the zone of the system, the one /etc/localtime names,
// whatever $TZ says in the shell that ran `cryochamber start` (launchd does not inherit it).
// Go's time.Local honours $TZ, so it is the wrong zone for a plist: the same WAKE started under
// TZ=America/New_York and TZ=Asia/Tokyo would give two calendars and at least one wrong fire.
//
// On macOS /etc/localtime is a symbolic link whose target names the zone:
// /var/db/timezone/zoneinfo/Europe/Berlin (crystal-lang/crystal#15959), resolving further into
// a versioned /private/var/db/timezone/tz/2026c.1.0/zoneinfo/... (HowardHinnant/date#454,
// bytedance/deer-flow#5154) or /usr/share/zoneinfo.default/... on macOS 15
// (thlib/go-timezone-local#13). The name is what follows the last `zoneinfo/` or
// `zoneinfo.default/` component of the link's own target; the rules are read from the file it
// points at, so they are the Mac's tz database, not the one built into Go.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/internal/confined"
)

// maxZoneFile bounds a TZif file (the largest in the tz database are a few KiB).
const maxZoneFile = 256 << 10

// Zone is a named time zone.
type Zone struct {
	// Name is the IANA name ("Europe/Berlin"), "UTC" when the system has no /etc/localtime, or
	// "localtime:<hash>" for a copied zone file without a name (the hash changes with its
	// content, so a change is still seen).
	Name string
	Loc  *time.Location
}

// SystemZone reads the system's time zone from the link at localtime (/etc/localtime). A
// missing file means UTC, as it does for the C library and launchd.
func SystemZone(localtime string) (Zone, error) {
	fi, err := os.Lstat(localtime)
	if errors.Is(err, fs.ErrNotExist) {
		return Zone{Name: "UTC", Loc: time.UTC}, nil
	}
	if err != nil {
		return Zone{}, fmt.Errorf("read the system time zone: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		// A copy of a zone file: its rules, but no name.
		data, err := readZoneFile(localtime)
		if err != nil {
			return Zone{}, err
		}
		sum := sha256.Sum256(data)
		name := "localtime:" + hex.EncodeToString(sum[:4])
		loc, err := time.LoadLocationFromTZData(name, data)
		if err != nil {
			return Zone{}, fmt.Errorf("system time zone %s: %w", localtime, err)
		}
		return Zone{Name: name, Loc: loc}, nil
	}
	target, err := os.Readlink(localtime)
	if err != nil {
		return Zone{}, fmt.Errorf("read the system time zone: %w", err)
	}
	name, err := zoneName(target)
	if err != nil {
		return Zone{}, fmt.Errorf("system time zone: %s links to %q: %w", localtime, target, err)
	}
	if !filepath.IsAbs(target) {
		target = filepath.Join(filepath.Dir(localtime), target)
	}
	data, err := readZoneFile(target)
	if err != nil {
		return Zone{}, err
	}
	loc, err := time.LoadLocationFromTZData(name, data)
	if err != nil {
		return Zone{}, fmt.Errorf("system time zone %s (%s): %w", name, target, err)
	}
	return Zone{Name: name, Loc: loc}, nil
}

// zoneName takes the zone's name from a link target: what follows its last `zoneinfo` (or
// `zoneinfo.default`) component.
func zoneName(target string) (string, error) {
	parts := strings.Split(filepath.ToSlash(target), "/")
	at := -1
	for i, p := range parts {
		if p == "zoneinfo" || p == "zoneinfo.default" {
			at = i
		}
	}
	if at < 0 || at == len(parts)-1 {
		return "", errors.New("no zoneinfo/<name> in the link")
	}
	rest := parts[at+1:]
	for _, p := range rest {
		if p == "" || p == "." || p == ".." || strings.Trim(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_+-") != "" {
			return "", fmt.Errorf("%q is not a zone name", strings.Join(rest, "/"))
		}
	}
	return strings.Join(rest, "/"), nil
}

func readZoneFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read the system time zone: %w", err)
	}
	defer f.Close()
	data, err := confined.ReadAll(f, path, maxZoneFile)
	if err != nil {
		return nil, fmt.Errorf("read the system time zone: %w", err)
	}
	return data, nil
}

package timer

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/e2e"
)

func TestSystemZone(t *testing.T) {
	berlin, err := os.ReadFile("/usr/share/zoneinfo/Europe/Berlin")
	if err != nil {
		e2e.Skipf(t, "no tz database in /usr/share/zoneinfo (Debian package tzdata): %v", err)
	}
	dir := t.TempDir()
	write := func(rel string) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, berlin, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	link := func(name, target string) string {
		p := filepath.Join(dir, name)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	summer := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name, link, want string
	}{
		// The shapes macOS uses (see launchd_zone.go for the reports).
		{"macOS", link("l1", write("var/db/timezone/zoneinfo/Europe/Berlin")), "Europe/Berlin"},
		{"macOS versioned", link("l2", write("private/var/db/timezone/tz/2026c.1.0/zoneinfo/Europe/Berlin")), "Europe/Berlin"},
		{"macOS 15 zoneinfo.default", link("l3", write("usr/share/zoneinfo.default/Europe/Berlin")), "Europe/Berlin"},
		{"relative", link("l4", "var/db/timezone/zoneinfo/Europe/Berlin"), "Europe/Berlin"},
		{"Debian", link("l5", "/usr/share/zoneinfo/Europe/Berlin"), "Europe/Berlin"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			z, err := SystemZone(tt.link)
			if err != nil {
				t.Fatal(err)
			}
			if z.Name != tt.want || z.Loc.String() != tt.want {
				t.Errorf("zone %q (%s), want %q", z.Name, z.Loc, tt.want)
			}
			if _, off := summer.In(z.Loc).Zone(); off != 2*3600 {
				t.Errorf("offset in July %d, want CEST", off)
			}
		})
	}
	t.Run("missing means UTC", func(t *testing.T) {
		z, err := SystemZone(filepath.Join(dir, "none"))
		if err != nil || z.Name != "UTC" || z.Loc != time.UTC {
			t.Errorf("SystemZone of a missing file = %+v, %v", z, err)
		}
	})
	t.Run("a copy has no name but its rules", func(t *testing.T) {
		z, err := SystemZone(write("copied"))
		if err != nil || !strings.HasPrefix(z.Name, "localtime:") {
			t.Fatalf("SystemZone of a copy = %+v, %v", z, err)
		}
		if _, off := summer.In(z.Loc).Zone(); off != 2*3600 {
			t.Errorf("offset of the copy in July %d", off)
		}
	})
	for _, tt := range []struct{ name, target, want string }{
		{"no zoneinfo", write("tz/Berlin"), "no zoneinfo/<name> in the link"},
		{"dot dot", "/usr/share/zoneinfo/../zoneinfo/x/../../etc/passwd", `is not a zone name`},
		{"dangling", "/nonexistent/zoneinfo/Europe/Berlin", "no such file"},
		{"escapes", "/etc/zoneinfo/../hostname", `"../hostname" is not a zone name`},
	} {
		t.Run("refuses "+tt.name, func(t *testing.T) {
			_, err := SystemZone(link("bad-"+strings.ReplaceAll(tt.name, " ", "-"), tt.target))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("SystemZone(-> %s) = %v, want %q", tt.target, err, tt.want)
			}
		})
	}
	t.Run("refuses garbage", func(t *testing.T) {
		p := filepath.Join(dir, "zoneinfo", "Bad", "Zone")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("not TZif"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := SystemZone(link("garbage", p)); err == nil || !strings.Contains(err.Error(), "Bad/Zone") {
			t.Errorf("SystemZone of garbage = %v", err)
		}
	})
}

// TestLaunchdZoneIsTheMacs (issue 15, defect 1): the calendar is computed in the zone the Mac's
// /etc/localtime names, and read back in the zone the Mac has now. After the Mac moves (System
// Settings changes the link), the wake launchd holds no longer fires at the instant it was
// armed for: Check says so, naming the new zone, and arming again fixes it.
func TestLaunchdZoneIsTheMacs(t *testing.T) {
	e := newLaunchdEnv(t)
	ctx := context.Background()
	setLocaltime(t, e.localtime, "America/New_York")
	e.now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	wake := time.Date(2027, 1, 15, 14, 0, 0, 0, time.UTC)
	fire, err := FireAt(e.b, wake, e.now)
	if err != nil || !fire.Equal(wake) {
		t.Fatalf("FireAt = %s, %v", fire, err)
	}
	if err := e.b.Arm(ctx, e.c, e.job(Wake, fire)); err != nil {
		t.Fatal(err)
	}
	j, _ := e.fake.Job(e.target(LaunchdLabel(e.c.ID, Wake)))
	if j == nil || len(j.Calendars) != 1 || j.Calendars[0]["Hour"] != 9 || j.Calendars[0]["Day"] != 15 {
		t.Fatalf("the plist launchd loaded: %+v (want 01-15 09:00, New York)", j)
	}
	v, err := Check(ctx, e.b, e.c.ID, Wake, fire)
	if err != nil || !v.OK || v.String() != "launchd holds 01-15 09:00 (America/New_York) → next 2027-01-15T14:00Z" {
		t.Fatalf("Check = %q, %+v, %v", v, v.OK, err)
	}

	// The Mac flies to Tokyo: launchd now reads 01-15 09:00 as Tokyo's, 00:00Z.
	setLocaltime(t, e.localtime, "Asia/Tokyo")
	v, err = Check(ctx, e.b, e.c.ID, Wake, fire)
	if err != nil || v.OK || v.Zone != "Asia/Tokyo" ||
		v.String() != "launchd holds 01-15 09:00 (Asia/Tokyo) → next 2027-01-15T00:00Z, want 2027-01-15T14:00Z" {
		t.Fatalf("Check after the move = %q, ok %v, %v", v, v.OK, err)
	}
	if err := e.b.Arm(ctx, e.c, e.job(Wake, fire)); err != nil {
		t.Fatal(err)
	}
	if v, err := Check(ctx, e.b, e.c.ID, Wake, fire); err != nil || !v.OK || v.Held != "01-15 23:00" {
		t.Fatalf("Check after arming again = %q, %v", v, err)
	}
}

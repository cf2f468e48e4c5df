package timer

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"howett.net/plist"

	"github.com/cryochamber/cryochamber/internal/e2e"
)

// The user's digest units: one OnCalendar line per distinct schedule, in its zone; systemd
// reads them as the user manager would, and reads the calendars as the times meant.
func TestSystemdDigestUnits(t *testing.T) {
	e2e.LookPath(t, "systemd-analyze", "systemd")
	dir := t.TempDir()
	bin := filepath.Join(dir, "cryochamber")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := filepath.Join(dir, "state 100%", "digest.env")
	cals := []string{"Mon *-*-* 09:00:00 Europe/Berlin", "*-*-* 07:30:00 UTC", "Mon *-*-* 09:00:00 Europe/Berlin"}
	svc, tmr, err := SystemdDigestUnits(DigestJob{Argv: []string{bin, "digest", "--all", "--due", "--send"}, Calendars: cals, EnvFile: env})
	if err != nil {
		t.Fatal(err)
	}
	tdata, _ := serializeUnit(tmr)
	sdata, _ := serializeUnit(svc)
	if n := strings.Count(string(tdata), "OnCalendar="); n != 2 || !strings.Contains(string(tdata), "Persistent=true") {
		t.Fatalf("timer unit (want 2 calendars, persistent):\n%s", tdata)
	}
	if !strings.Contains(string(sdata), "EnvironmentFile=-"+filepath.Join(dir, "state 100%%", "digest.env")) {
		t.Fatalf("service unit (the env file escaped):\n%s", sdata)
	}
	var files []string
	for name, data := range map[string][]byte{DigestServiceUnit: sdata, DigestTimerUnit: tdata} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	cmd := exec.Command("systemd-analyze", append([]string{"verify", "--user"}, files...)...)
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir(), "SYSTEMD_LOG_LEVEL=warning")
	if out, err := cmd.CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err := exec.Command("systemd-analyze", "calendar", cals[0]).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Normalized form: Mon *-*-* 09:00:00 Europe/Berlin") {
		t.Errorf("systemd reads %q as:\n%s (%v)", cals[0], out, err)
	}
	if _, _, err := SystemdDigestUnits(DigestJob{Argv: []string{bin, "digest"}, Calendars: []string{"*-*-* 09:00:00 UTC\nExecStart=/bin/evil"}}); err == nil {
		t.Error("a newline in a calendar was accepted")
	}
	if _, _, err := SystemdDigestUnits(DigestJob{Argv: []string{bin, "digest"}}); err == nil {
		t.Error("a digest timer without a calendar was accepted")
	}
}

// launchd's calendar has no zone: the digest agent fires every hour at the minutes the digests
// fall on in the Mac's zone (09:00 in Berlin is :30 in Kolkata), at every load, and is well
// formed (plistutil converts it to binary).
func TestLaunchdDigestPlist(t *testing.T) {
	berlin, err1 := time.LoadLocation("Europe/Berlin")
	kolkata, err2 := time.LoadLocation("Asia/Kolkata")
	if err1 != nil || err2 != nil {
		t.Skip("no zoneinfo")
	}
	next := []time.Time{time.Date(2026, 11, 30, 9, 0, 0, 0, berlin), time.Date(2026, 11, 28, 7, 15, 0, 0, time.UTC), time.Date(2026, 11, 29, 9, 0, 0, 0, berlin)}
	d := DigestJob{Argv: []string{"/usr/local/bin/cryochamber", "digest", "--all", "--due", "--send"}, Next: next,
		Env: []string{"PATH=/usr/bin:/bin", "HOME=/Users/me"}, Stdout: "/Users/me/.local/state/cryochamber/digest.out", Stderr: "/Users/me/.local/state/cryochamber/digest.err"}
	data, err := LaunchdDigestPlist(d, kolkata)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if _, err := plist.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	cal, _ := got["StartCalendarInterval"].([]any)
	var minutes []int
	for _, c := range cal {
		m, _ := c.(map[string]any)
		if len(m) != 1 {
			t.Fatalf("a calendar entry holds more than a minute: %v", m)
		}
		minutes = append(minutes, int(m["Minute"].(uint64)))
	}
	if fmt.Sprint(minutes) != "[30 45]" || got["RunAtLoad"] != true || got["Label"] != LaunchdDigestLabel {
		t.Fatalf("digest agent: minutes %v, %v", minutes, got)
	}
	if bin, err := exec.LookPath("plistutil"); err == nil {
		p := filepath.Join(t.TempDir(), "d.plist")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(bin, "-i", p, "-o", p+".bin", "-f", "bin").CombinedOutput(); err != nil {
			t.Fatalf("plistutil: %v\n%s", err, out)
		}
	}
	d.Argv = []string{"relative/cryochamber", "digest"}
	if _, err := LaunchdDigestPlist(d, berlin); err == nil {
		t.Error("a relative program was accepted")
	}
}

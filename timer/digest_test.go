package timer

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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

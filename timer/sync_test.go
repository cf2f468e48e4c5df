package timer

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-systemd/v22/unit"

	"github.com/cryochamber/cryochamber/internal/e2e"
)

func syncChamber(t *testing.T) Chamber {
	t.Helper()
	home := t.TempDir()
	dir := filepath.Join(home, "plans", `garden & <co> "x" 100%`)
	return Chamber{ID: ID(dir), Dir: dir, EnvFile: filepath.Join(home, ".local", "state", "cryochamber", "chambers", ID(dir), "env"),
		Env:    []string{"PATH=/usr/bin:/bin", "HOME=" + home},
		Stdout: filepath.Join(home, "sync.out"), Stderr: filepath.Join(home, "sync.err")}
}

func TestSystemdSyncUnits(t *testing.T) {
	c := syncChamber(t)
	argv := []string{"/usr/local/bin/cryochamber", "sync", "--dir", c.Dir}
	svc, tmr, err := SystemdSyncUnits(c, 5*time.Minute, argv)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := serializeUnit(svc)
	tm, _ := serializeUnit(tmr)
	for _, want := range []string{
		"Type=oneshot",
		`ExecStart="/usr/local/bin/cryochamber" "sync" "--dir" "` + strings.ReplaceAll(strings.ReplaceAll(c.Dir, `"`, `\"`), "%", "%%") + `"`,
		"TimeoutStartSec=900s",
		"EnvironmentFile=",
	} {
		if !strings.Contains(string(s), want) {
			t.Errorf("service lacks %q:\n%s", want, s)
		}
	}
	for _, want := range []string{"OnActiveSec=1s", "OnUnitActiveSec=300s", "AccuracySec=1s", "Unit=" + SystemdSyncServiceName(c.ID), "WantedBy=timers.target"} {
		if !strings.Contains(string(tm), want) {
			t.Errorf("timer lacks %q:\n%s", want, tm)
		}
	}
	if strings.Contains(string(tm), "OnCalendar") || strings.Contains(string(tm), "Persistent") {
		t.Errorf("a repeating timer needs no calendar:\n%s", tm)
	}
	// A fraction of a second is rounded up: a poll never comes early.
	_, tmr, err = SystemdSyncUnits(c, 1500*time.Millisecond, argv)
	if err != nil {
		t.Fatal(err)
	}
	tm, _ = serializeUnit(tmr)
	if !strings.Contains(string(tm), "OnUnitActiveSec=2s") {
		t.Errorf("1.5s should round up to 2s:\n%s", tm)
	}
}

func TestSyncIntervalRefused(t *testing.T) {
	c := syncChamber(t)
	argv := []string{"/usr/local/bin/cryochamber", "sync"}
	for _, d := range []time.Duration{0, -time.Minute, 500 * time.Millisecond, 400 * 24 * time.Hour} {
		if _, _, err := SystemdSyncUnits(c, d, argv); err == nil {
			t.Errorf("interval %v: systemd units built, want an error", d)
		}
		if _, err := LaunchdSyncPlist(c, d, argv); err == nil {
			t.Errorf("interval %v: plist built, want an error", d)
		}
	}
	// A path systemd cannot carry is refused, never escaped.
	bad := c
	bad.Dir = "/tmp/a\nb"
	if _, _, err := SystemdSyncUnits(bad, time.Minute, []string{"/usr/bin/cryochamber", "sync", "--dir", bad.Dir}); err == nil {
		t.Error("a newline in the argv was accepted")
	}
	if _, err := LaunchdSyncPlist(bad, time.Minute, []string{"/usr/bin/cryochamber", "sync", "--dir", bad.Dir}); err == nil {
		t.Error("a newline in the plist was accepted")
	}
}

// systemd-analyze reads the units as the user manager would.
func TestSystemdSyncUnitsVerify(t *testing.T) {
	e2e.LookPath(t, "systemd-analyze", "systemd")
	c := syncChamber(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "cryochamber")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(c.EnvFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.EnvFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	svc, tmr, err := SystemdSyncUnits(c, 5*time.Minute, []string{bin, "sync", "--dir", c.Dir})
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for name, opts := range map[string][]*unit.UnitOption{SystemdSyncServiceName(c.ID): svc, SystemdSyncTimerName(c.ID): tmr} {
		data, _ := serializeUnit(opts)
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	runtime := t.TempDir()
	cmd := exec.Command("systemd-analyze", append([]string{"verify", "--user"}, files...)...)
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+runtime, "SYSTEMD_LOG_LEVEL=warning")
	if out, err := cmd.CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// The plist is well formed (plistutil converts it to binary and back) and carries the interval.
func TestLaunchdSyncPlist(t *testing.T) {
	c := syncChamber(t)
	data, err := LaunchdSyncPlist(c, 5*time.Minute, []string{"/usr/local/bin/cryochamber", "sync", "--dir", c.Dir})
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	for _, want := range []string{
		`<key>Label</key>\s*<string>` + regexp.QuoteMeta(LaunchdSyncLabel(c.ID)) + `</string>`,
		`<key>StartInterval</key>\s*<integer>300</integer>`,
		`<key>RunAtLoad</key>\s*<true/>`,
		`<string>[^<]*garden &amp; &lt;co&gt; &#34;x&#34; 100%</string>`,
		`<key>EnvironmentVariables</key>`,
	} {
		if !regexp.MustCompile(want).MatchString(s) {
			t.Errorf("plist lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "StartCalendarInterval") || strings.Contains(s, "WatchPaths") {
		t.Errorf("the sync agent is neither a calendar nor a watcher:\n%s", s)
	}
	e2e.LookPath(t, "plistutil", "libplist-utils")
	dir := t.TempDir()
	xml, bin, back := filepath.Join(dir, "a.plist"), filepath.Join(dir, "a.bin"), filepath.Join(dir, "b.plist")
	if err := os.WriteFile(xml, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"-i", xml, "-o", bin, "-f", "bin"}, {"-i", bin, "-o", back, "-f", "xml"}} {
		if out, err := exec.Command("plistutil", args...).CombinedOutput(); err != nil {
			t.Fatalf("plistutil %v: %v\n%s", args, err, out)
		}
	}
	got, _ := os.ReadFile(back)
	if !strings.Contains(string(got), "<key>StartInterval</key>") {
		t.Errorf("round trip lost StartInterval:\n%s", got)
	}
}

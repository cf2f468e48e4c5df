package chamber

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/fallback"
	"github.com/cryochamber/cryochamber/timer"
)

// syncFixture is a started chamber's private state (state, env file, start's secrets) and a
// Sync on it, run from a process whose environment is environ.
func syncFixture(t *testing.T, environ []string, captured, secrets, syncSecrets []string) *Sync {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, "chamber")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	env := &Env{Now: func() time.Time { return t0 }, Local: time.UTC, StateDir: filepath.Join(base, "state"),
		Environ: environ, Stdout: io.Discard, Stderr: io.Discard}
	s, err := storeFor(env, chamberID(dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ensure(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(s.path(syncDir), 0o700); err != nil {
		t.Fatal(err)
	}
	st := &State{Chamber: dir, ID: chamberID(dir), Phase: PhaseArmed}
	data, err := st.marshal(t0)
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{stateName: data} {
		if err := s.write(name, body, nil); err != nil {
			t.Fatal(err)
		}
	}
	for name, vars := range map[string][]string{EnvFileName: captured, SecretsFile: secrets, syncSecretsName: syncSecrets} {
		data, err := timer.FormatEnvFile(vars)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.write(name, data, nil); err != nil {
			t.Fatal(err)
		}
	}
	c, err := OpenSync(env, dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Sync and alert delivery rank a secret's sources in one order (issue 24): what was captured
// outside the chamber wins over the environment of the process that runs (a timer's, or the
// shell of an operator who exported an old value); among the captures, `sync --install`'s own
// wins over start's. Before, sync took this process's environment first and alert delivery
// last, so the same SMTP password could be two values.
func TestSecretRankingSyncAgreesWithAlerts(t *testing.T) {
	const k = "CRYO_SMTP_PW"
	ctx := context.Background()
	cases := []struct {
		name                               string
		environ, captured, secrets, synced []string
		want                               string
	}{
		{"start's capture over the environment", []string{k + "=from-shell"}, nil, []string{k + "=captured"}, nil, "captured"},
		{"the environment when nothing was captured", []string{k + "=from-shell"}, nil, nil, nil, "from-shell"},
		{"sync --install's capture over start's", []string{k + "=from-shell"}, nil, []string{k + "=at-start"}, []string{k + "=at-install"}, "at-install"},
		{"the environment file over the environment", []string{k + "=from-shell"}, []string{k + "=in-env-file"}, nil, nil, "in-env-file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := syncFixture(t, tc.environ, tc.captured, tc.secrets, tc.synced)
			got, err := c.Secret("the SMTP password", k, nil)(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("sync's secret = %q, want %q", got, tc.want)
			}
			// Alert delivery reads start's capture only (sync/secrets is the channels'): where
			// that is the source, it must give what sync gives.
			if tc.synced == nil {
				alert, err := fallback.PasswordFrom(ctx, c.r.alertEnv(), k, nil)
				if err != nil {
					t.Fatal(err)
				}
				if alert != got {
					t.Errorf("alert delivery's secret = %q, sync's %q: they disagree", alert, got)
				}
			}
		})
	}
}

// A password_command runs with the same environment as alert delivery's: the captured PATH wins
// over this process's (a sync the timer runs and one from the shell find the same program).
func TestSecretCommandRunsWithTheCapturedPath(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "pw"), []byte("#!/bin/sh\necho captured-path\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := syncFixture(t, []string{"PATH=/nonexistent"}, []string{"PATH=" + bin + ":/usr/bin:/bin"}, nil, nil)
	got, err := c.Secret("the IMAP password", "", []string{"pw"})(context.Background())
	if err != nil || got != "captured-path" {
		t.Fatalf("Secret with password_command = %q, %v; want the program on the captured PATH", got, err)
	}
	alert, err := fallback.PasswordFrom(context.Background(), c.r.alertEnv(), "", []string{"pw"})
	if err != nil || alert != got {
		t.Errorf("alert delivery ran %q (%v), sync %q", alert, err, got)
	}
}

// The output of a sync agent armed by an earlier `sync --install` (in sync/launchd.out until it
// is armed again) is rotated like the wake's, by the next command that holds the lock.
func TestOldSyncOutputRotated(t *testing.T) {
	r := testRunner(t, "agent = \"/bin/true\"\n", t0)
	if err := os.MkdirAll(r.store.path(syncDir), 0o700); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, maxJobOutput+1)
	for _, name := range []string{launchdOut, syncLaunchdOut, syncLaunchdErr} {
		if err := os.WriteFile(r.store.path(name), big, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r.removeStale()
	for _, name := range []string{launchdOut, syncLaunchdOut, syncLaunchdErr} {
		if _, err := os.Stat(r.store.path(name + ".1")); err != nil {
			t.Errorf("%s was not rotated: %v", name, err)
		}
	}
}

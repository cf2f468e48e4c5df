// Package e2e is how a test says that a real component it needs cannot run on this machine: a
// systemd user manager, an SMTP or IMAP server, an agent CLI, plistutil, systemd-analyze, a
// browser. By default such a test skips, saying what is missing and how to get it, so that a
// contributor without root or without the packages still runs the rest of the suite. Under
// CRYO_REQUIRE_E2E=1 (CI sets it) the same call fails the test instead: where the real
// component should be, a skipped end-to-end test is not a pass.
//
// Use it only for missing real components. A component that is present but misbehaves (a user
// manager that does not start, a server that does not answer) is a failure, never a skip.
//
// The package imports nothing of cryochamber, so any test package can use it.
package e2e

import (
	"os"
	"os/exec"
	"testing"
)

// RequireEnv is the variable that turns these skips into failures.
const RequireEnv = "CRYO_REQUIRE_E2E"

// Required reports whether CRYO_REQUIRE_E2E asks for every real component (any value but ""
// and "0").
func Required() bool {
	v := os.Getenv(RequireEnv)
	return v != "" && v != "0"
}

// Skipf skips t because a real component cannot run here; format says what is missing and how
// to get it. Under CRYO_REQUIRE_E2E it fails t instead. Either way the test stops.
func Skipf(t testing.TB, format string, args ...any) {
	t.Helper()
	if Required() {
		t.Fatalf("%s is set, and a real component is missing: "+format, append([]any{RequireEnv}, args...)...)
		return
	}
	t.Skipf(format, args...)
}

// SkipPart records a part of t that cannot run here, because a real component is missing, as a
// skipped subtest named part (failed under CRYO_REQUIRE_E2E), so that the summary of the run
// lists it with its reason; t itself goes on with the parts that do not need the component.
func SkipPart(t *testing.T, part, format string, args ...any) {
	t.Helper()
	t.Run(part, func(t *testing.T) {
		t.Helper()
		Skipf(t, format, args...)
	})
}

// LookPath finds prog on PATH, or skips t (fails it under CRYO_REQUIRE_E2E), naming the Debian
// package that provides it.
func LookPath(t testing.TB, prog, debianPackage string) string {
	t.Helper()
	p, err := exec.LookPath(prog)
	if err != nil {
		Skipf(t, "%s is not installed (Debian package %s): %v", prog, debianPackage, err)
	}
	return p
}

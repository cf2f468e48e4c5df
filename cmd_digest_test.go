package main

import (
	"strings"
	"testing"
)

// digest takes one chamber or all of them, not both; a directory that is no chamber says so.
func TestDigestUsage(t *testing.T) {
	code, _, stderr := runCLI(t, "digest", "--all", "--dir", t.TempDir())
	if code != 2 || !strings.Contains(stderr, "cryochamber: give --dir or --all, not both") || !strings.Contains(stderr, "hint: ") {
		t.Fatalf("digest --all --dir: exit %d\n%s", code, stderr)
	}
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	code, _, stderr = runCLI(t, "digest", "--dir", t.TempDir())
	if code == 0 || !strings.HasPrefix(stderr, "cryochamber: ") {
		t.Fatalf("digest of a directory that is no chamber: exit %d\n%s", code, stderr)
	}
}

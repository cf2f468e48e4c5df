package main

import (
	"strings"
	"testing"
)

// The things a newcomer tripped on (issue 24), each where the behaviour changed.

func TestHistoryRangeWords(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"yesterday", "today", "-3d", "2026-03-31"} {
		_, _, stderr := runCLI(t, "history", "--dir", dir, "--since", v, "--until", v)
		if strings.Contains(stderr, "--since") || strings.Contains(stderr, "--until") {
			t.Errorf("history --since/--until %s refused:\n%s", v, stderr)
		}
	}
	code, _, stderr := runCLI(t, "history", "--dir", dir, "--since", "+0d")
	if code != exitUsage || !strings.Contains(stderr, "history looks back") || strings.Contains(stderr[strings.Index(stderr, "hint:")+1:], "+0d") {
		t.Errorf("--since +0d: exit %d, want 2, a reason, and no hint suggesting +0d:\n%s", code, stderr)
	}
}

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// recorder is a testing.TB that records how Skipf ended the test.
type recorder struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped, r.msg = true, fmt.Sprintf(format, args...)
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
}

func TestSkipf(t *testing.T) {
	for _, c := range []struct {
		env           string
		skip, fail    bool
		wantInMessage string
	}{
		{"", true, false, "frob is missing"},
		{"0", true, false, "frob is missing"},
		{"1", false, true, "CRYO_REQUIRE_E2E is set, and a real component is missing: frob is missing"},
		{"yes", false, true, "CRYO_REQUIRE_E2E is set"},
	} {
		t.Setenv(RequireEnv, c.env)
		r := &recorder{TB: t}
		Skipf(r, "%s is missing", "frob")
		if r.skipped != c.skip || r.failed != c.fail || !strings.Contains(r.msg, c.wantInMessage) {
			t.Errorf("%s=%q: skipped %v failed %v %q; want skipped %v failed %v with %q",
				RequireEnv, c.env, r.skipped, r.failed, r.msg, c.skip, c.fail, c.wantInMessage)
		}
	}
}

func TestLookPath(t *testing.T) {
	t.Setenv(RequireEnv, "1")
	if p := LookPath(t, "sh", "dash"); p == "" {
		t.Fatal("sh not found")
	}
	r := &recorder{TB: t}
	LookPath(r, "cryo-no-such-program", "nothing")
	if !r.failed || !strings.Contains(r.msg, "cryo-no-such-program is not installed (Debian package nothing)") {
		t.Fatalf("failed %v %q", r.failed, r.msg)
	}
}

// TestSkipPart runs SkipPart in a child test binary (a failing subtest cannot be observed
// otherwise) and reads its verdict: the part is a skipped subtest, the test goes on and passes;
// under CRYO_REQUIRE_E2E the part fails, and so does the test.
func TestSkipPart(t *testing.T) {
	if os.Getenv("E2E_SKIPPART_CHILD") == "1" {
		SkipPart(t, "email", "no SMTP server")
		t.Log("the rest ran")
		return
	}
	for _, c := range []struct {
		require string
		want    []string
	}{
		{"", []string{"--- SKIP: TestSkipPart/email", "no SMTP server", "the rest ran", "--- PASS: TestSkipPart "}},
		{"1", []string{"--- FAIL: TestSkipPart/email", "CRYO_REQUIRE_E2E is set, and a real component is missing: no SMTP server", "the rest ran", "--- FAIL: TestSkipPart "}},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSkipPart$", "-test.v")
		cmd.Env = append(os.Environ(), "E2E_SKIPPART_CHILD=1", RequireEnv+"="+c.require)
		out, _ := cmd.CombinedOutput()
		for _, w := range c.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%s=%q: output lacks %q:\n%s", RequireEnv, c.require, w, out)
			}
		}
	}
}

package launchctltest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const agent = `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
	<key>Label</key>
	<string>dev.example.job</string>
	<key>ProgramArguments</key>
	<array>
		<string>/usr/bin/true</string>
		<string>a &amp; b</string>
	</array>
	<key>StartCalendarInterval</key>
	<dict>
		<key>Month</key><integer>3</integer>
		<key>Day</key><integer>8</integer>
		<key>Hour</key><integer>9</integer>
		<key>Minute</key><integer>0</integer>
	</dict>
	<key>WatchPaths</key>
	<array><string>/Users/me/inbox</string></array>
	<key>RunAtLoad</key>
	<true/>
</dict>
</plist>
`

// call runs the stand-in and returns its exit status and output.
func call(t *testing.T, f *Fake, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(f.Path, args...)
	cmd.Env = env
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errOut.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errOut.String()
	}
	t.Fatal(err)
	return 0, "", ""
}

func writePlist(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "dev.example.job.plist")
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAnswers checks the stand-in against launchctl's real answers, one step at a time.
func TestAnswers(t *testing.T) {
	f := New(t)
	env := f.Env()
	path := writePlist(t, agent, 0o644)
	const target = "gui/501/dev.example.job"
	notFound := "Bad request.\nCould not find service \"dev.example.job\" in domain for user gui: 501\n"
	ioError := "Bootstrap failed: 5: Input/output error\nTry re-running the command as root for richer errors.\n"
	steps := []struct {
		name   string
		env    []string
		args   []string
		code   int
		stdout string // a substring
		stderr string // exact
	}{
		{"print unknown", env, []string{"print", target}, 113, "", notFound},
		{"kickstart unknown", env, []string{"kickstart", target}, 113, "", notFound},
		{"bootout unknown", env, []string{"bootout", target}, 113, "", "Boot-out failed: 113: Could not find specified service\n"},
		{"bootout unknown, older release", append(f.Env(), EnvESRCH+"=1"), []string{"bootout", target}, 3, "", "Boot-out failed: 3: No such process\n"},
		{"bootstrap", env, []string{"bootstrap", "gui/501", path}, 0, "", ""},
		{"bootstrap again", env, []string{"bootstrap", "gui/501", path}, 5, "", ioError},
		{"print", env, []string{"print", target}, 0, "\tstate = not running\n", ""},
		{"print calendar", env, []string{"print", target}, 0, "\t\t\tstream = com.apple.launchd.calendarinterval\n\t\t\tmonitor = com.apple.UserEventAgent-Aqua\n\t\t\tdescriptor = {\n\t\t\t\t\"Minute\" => 0\n\t\t\t\t\"Hour\" => 9\n\t\t\t\t\"Day\" => 8\n\t\t\t\t\"Month\" => 3\n\t\t\t}\n", ""},
		{"print arguments", env, []string{"print", target}, 0, "\targuments = {\n\t\t/usr/bin/true\n\t\ta & b\n\t}\n", ""},
		{"print watch", env, []string{"print", target}, 0, "\t\t\t\t\"WatchPaths\" => [\n\t\t\t\t\t0 = \"/Users/me/inbox\"\n\t\t\t\t]\n", ""},
		{"kickstart", env, []string{"kickstart", target}, 0, "", ""},
		{"bootout, lingering", append(f.Env(), EnvLinger+"=1"), []string{"bootout", target}, 0, "", ""},
		{"print after bootout", env, []string{"print", target}, 113, "", notFound},
		{"bootstrap while lingering", env, []string{"bootstrap", "gui/501", path}, 5, "", ioError},
		{"bootstrap after", env, []string{"bootstrap", "gui/501", path}, 0, "", ""},
		{"not a service target", env, []string{"print", "system/dev.example.job"}, 64, "", "Unrecognized target specifier.\n"},
		{"unknown subcommand", env, []string{"load", path}, 64, "", "Unrecognized subcommand: load\n"},
		{"no state dir", []string{}, []string{"print", target}, 70, "", "stand-in launchctl: $CRYO_FAKE_LAUNCHCTL_DIR is not set\n"},
	}
	for _, s := range steps {
		code, out, errOut := call(t, f, s.env, s.args...)
		if code != s.code || !strings.Contains(out, s.stdout) || errOut != s.stderr {
			t.Fatalf("%s: launchctl %s = %d\nstdout %q\nstderr %q\nwant %d, stdout with %q, stderr %q",
				s.name, strings.Join(s.args, " "), code, out, errOut, s.code, s.stdout, s.stderr)
		}
	}
	j, ok := f.Job(target)
	if !ok || j.Runs != 1 || j.Label != "dev.example.job" || !slices.Equal(j.Arguments, []string{"/usr/bin/true", "a & b"}) {
		t.Errorf("job = %+v, %v", j, ok)
	}
	// Every call was recorded, the one without a state directory excepted.
	if got := len(f.Calls()); got != len(steps)-1 {
		t.Errorf("%d calls recorded, want %d", got, len(steps)-1)
	}
}

func TestRunningJob(t *testing.T) {
	f := New(t)
	path := writePlist(t, agent, 0o644)
	const target = "gui/501/dev.example.job"
	if code, _, errOut := call(t, f, f.Env(), "bootstrap", "gui/501", path); code != 0 {
		t.Fatalf("bootstrap: %d %s", code, errOut)
	}
	f.SetRunning(target, 4242)
	code, out, _ := call(t, f, f.Env(), "print", target)
	if code != 0 || !strings.Contains(out, "\tstate = running\n") || !strings.Contains(out, "\tpid = 4242\n") || !strings.Contains(out, "\tactive count = 1\n") {
		t.Errorf("print of a running job: %d\n%s", code, out)
	}
	// kickstart without -k leaves a running job alone; with -k it kills it first.
	call(t, f, f.Env(), "kickstart", target)
	if s := f.State(); len(s.Killed) != 0 || len(s.Kicked) != 0 {
		t.Errorf("kickstart of a running job: killed %q, kicked %q", s.Killed, s.Kicked)
	}
	call(t, f, f.Env(), "kickstart", "-k", target)
	if s := f.State(); !slices.Equal(s.Killed, []string{target}) || !slices.Equal(s.Kicked, []string{target}) {
		t.Errorf("kickstart -k: killed %q, kicked %q", s.Killed, s.Kicked)
	}
	f.SetRunning(target, 1)
	call(t, f, f.Env(), "bootout", target)
	if s := f.State(); len(s.Killed) != 2 || len(s.Jobs) != 0 {
		t.Errorf("bootout of a running job: killed %q, jobs %v", s.Killed, s.Jobs)
	}
}

func TestBootstrapRefuses(t *testing.T) {
	f := New(t)
	ioError := "Bootstrap failed: 5: Input/output error\nTry re-running the command as root for richer errors.\n"
	for _, tt := range []struct {
		name    string
		content string
		mode    os.FileMode
		want    int
		stderr  string
	}{
		{"malformed", "<plist><dict><key>Label</key>", 0o644, 5, ioError},
		{"no label", strings.Replace(agent, "<key>Label</key>", "<key>Name</key>", 1), 0o644, 5, ioError},
		{"world-writable", agent, 0o666, 5, ioError},
		{"weekday", strings.Replace(agent, "<key>Month</key>", "<key>Weekday</key>", 1), 0o644, 0, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := writePlist(t, tt.content, tt.mode)
			code, _, errOut := call(t, f, f.Env(), "bootstrap", "gui/501", path)
			if code != tt.want || errOut != tt.stderr {
				t.Errorf("bootstrap = %d %q, want %d %q", code, errOut, tt.want, tt.stderr)
			}
		})
	}
	f.Disable("gui/502/dev.example.job")
	path := writePlist(t, agent, 0o644)
	if code, _, errOut := call(t, f, f.Env(), "bootstrap", "gui/502", path); code != 119 || errOut != "Bootstrap failed: 119: Service is disabled\n" {
		t.Errorf("bootstrap of a disabled job = %d %q", code, errOut)
	}
}

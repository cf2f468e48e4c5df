package launchctltest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cryochamber/cryochamber/timer/launchctltest/fakestate"
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
		{"kickstart unknown", env, []string{"kickstart", target}, 113, "", "Could not find service \"dev.example.job\" in domain for user gui: 501\n"},
		{"print domain", env, []string{"print", "gui/501"}, 0, "gui/501 = {\n\ttype = login\n", ""},
		{"print-disabled", env, []string{"print-disabled", "gui/501"}, 0, "disabled services = {\n\t\"com.docker.helper\" => enabled\n}\nlogin item associations = {\n", ""},
		{"bootout unknown", env, []string{"bootout", target}, 113, "", "Boot-out failed: 113: Could not find specified service\n"},
		{"bootout unknown, macOS 26", append(f.Env(), EnvESRCH+"=1"), []string{"bootout", target}, 3, "", "Boot-out failed: 3: No such process\n"},
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
		{"bootout in progress", append(f.Env(), EnvInProgress+"=2"), []string{"bootout", target}, 36, "", "Boot-out failed: 36: Operation now in progress\n"},
		{"still shown", env, []string{"print", target}, 0, "\tstate = not running\n", ""},
		{"bootstrap while stopping", env, []string{"bootstrap", "gui/501", path}, 5, "", ioError},
		{"shown a last time", env, []string{"print", target}, 0, "\tstate = not running\n", ""},
		{"gone", env, []string{"print", target}, 113, "", notFound},
		{"bootstrap at last", env, []string{"bootstrap", "gui/501", path}, 0, "", ""},
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
	path := writePlist(t, agent, 0o644)
	f.Disable("gui/502/dev.example.job", 119)
	if code, _, errOut := call(t, f, f.Env(), "bootstrap", "gui/502", path); code != 119 || errOut != path+": Service is disabled\nBootstrap failed: 119: Service is disabled\n" {
		t.Errorf("bootstrap of a disabled job = %d %q", code, errOut)
	}
	f.Disable("gui/502/dev.example.job", 5)
	if code, _, errOut := call(t, f, f.Env(), "bootstrap", "gui/502", path); code != 5 || errOut != ioError {
		t.Errorf("bootstrap of a disabled job on a Mac that answers 5 = %d %q", code, errOut)
	}
	for _, layout := range []string{"modern", "legacy"} {
		f.SetDisabledLayout(layout)
		want := map[string]string{"modern": "\t\"dev.example.job\" => disabled\n", "legacy": "\t\"dev.example.job\" => true\n"}[layout]
		if code, out, _ := call(t, f, f.Env(), "print-disabled", "gui/502"); code != 0 || !strings.Contains(out, want) {
			t.Errorf("print-disabled (%s) = %d\n%s", layout, code, out)
		}
		if _, out, _ := call(t, f, f.Env(), "print-disabled", "gui/501"); strings.Contains(out, "dev.example.job") {
			t.Errorf("print-disabled of another domain lists the label:\n%s", out)
		}
	}
	// A value of the wrong type is refused as launchd refuses it (launchd.plist(5)).
	bad := strings.Replace(agent, "<key>RunAtLoad</key>\n\t<true/>", "<key>RunAtLoad</key>\n\t<string>yes</string>", 1)
	if code, _, errOut := call(t, f, f.Env(), "bootstrap", "gui/501", writePlist(t, bad, 0o644)); code != 5 || errOut != ioError {
		t.Errorf("bootstrap of RunAtLoad=\"yes\" = %d %q", code, errOut)
	}
}

// TestNoGUI replays what launchctl answers when nobody is logged in to the Mac's desktop.
func TestNoGUI(t *testing.T) {
	f := New(t)
	path := writePlist(t, agent, 0o644)
	const target = "gui/501/dev.example.job"
	for _, tt := range []struct {
		mode, verb string
		args       []string
		code       int
		stderr     string
	}{
		{"112", "print domain", []string{"print", "gui/501"}, 112, "Bad request.\nCould not find domain for user gui: 501\n"},
		{"112", "print service", []string{"print", target}, 112, "Bad request.\nCould not find domain for user gui: 501\n"},
		{"112", "bootstrap", []string{"bootstrap", "gui/501", path}, 112, "Could not find domain for user gui: 501\n"},
		{"125", "print domain", []string{"print", "gui/501"}, 125, "Domain does not support specified action\n"},
		{"125", "bootstrap", []string{"bootstrap", "gui/501", path}, 125, "Bootstrap failed: 125: Domain does not support specified action\n"},
		{"125", "kickstart", []string{"kickstart", target}, 125, "Could not kickstart service \"dev.example.job\": 125: Domain does not support specified action\n"},
		{"5", "bootstrap", []string{"bootstrap", "gui/501", path}, 5, "Bootstrap failed: 5: Input/output error\nTry re-running the command as root for richer errors.\n"},
		{"5", "print domain", []string{"print", "gui/501"}, 125, "Domain does not support specified action\n"},
	} {
		f.SetNoGUI(tt.mode)
		code, _, errOut := call(t, f, f.Env(), tt.args...)
		if code != tt.code || errOut != tt.stderr {
			t.Errorf("no GUI (%s), %s = %d %q, want %d %q", tt.mode, tt.verb, code, errOut, tt.code, tt.stderr)
		}
	}
	if len(f.Loaded()) != 0 {
		t.Errorf("something was loaded without a GUI domain: %q", f.Loaded())
	}
	f.SetNoGUI("")
	if code, _, errOut := call(t, f, f.Env(), "bootstrap", "gui/501", path); code != 0 {
		t.Errorf("bootstrap after logging in = %d %q", code, errOut)
	}
}

// TestRepliesCiteTheirSource: every answer the stand-in replays says where it was seen and on
// which macOS, and is used.
func TestRepliesCiteTheirSource(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("launchctl", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range fakestate.ReplyNames() {
		r := fakestate.Replies[name]
		if !strings.Contains(r.Source, "https://github.com/") && !strings.Contains(r.Source, "commit 7bc7dcc") {
			t.Errorf("%s: source %q is not a public report", name, r.Source)
		}
		if r.MacOS == "" || r.Note == "" {
			t.Errorf("%s: no macOS release or note", name)
		}
		if r.Code != 0 && !strings.Contains(r.Stderr, strconv.Itoa(r.Code)) && !strings.Contains(r.Note, "status") && !strings.Contains(r.Source, strconv.Itoa(r.Code)) {
			t.Errorf("%s: exit status %d is neither in its text nor in its source", name, r.Code)
		}
		// Used by the stand-in, by name or by the prefix its name is built from.
		prefix := name
		if i := strings.LastIndexByte(name, '-'); i > 0 && strings.Contains(name, "no-domain") {
			prefix = name[:i+1]
		}
		if !strings.Contains(string(src), `"`+name+`"`) && !strings.Contains(string(src), `"`+prefix+`"`) {
			t.Errorf("reply %s is never replayed", name)
		}
	}
}

package channel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// childVar makes this test binary a sync that kills itself (SIGKILL, so nothing deferred
// runs) at a checkpoint: the crash tests' way to stop a sync between two steps.
const childVar = "CRYO_SYNC_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childVar); spec != "" {
		os.Exit(runChild(spec))
	}
	os.Exit(m.Run())
}

// childSpec is the sync a child runs.
type childSpec struct {
	Dir, ID, State string
	Now            time.Time
	KillAt         string
	Email          *EmailConfig
	IMAPPassword   string
	GitHub         *GitHubConfig
	GitHubToken    string
	Zulip          *ZulipConfig
	ZulipKey       string
}

func runChild(spec string) int {
	var s childSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 3
	}
	var chans []Channel
	if s.Email != nil {
		s.Email.IMAP.Password = secret(s.IMAPPassword)
		ch, err := NewEmail(*s.Email)
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 3
		}
		chans = append(chans, ch)
	}
	if s.GitHub != nil {
		s.GitHub.Token = secret(s.GitHubToken)
		ch, err := NewGitHub(*s.GitHub)
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 3
		}
		chans = append(chans, ch)
	}
	if s.Zulip != nil {
		s.Zulip.APIKey = secret(s.ZulipKey)
		ch, err := NewZulip(*s.Zulip)
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 3
		}
		chans = append(chans, ch)
	}
	_, err := Run(context.Background(), Options{Dir: s.Dir, ID: s.ID, StateDir: s.State, Channels: chans,
		Now: func() time.Time { return s.Now },
		Checkpoint: func(p string) {
			if p == s.KillAt {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
		}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// killedAt runs the sync of spec in a child process and checks that it died of SIGKILL at its
// checkpoint.
func killedAt(t *testing.T, spec childSpec) {
	t.Helper()
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, "-test.run=^$")
	cmd.Env = append(os.Environ(), childVar+"="+string(data))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("the child sync was not killed at %s: %v\n%s", spec.KillAt, err, out)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the child sync ended with %v, not SIGKILL at %s\n%s", err, spec.KillAt, out)
	}
}

package main

import (
	"errors"
	"os/user"
	"testing"
)

// The static build's os/user reads /etc/passwd only: a user who is not there (LDAP, sssd) is
// named by the environment, as a login or systemd's user manager sets it.
func TestUserNameWithoutNSS(t *testing.T) {
	notListed := func() (*user.User, error) {
		// os/user without cgo (Go 1.26), for a uid /etc/passwd does not list, $HOME unset.
		return nil, errors.New("user: Current requires cgo or $HOME set in environment")
	}
	listed := func() (*user.User, error) { return &user.User{Uid: "4242", Username: "alice"}, nil }
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, c := range []struct {
		what    string
		current func() (*user.User, error)
		getenv  func(string) string
		name    string
		known   bool
	}{
		{"in /etc/passwd: its name, whatever $USER says", listed, env("USER", "mallory"), "alice", true},
		{"not listed, $USER without $HOME", notListed, env("USER", "bob", "LOGNAME", "other"), "bob", true},
		{"not listed, $LOGNAME only", notListed, env("LOGNAME", "carol"), "carol", true},
		{"not listed, no name in the environment", notListed, env("HOME", "/home/x"), "4242", false},
	} {
		name, known := userName(4242, c.current, c.getenv)
		if name != c.name || known != c.known {
			t.Errorf("%s: %q, %v; want %q, %v", c.what, name, known, c.name, c.known)
		}
	}
}

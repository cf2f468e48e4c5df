package main

import (
	"os/user"
	"strconv"
)

// userName is the name of the user this process runs as: the systemd linger file is named by it
// (/var/lib/systemd/linger/NAME) and Slurm's squeue is asked for its jobs. The binary is static,
// built without cgo (Makefile, BUILD_ENV), so os/user cannot ask NSS (LDAP, sssd, systemd-homed):
// it reads /etc/passwd, and for a user not listed there it takes $USER, but only when $HOME is
// set as well. Such a user's name is $USER, else $LOGNAME (what a login and systemd's user
// manager set), whether or not $HOME is. When none of these names the user, known is false and
// the name is the uid, as it was when user.Current failed with cgo.
func userName(uid int, current func() (*user.User, error), getenv func(string) string) (name string, known bool) {
	if u, err := current(); err == nil && u.Username != "" {
		return u.Username, true
	}
	for _, v := range []string{"USER", "LOGNAME"} {
		if s := getenv(v); s != "" {
			return s, true
		}
	}
	return strconv.Itoa(uid), false
}

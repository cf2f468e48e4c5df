// Package envvars reads an environment list (NAME=value entries, as os.Environ returns and
// exec.Cmd.Env takes) the one way every package does: the last entry of a name wins, as it does
// for os/exec. It never reads or changes the process's own environment, and knows nothing of
// what a variable means.
package envvars

import "strings"

// Lookup returns the value of the last entry for name in env.
func Lookup(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

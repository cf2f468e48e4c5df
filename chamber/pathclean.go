package chamber

import (
	"path/filepath"
	"strconv"
	"strings"
)

// The PATH that start and reload capture for the agent and the timers keeps only absolute
// entries. A relative entry (".", "./node_modules/.bin", "bin") or an empty one (which means
// ".") is looked up in the working directory, and every session's working directory is the
// chamber, which the agent writes: a fake `node` it leaves there would be run, outside any
// sandbox, by the next session's `#!/usr/bin/env node` launcher.

// cleanedPath is a PATH with its relative and empty entries taken out.
type cleanedPath struct {
	kept    string
	dropped []string // as written, in order; "" for an empty entry
}

// cleanPath drops every entry of path that is not absolute.
func cleanPath(path string) cleanedPath {
	var c cleanedPath
	if path == "" {
		return c // no PATH at all: nothing to drop
	}
	var kept []string
	for _, e := range strings.Split(path, string(filepath.ListSeparator)) {
		if filepath.IsAbs(e) {
			kept = append(kept, e)
		} else {
			c.dropped = append(c.dropped, e)
		}
	}
	c.kept = strings.Join(kept, string(filepath.ListSeparator))
	return c
}

// warning says which entries were dropped ("" when none).
func (c cleanedPath) warning() string {
	if len(c.dropped) == 0 {
		return ""
	}
	q := make([]string, len(c.dropped))
	for i, e := range c.dropped {
		q[i] = strconv.Quote(e)
	}
	return "PATH entries " + strings.Join(q, ", ") + " are not absolute: left out of the PATH captured for the agent and the timers (a relative or empty entry finds programs in the chamber, which the agent can write)"
}

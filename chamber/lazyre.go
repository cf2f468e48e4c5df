package chamber

import (
	"regexp"
	"sync"
)

// lazyRE is a pattern compiled at its first use. A package-level regexp.MustCompile runs at
// every start of the program, for every command (`--version` included), whether or not the
// pattern is ever used (issue 28: startup cost).
func lazyRE(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

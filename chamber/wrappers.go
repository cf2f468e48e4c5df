package chamber

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/cryochamber/cryochamber/marker"
)

// The pins of the programs inside the chamber follow what an agent line really runs. An
// operator's line often puts a wrapper in front of the program (`env VAR=1 python3 agent.py`,
// `timeout 600 sh agent.sh`, `nice -n 5 ./agent.sh`), or hands an interpreter its code in
// another way than a file argument (`sh -c ./agent.sh`, `python3 -m mod`). Each is peeled
// here, so that the program it runs, and every argument of an interpreter that names a file
// in the chamber, is pinned like the agent line's own program. With the session's sandbox
// this is a change detector (the operator is told), not the wall.

// wrapper is how to skip one wrapper program's options to the command it runs.
type wrapper struct {
	argShort    string   // short options that take an argument (-n 5, -n5)
	argLong     []string // long options that take one (--adjustment 5, --adjustment=5)
	positional  int      // words before the command that are not options (timeout's DURATION)
	assignments bool     // NAME=VALUE words before the command (env)
}

// wrappers are the programs that run the rest of their command line after their own options.
var wrappers = map[string]wrapper{
	"env":     {argShort: "uCS", argLong: []string{"unset", "chdir", "split-string"}, assignments: true},
	"nice":    {argShort: "n", argLong: []string{"adjustment"}},
	"timeout": {argShort: "ks", argLong: []string{"kill-after", "signal"}, positional: 1},
	"stdbuf":  {argShort: "ioe", argLong: []string{"input", "output", "error"}},
	"nohup":   {},
	"setsid":  {},
	"ionice":  {argShort: "cnpPu", argLong: []string{"class", "classdata", "pid", "pgid", "uid"}},
	"exec":    {argShort: "a"}, // a shell's builtin, in `sh -c "exec ..."`
}

// maxPeel bounds how deep wrappers and `sh -c` strings are followed (env env env ...).
const maxPeel = 8

// peelWrappers returns the command a line of wrappers runs: words itself when words[0] is
// not a wrapper, nil when the wrappers run nothing (a bare `env` prints the environment).
func peelWrappers(words []string) []string {
	for depth := 0; depth < maxPeel && len(words) > 0; depth++ {
		w, ok := wrappers[filepath.Base(words[0])]
		if !ok {
			return words
		}
		words = peelOne(w, words[1:])
	}
	return words
}

// wrapped is the program an agent command's wrappers run when it is named without a path
// (`env mytool`), "" otherwise: Files has those named by a path.
func (c Command) wrapped() string {
	if c.Agent == nil {
		return ""
	}
	words := append(append([]string(nil), c.Agent.Command...), c.Agent.Args...)
	inner := peelWrappers(words)
	if len(inner) == 0 || len(inner) == len(words) || strings.ContainsAny(inner[0], "/{") {
		return ""
	}
	return inner[0]
}

// peelOne skips one wrapper's options, positional words and assignments.
func peelOne(w wrapper, args []string) []string {
	takes := func(long string) bool {
		for _, l := range w.argLong {
			if l == long {
				return true
			}
		}
		return false
	}
	// env -S "sh agent.sh": the string is split and stands for the words it holds.
	split := func(s string, rest []string) []string {
		words, err := marker.SplitCommand(s)
		if err != nil {
			return rest
		}
		return append(words, rest...)
	}
	i := 0
options:
	for i < len(args) {
		a := args[i]
		switch {
		case a == "--":
			i++
			break options
		case a == "-" && w.assignments: // `env -` is `env -i`
			i++
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a[2:], "=")
			i++
			if takes(name) && !hasVal && i < len(args) {
				val, hasVal = args[i], true
				i++
			}
			if name == "split-string" && hasVal {
				return peelOne(w, split(val, args[i:]))
			}
		case len(a) > 1 && a[0] == '-':
			i++
			for j := 1; j < len(a); j++ {
				if !strings.ContainsRune(w.argShort, rune(a[j])) {
					continue
				}
				val := a[j+1:]
				if val == "" && i < len(args) {
					val = args[i]
					i++
				}
				if a[j] == 'S' && w.assignments {
					return peelOne(w, split(val, args[i:]))
				}
				break
			}
		default:
			break options
		}
	}
	for n := 0; n < w.positional && i < len(args); n++ {
		i++
	}
	if w.assignments {
		for i < len(args) && isAssignment(args[i]) {
			i++
		}
	}
	return args[i:]
}

// isAssignment is a NAME=VALUE word as env reads it.
func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	return ok && name != "" && !strings.Contains(name, "/")
}

// interpreterName is an interpreter's name without its version ("python3.12" → "python"), or
// "" when prog is not an interpreter.
func interpreterName(prog string) string {
	n := strings.TrimRight(filepath.Base(prog), "0123456789.")
	if interpreters[n] {
		return n
	}
	return ""
}

// isShell is an interpreter that takes its code as a command line with -c.
func isShell(n string) bool {
	switch n {
	case "sh", "bash", "dash", "ksh", "zsh", "fish":
		return true
	}
	return false
}

// lineFiles are the words of a command line that may name a file it runs (see Command.Files):
// the program under the wrappers when it is a path (`env ./agent.sh`), and, for an
// interpreter, every word after it that is not a flag or a placeholder, the command line of a
// shell's -c (followed in turn), and the files a Python -m module may be (mod.py,
// mod/__init__.py, mod/__main__.py, from the working directory -m puts first on sys.path).
func lineFiles(words []string, depth int) []string {
	var out []string
	inner := peelWrappers(words)
	if len(inner) == 0 || depth > maxPeel {
		return nil
	}
	if len(inner) != len(words) || depth > 0 {
		if strings.Contains(inner[0], "/") && !strings.Contains(inner[0], "{") {
			out = append(out, inner[0]) // a program named by path under a wrapper or in sh -c
		}
	}
	name := interpreterName(inner[0])
	if name == "" {
		return out
	}
	args := inner[1:]
	for i := 0; i < len(args); i++ {
		w := args[i]
		switch {
		case isShell(name) && (w == "-c" || w == "--command" || len(w) > 1 && w[0] == '-' && w[1] != '-' && strings.HasSuffix(w, "c")):
			if i+1 < len(args) {
				if sub, err := marker.SplitCommand(args[i+1]); err == nil && len(sub) > 0 {
					out = append(out, lineFiles(sub, depth+1)...)
				}
			}
			return out
		case name == "python" && (w == "-m" || len(w) > 1 && w[0] == '-' && w[1] != '-' && strings.HasSuffix(w, "m")):
			if i+1 < len(args) {
				out = append(out, moduleFiles(args[i+1])...)
			}
			return out
		case w == "-c" || w == "-e" || w == "-m" || w == "--eval" || w == "--command":
			return out // inline code
		case strings.HasPrefix(w, "-") || strings.Contains(w, "{"):
		default:
			out = append(out, w)
		}
	}
	return out
}

// moduleFiles are the files `python -m mod` may run from the working directory, relative to
// it: mod.py, or the package mod with its __init__.py and __main__.py (and each parent
// package's __init__.py for a dotted name).
func moduleFiles(mod string) []string {
	if mod == "" || strings.ContainsAny(mod, "/{") {
		return nil
	}
	parts := strings.Split(mod, ".")
	var out []string
	for i := 1; i < len(parts); i++ {
		out = append(out, filepath.Join(filepath.Join(parts[:i]...), "__init__.py"))
	}
	p := filepath.Join(parts...)
	return append(out, p+".py", filepath.Join(p, "__init__.py"), filepath.Join(p, "__main__.py"))
}

// pythonModuleWarning says what `python -m` without -I or -P leaves open ("" when the line
// does not run one): -m puts the working directory, the chamber, first on sys.path, so any
// module the program imports (its own, or json, or os) can be shadowed by a file the agent
// writes there, and only the module's own files are pinned.
func pythonModuleWarning(words []string) string {
	inner := peelWrappers(words)
	if len(inner) == 0 || interpreterName(inner[0]) != "python" {
		return ""
	}
	isolated := false
	args := inner[1:]
	for i := 0; i < len(args); i++ {
		w := args[i]
		short := len(w) > 1 && w[0] == '-' && w[1] != '-'
		switch {
		case w == "-W" || w == "-X" || w == "--check-hash-based-pycs":
			i++ // its argument
			continue
		case w == "-c" || short && strings.HasSuffix(w, "c"):
			return "" // inline code
		case w == "-m" || short && strings.HasSuffix(w, "m"):
			if short && strings.ContainsAny(w[1:], "IP") {
				isolated = true
			}
			if isolated {
				return ""
			}
			mod := ""
			if i+1 < len(args) {
				mod = args[i+1]
			}
			return fmt.Sprintf("%q runs `python -m %s` without -I or -P: -m puts the chamber (its working directory) first on sys.path, so a module the agent writes there shadows any module it imports; add -P (Python 3.11+) or -I", strings.Join(words, " "), mod)
		case short && strings.ContainsAny(w[1:], "IP"):
			isolated = true
		case !strings.HasPrefix(w, "-"):
			return "" // a script: its own directory, not the chamber, goes first on sys.path
		}
	}
	return ""
}

// agentLineWarnings are what start, reload and validate say about the operator's lines (the
// agent line, each allowed [agents.NAME]).
func (r *runner) agentLineWarnings(line string) []string {
	var out []string
	add := func(words []string) {
		if w := pythonModuleWarning(words); w != "" {
			out = append(out, w)
		}
	}
	if c, err := r.cfg.AgentLine(line); err == nil && c.Agent != nil {
		add(append(append([]string(nil), c.Agent.Command...), c.Agent.Args...))
	}
	for _, name := range r.cfg.AllowedList(line) {
		if spec, ok := r.cfg.agentSpec(name); ok && len(spec.Command) > 0 && spec.Command[0] != "" {
			add(append(append([]string(nil), spec.Command...), spec.Args...))
		}
	}
	return uniqueStrings(out)
}

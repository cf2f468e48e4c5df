package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The "never does" column of docs/DESIGN.md's package table, as far as imports can tell (after
// tailscale's deps_test.go): a package that starts importing what its row forbids fails this
// test. direct rules read the package's own imports (a standard package such as os is in
// everyone's transitive deps through fmt); deps rules read everything it links.

const module = "github.com/cryochamber/cryochamber"

type depRule struct {
	pkg    string   // relative to the module ("" is the binary)
	direct []string // never imported by the package itself
	deps   []string // never linked into it (prefixes: "timer/launchctltest" covers its subpackages)
	why    string   // DESIGN.md's words
}

// testOnly are the packages that exist for tests: never in the binary, nor in what it links.
var testOnly = []string{"internal/e2e", "internal/mailtest", "internal/modelserver", "internal/bench", "timer/systemdtest", "timer/launchctltest"}

var depRules = []depRule{
	{pkg: "", deps: testOnly, why: "no test helper in the binary"},
	{pkg: "chamber", direct: []string{"github.com/coreos/go-systemd", "github.com/godbus/dbus", "howett.net/plist", "os/exec"}, deps: testOnly,
		why: "talk to the OS timers except through timer.Backend; run a program except through agent and internal/program"},
	{pkg: "marker", direct: []string{"os", "io/fs", "os/exec"}, deps: []string{module + "/"}, why: "read files (it parses the lines it is given)"},
	{pkg: "sessionlog", deps: []string{"marker"}, why: "interpret markers"},
	{pkg: "agent", deps: []string{"chamber", "timer", "validate", "fallback", "message", "channel", "web"}, why: "decide what happens after the session"},
	{pkg: "timer", deps: []string{"chamber", "agent", "validate", "fallback", "message", "channel", "web"}, why: "decide anything about a chamber (it arms what it is told)"},
	{pkg: "validate", deps: []string{"timer", "chamber"}, why: "arm timers"},
	{pkg: "fallback", deps: []string{"chamber", "timer", "message", "channel"}, why: "decide whether, where or when to alert"},
	{pkg: "message", deps: []string{"agent", "timer", "chamber", "fallback"}, why: "run sessions"},
	{pkg: "channel", deps: []string{"agent", "timer", "chamber", "web"}, why: "run sessions, read the chamber's own cryo.toml (the chamber package reads it)"},
	{pkg: "internal/confined", direct: []string{"os/exec"}, deps: []string{module + "/"}, why: "decide what a file means"},
	{pkg: "internal/program", direct: []string{"os/exec"}, deps: []string{module + "/"}, why: "run anything"},
	{pkg: "internal/termtext", deps: []string{module + "/", "os"}, why: "interpret text"},
	{pkg: "internal/atomicfile", deps: []string{module + "/"}, why: "know what it writes"},
	{pkg: "web", direct: []string{"internal/confined", "message", "sessionlog", "agent", "os/exec", "internal/program"}, deps: testOnly,
		why: "open a chamber's files or its private state (it calls the chamber package's API)"},
	{pkg: "internal/launchdsock", deps: []string{module + "/"}, why: "open a socket itself"},
	{pkg: "internal/envvars", direct: []string{"os"}, deps: []string{module + "/"}, why: "read or change the process's environment"},
}

// full turns a rule's name into an import path (names of this module are relative).
func full(name string) string {
	if strings.Contains(strings.SplitN(name, "/", 2)[0], ".") || isStd(name) {
		return name
	}
	return module + "/" + name
}

// isStd is a guess good enough for the names in depRules: the standard packages they name.
func isStd(name string) bool {
	return slices.Contains([]string{"os", "io/fs", "os/exec", "net", "net/http"}, name)
}

// matches reports whether import path p is forbidden name (itself or, for a module package or a
// prefix ending in /, anything below it).
func matches(p, name string) bool {
	f := full(name)
	if strings.HasSuffix(name, "/") {
		return strings.HasPrefix(p, f)
	}
	return p == f || !isStd(name) && strings.HasPrefix(p, f+"/")
}

// violations checks the rules against a package's direct imports and its deps.
func violations(rules []depRule, direct, deps map[string][]string) []string {
	var out []string
	for _, r := range rules {
		p := full(r.pkg)
		if r.pkg == "" {
			p = module
		}
		for _, imp := range direct[p] {
			for _, n := range r.direct {
				if matches(imp, n) {
					out = append(out, p+" imports "+imp+": it never does: "+r.why)
				}
			}
		}
		for _, dep := range deps[p] {
			if dep == p {
				continue
			}
			for _, n := range r.deps {
				if matches(dep, n) {
					out = append(out, p+" links "+dep+": it never does: "+r.why)
				}
			}
		}
	}
	return out
}

func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Fields(string(out))
}

func TestDependencies(t *testing.T) {
	direct, deps := map[string][]string{}, map[string][]string{}
	for _, r := range depRules {
		p := "./" + r.pkg
		path := full(r.pkg)
		if r.pkg == "" {
			p, path = ".", module
		}
		direct[path] = goList(t, "-f", `{{join .Imports " "}}`, p)
		deps[path] = goList(t, "-deps", p)
	}
	for _, v := range violations(depRules, direct, deps) {
		t.Error(v)
	}
}

// The checker itself catches a breach: a test that cannot fail would prove nothing.
func TestDependenciesCatchABreach(t *testing.T) {
	direct := map[string][]string{
		module + "/marker":  {"fmt", "os"},
		module + "/web":     {module + "/internal/confined"},
		module + "/chamber": {"github.com/godbus/dbus/v5"},
	}
	deps := map[string][]string{
		module:                 {module + "/timer/launchctltest/fakestate"},
		module + "/sessionlog": {module + "/marker"},
		module + "/timer":      {module + "/timer", "os"},
	}
	got := violations(depRules, direct, deps)
	for _, want := range []string{"marker imports os", "web imports " + module + "/internal/confined", "chamber imports github.com/godbus/dbus/v5",
		module + " links " + module + "/timer/launchctltest/fakestate", "sessionlog links " + module + "/marker"} {
		if !slices.ContainsFunc(got, func(v string) bool { return strings.Contains(v, want) }) {
			t.Errorf("no violation %q in %v", want, got)
		}
	}
	if len(got) != 5 {
		t.Errorf("%d violations, want 5: %v", len(got), got)
	}
}

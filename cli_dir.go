package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// dirBeforeCommand lets the chamber be named before the command, as git -C and make -C take
// it: `cryochamber -C DIR status` (or --dir DIR, -C=DIR, --dir=DIR) is `cryochamber status
// --dir DIR`. Only for a command that takes --dir; anything else is left as typed.
func dirBeforeCommand(app *cli.App, args []string) []string {
	if len(args) < 3 {
		return args
	}
	var flag []string
	rest := args[2:]
	switch a := args[1]; {
	case a == "-C" || a == "--dir" || a == "-dir":
		flag, rest = args[1:3], args[3:]
	case strings.HasPrefix(a, "-C=") || strings.HasPrefix(a, "--dir=") || strings.HasPrefix(a, "-dir="):
		flag = args[1:2]
	default:
		return args
	}
	if len(rest) == 0 {
		return args
	}
	cmd := app.Command(rest[0])
	if cmd == nil {
		return args
	}
	if len(rest) > 1 {
		// A command with subcommands (todo list): the flag goes after the subcommand.
		if sc := cmd.Command(rest[1]); sc != nil && takesDir(sc) {
			out := []string{args[0], rest[0], rest[1]}
			out = append(out, flag...)
			return append(out, rest[2:]...)
		}
	}
	if !takesDir(cmd) {
		return args
	}
	out := []string{args[0], rest[0]}
	out = append(out, flag...)
	return append(out, rest[1:]...)
}

// interspersedSub is interspersed for a subcommand (`todo done ID --dir DIR`): its flags that
// come after its arguments are moved in front of them.
func interspersedSub(app *cli.App, args []string) []string {
	if len(args) < 3 {
		return args
	}
	cmd := app.Command(args[1])
	if cmd == nil || len(cmd.Subcommands) == 0 {
		return args
	}
	sc := cmd.Command(args[2])
	if sc == nil {
		return args
	}
	moved := interspersed(&cli.App{Commands: []*cli.Command{sc}}, append([]string{args[0]}, args[2:]...))
	return append([]string{args[0], args[1]}, moved[1:]...)
}

// takesDir reports whether the command has the --dir flag.
func takesDir(cmd *cli.Command) bool {
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			if n == "dir" {
				return true
			}
		}
	}
	return false
}

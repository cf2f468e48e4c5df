package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"
)

const completeFlag = "--generate-bash-completion"

// completeWords answers the completion scripts (cmd_completion.go), which run the words typed so
// far followed by --generate-bash-completion. It answers here rather than through urfave/cli,
// which cannot read `status -- --generate-bash-completion` (the word being completed is "--",
// which ends the flags) and offers no arguments: the commands, a command's flags, the shells
// of `completion`. It reports whether args asked for completion.
func completeWords(app *cli.App, args []string, stdout io.Writer) bool {
	if len(args) < 2 || args[len(args)-1] != completeFlag {
		return false
	}
	words := dirBeforeCommand(app, args[:len(args)-1])[1:]
	if len(words) == 0 {
		for _, c := range app.Commands {
			if !c.Hidden {
				fmt.Fprintln(stdout, c.Name)
			}
		}
		return true
	}
	cmd := app.Command(words[0])
	if cmd == nil {
		// A word being typed: the commands it may begin.
		for _, c := range app.Commands {
			if !c.Hidden && strings.HasPrefix(c.Name, words[0]) {
				fmt.Fprintln(stdout, c.Name)
			}
		}
		return true
	}
	if len(cmd.Subcommands) > 0 && len(words) > 1 {
		if sc := cmd.Command(words[1]); sc != nil {
			cmd, words = sc, words[1:] // todo done --<TAB>: the subcommand's flags
		}
	}
	cur := ""
	if len(words) > 1 {
		cur = words[len(words)-1]
	}
	if strings.HasPrefix(cur, "-") {
		for _, f := range cmd.Flags {
			for _, n := range f.Names() {
				dash := "-"
				if len(n) > 1 {
					dash = "--"
				}
				if strings.HasPrefix(dash+n, cur) && len(n) > 1 {
					fmt.Fprintln(stdout, dash+n)
				}
			}
		}
		if strings.HasPrefix("--help", cur) {
			fmt.Fprintln(stdout, "--help")
		}
		return true
	}
	if cmd.Name == "completion" {
		fmt.Fprintln(stdout, "bash\nzsh\nfish")
	}
	if len(words) == 1 {
		for _, sc := range cmd.Subcommands {
			fmt.Fprintln(stdout, sc.Name) // todo <TAB>: list, done, remove
		}
	}
	return true
}

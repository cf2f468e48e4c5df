package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/cryochamber/cryochamber/chamber"
)

// The completion scripts are urfave/cli's own (autocomplete/ in its repository), for a program
// named cryochamber: they ask the binary itself (--generate-bash-completion) what comes next.
const bashCompletion = `# bash completion for cryochamber
_cryochamber_complete() {
  local cur words
  COMPREPLY=()
  cur="${COMP_WORDS[COMP_CWORD]}"
  words=("${COMP_WORDS[@]:0:$COMP_CWORD}")
  local req="${words[*]} --generate-bash-completion"
  [[ "$cur" == "-"* ]] && req="${words[*]} ${cur} --generate-bash-completion"
  COMPREPLY=($(compgen -W "$(eval "${req}" 2>/dev/null)" -- "${cur}"))
}
complete -o bashdefault -o default -o nospace -F _cryochamber_complete cryochamber
`

const zshCompletion = `#compdef cryochamber
_cryochamber() {
  local -a opts
  local cur=${words[-1]}
  if [[ "$cur" == "-"* ]]; then
    opts=("${(@f)$(${words[@]:0:#words[@]-1} ${cur} --generate-bash-completion)}")
  else
    opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion)}")
  fi
  if [[ "${opts[1]}" != "" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}
compdef _cryochamber cryochamber
`

func completionCommand(env *chamber.Env) *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print the shell completion script for bash, zsh or fish (make install installs them)",
		ArgsUsage: "bash|zsh|fish",
		Action: func(c *cli.Context) error {
			switch strings.Join(c.Args().Slice(), " ") {
			case "bash":
				fmt.Fprint(env.Stdout, bashCompletion)
			case "zsh":
				fmt.Fprint(env.Stdout, zshCompletion)
			case "fish":
				s, err := c.App.ToFishCompletion()
				if err != nil {
					return err
				}
				fmt.Fprint(env.Stdout, s)
			default:
				return &usageError{"completion takes one shell: bash, zsh or fish", "cryochamber completion bash > ~/.local/share/bash-completion/completions/cryochamber"}
			}
			return nil
		},
	}
}

func manCommand(env *chamber.Env) *cli.Command {
	return &cli.Command{
		Name:   "man",
		Usage:  "print the manual page (roff, section 1), as make install installs it",
		Hidden: true,
		Action: func(c *cli.Context) error {
			fmt.Fprint(env.Stdout, manPageRoff) // generated from this app's help (man.go)
			return nil
		},
	}
}

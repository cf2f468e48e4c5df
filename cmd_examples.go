package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// examples are what `help CMD` ends with and what the man page's EXAMPLES section lists, one
// copy for both, so that they cannot disagree.
var examples = map[string][]string{
	"init":       {"cryochamber init ~/plans/x", "cryochamber init ~/plans/x --agent claude"},
	"start":      {"cryochamber start ~/plans/x/plan.md", "cryochamber start --dir ~/plans/x --agent claude"},
	"wake":       {"cryochamber wake --dir ~/plans/x --now", `cryochamber wake --dir ~/plans/x --at "2026-12-01 09:00"`},
	"status":     {"cryochamber status --dir ~/plans/x", "cryochamber -C ~/plans/x status --json"},
	"log":        {"cryochamber log --dir ~/plans/x --session 3", "cryochamber log --dir ~/plans/x --follow"},
	"history":    {"cryochamber history --dir ~/plans/x --since 2026-03-01 --until 2026-03-31", "cryochamber history --dir ~/plans/x --since yesterday", "cryochamber history --dir ~/plans/x --since -7d --json"},
	"send":       {`cryochamber send --dir ~/plans/x "also check the invoices"`, `echo "wake up" | cryochamber send --dir ~/plans/x --wake -`},
	"receive":    {"cryochamber receive --dir ~/plans/x", "cryochamber receive --dir ~/plans/x --all --json"},
	"pause":      {"cryochamber pause --dir ~/plans/x", `cryochamber pause --dir ~/plans/x --until "+7d"`},
	"resume":     {"cryochamber resume --dir ~/plans/x"},
	"cancel":     {"cryochamber cancel --dir ~/plans/x"},
	"reload":     {"$EDITOR ~/plans/x/cryo.toml && cryochamber reload --dir ~/plans/x"},
	"validate":   {"cryochamber validate --dir ~/plans/x"},
	"ps":         {"cryochamber ps", "cryochamber ps --json"},
	"sync":       {"cryochamber sync --dir ~/plans/x", "cryochamber sync --dir ~/plans/x --install", "cryochamber sync --dir ~/plans/x --status"},
	"web":        {"cryochamber web", "cryochamber web --install --listen 127.0.0.1:7800 && cryochamber web --url"},
	"completion": {"cryochamber completion bash > ~/.local/share/bash-completion/completions/cryochamber"},
	"todo":       {"cryochamber todo list --dir ~/plans/x", "cryochamber todo done --dir ~/plans/x 2", "cryochamber todo remove --dir ~/plans/x 3"},
	"forget":     {"cryochamber cancel --dir ~/plans/x && cryochamber forget --dir ~/plans/x"},
	"version":    {"cryochamber version"},
}

// addExamples ends each command's description with its examples (shown by `help CMD`).
func addExamples(cmds []*cli.Command) {
	for _, c := range cmds {
		ex := examples[c.Name]
		if len(ex) == 0 {
			continue
		}
		d := strings.TrimRight(c.Description, "\n")
		if d != "" {
			d += "\n\n"
		}
		c.Description = d + "EXAMPLES:\n   " + strings.Join(ex, "\n   ")
	}
}

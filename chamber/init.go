package chamber

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

//go:embed templates/cryo.toml
var configTemplate []byte

//go:embed templates/plan.md
var planTemplate []byte

// ConfigTemplate is the commented cryo.toml that `init` writes (every key, with its default).
func ConfigTemplate() []byte { return configTemplate }

// InitOptions are the options of `cryochamber init`.
type InitOptions struct {
	Dir string
}

// Init creates a chamber's files: plan.md (template), cryo.toml (commented defaults), NOTES.md
// and messages/. It never overwrites anything.
func Init(env *Env, opts InitOptions, out io.Writer) error {
	dir, err := AbsDir(opts.Dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return &Error{Err: err}
	}
	// The template must parse: a template the strict loader rejects would be a trap.
	if _, err := ParseConfig(ConfigFile, configTemplate, time.UTC); err != nil {
		return &Error{Msg: "internal error: the cryo.toml template does not load", Err: err}
	}
	files := []struct {
		name string
		data []byte
	}{
		{DefaultPlan, planTemplate},
		{ConfigFile, configTemplate},
		{NotesFile, nil},
	}
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		fh, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			fmt.Fprintf(out, "kept     %s (exists)\n", p)
			continue
		}
		if err != nil {
			return &Error{Err: err}
		}
		_, werr := fh.Write(f.data)
		serr := fh.Sync()
		cerr := fh.Close()
		if err := errors.Join(werr, serr, cerr); err != nil {
			return &Error{Err: err}
		}
		fmt.Fprintf(out, "created  %s\n", p)
	}
	for _, d := range []string{inboxDir, archiveDir, outboxDir} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return &Error{Err: err}
		}
		if err := os.Chmod(filepath.Join(dir, d), 0o700); err != nil {
			return &Error{Err: err}
		}
	}
	fmt.Fprintf(out, "created  %s/\n", filepath.Join(dir, "messages"))
	if st, err := LoadState(env.StateDir, dir); err == nil && (st.Phase.Active() || st.Phase == PhasePaused) {
		// A chamber already running its plan: "write the plan, then start" would be refused.
		fmt.Fprintf(out, "\nthis chamber is already active (%s, session %d): every session reads plan.md as it is;\nafter editing cryo.toml run: cryochamber reload --dir %s\n", st.Phase, st.Session, dir)
		return nil
	}
	fmt.Fprintf(out, "\nnext: write the plan in %s, then run:\n  cryochamber start %s\n", filepath.Join(dir, DefaultPlan), filepath.Join(dir, DefaultPlan))
	fmt.Fprintf(out, "\nThe agent is %q unless cryo.toml says otherwise (agent = \"claude\", \"codex\", or any command),\nor start it with --agent: cryochamber start --agent claude %s\n", DefaultAgent, filepath.Join(dir, DefaultPlan))
	return nil
}

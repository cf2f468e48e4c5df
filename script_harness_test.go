package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestScriptHarness runs tiny scripts through the same harness as TestScripts and checks their
// verdict: a negative check on a missing file or directory fails (it would otherwise pass on a
// misspelt path), and the same check on a path that exists passes, so the failure comes from
// the missing path and nothing else.
func TestScriptHarness(t *testing.T) {
	// Each script has dir/ with two files mentioning "apple", an empty empty/, and present.txt.
	const files = `-- dir/a.txt --
apple
-- dir/b.txt --
apple pie
-- present.txt --
pear
-- state.json --
{"phase": "armed", "session": 2}
`
	cases := []struct {
		name, script string
		fail         string // "" = the script passes; else a substring of its failure
	}{
		// grep: testscript's own; a missing file fails, negated or not.
		{"grep-missing", "! grep apple missing.txt", "no such file or directory"},
		{"grep-present", "! grep apple present.txt", ""},
		// grepdir: a missing directory fails.
		{"grepdir-missing", "! grepdir apple nodir", "no such file or directory"},
		{"grepdir-missing-count", "grepdir -count=2 apple nodir", "no such file or directory"},
		{"grepdir-absent-pattern", "! grepdir banana dir", ""},
		{"grepdir-count", "grepdir -count=2 apple dir", ""},
		{"grepdir-count-wrong", "grepdir -count=3 apple dir", "3 matches"},
		{"grepdir-count-zero", "grepdir -count=0 apple dir", "needs N >= 1"},
		{"grepdir-empty", "! grepdir apple empty", ""},
		// files: a missing directory is not "0 files".
		{"files-missing", "files 0 nodir", "no such file or directory"},
		{"files-missing-negated", "! files 3 nodir", "no such file or directory"},
		{"files-empty", "files 0 empty", ""},
		{"files-two", "files 2 dir", ""},
		// absent: the parent directory must exist; `! exists` is refused.
		{"absent-misspelt-dir", "absent nodir/file", "does not exist (a misspelt path?)"},
		{"absent-ok", "absent dir/file", ""},
		{"absent-but-present", "absent dir/a.txt", "dir/a.txt exists"},
		{"not-exists-refused", "! exists nodir/file", "use `absent PATH`"},
		// json: a missing file fails, negated or not.
		{"json-missing", "! json nostate.json phase failed", "no such file or directory"},
		{"json-ok", "json state.json phase armed", ""},
		{"json-negated", "! json state.json phase failed", ""},
		// cryo and status.
		{"cryo-unexpected-success", "! cryo --version", "succeeded, want failure"},
		{"cryo-status", "! cryo frobnicate\nstatus 2\nstderr 'unknown command'", ""},
		{"cryo-status-wrong", "! cryo frobnicate\nstatus 1", "exit status 1 (got 2)"},
		{"status-before-cryo", "status 0", "no cryo command ran yet"},
		// Commands that need a manager say so.
		{"units-without-manager", "units 0", "needs `manager` first"},
	}
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(dir, c.name+".txtar")
			if err := os.WriteFile(file, []byte("mkdir empty\n"+c.script+"\n"+files), 0o644); err != nil {
				t.Fatal(err)
			}
			p := scriptParams(dir, false)
			p.Dir, p.Files = "", []string{file}
			ht := &harnessT{}
			testscript.RunT(ht, p)
			sub := ht.sub
			switch {
			case sub == nil:
				t.Fatal("the script did not run")
			case c.fail == "" && sub.failed:
				t.Errorf("script %q failed, want pass:\n%s", c.script, sub.log.String())
			case c.fail != "" && !sub.failed:
				t.Errorf("script %q passed, want a failure with %q:\n%s", c.script, c.fail, sub.log.String())
			case c.fail != "" && !strings.Contains(sub.log.String(), c.fail):
				t.Errorf("script %q failed without %q:\n%s", c.script, c.fail, sub.log.String())
			}
		})
	}
}

// harnessT runs a testscript and records its verdict instead of failing the calling test.
type harnessT struct {
	failed, skipped bool
	log             strings.Builder
	sub             *harnessT
}

type harnessStop struct{}

func (t *harnessT) Skip(args ...any) {
	t.skipped = true
	t.Log(args...)
	panic(harnessStop{})
}

func (t *harnessT) Fatal(args ...any) {
	t.failed = true
	t.Log(args...)
	panic(harnessStop{})
}

func (t *harnessT) FailNow() {
	t.failed = true
	panic(harnessStop{})
}

func (t *harnessT) Log(args ...any) { fmt.Fprintln(&t.log, args...) }
func (t *harnessT) Parallel()       {}
func (t *harnessT) Verbose() bool   { return false }

func (t *harnessT) Run(name string, f func(testscript.T)) {
	t.sub = &harnessT{}
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(harnessStop); !ok {
				panic(r)
			}
		}
	}()
	f(t.sub)
}

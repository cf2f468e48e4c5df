package binary

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// A session records, in the private state directory, where its block lies in cryo.log and its
// lines that may hold markers (block.json), so that `validate`, `status` and the next session do
// not read the block again. It is a cache: what they report is the same without it, and a log
// that changed after the block (here: a stray line after its END) is read, and refused, as
// before.
func TestClosedBlockRecordChangesNothing(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	agent := `#!/bin/sh
i=0
while [ $i -lt 3000 ]; do echo "working on step $i of the plan"; i=$((i+1)); done
echo "[CRYO:PLAN look at the release notes]"
echo "an echo of the protocol: [cryo:bogus x]" >&2
echo "[cryo:exit 1] half of it, [CRYO:NOTAKEYWORD y]"
echo "[CRYO:EXIT 0] done"
echo "[CRYO:WAKE +2h]"
`
	dir, env := newChamber(t, m, "cached", agent, "")
	record := filepath.Join(fixture.StateDir(m), "chambers", timer.ID(dir), "block.json")
	var cb struct {
		Session  int               `json:"session"`
		Markers  []json.RawMessage `json:"markers"`
		Complete bool              `json:"complete"`
	}
	data, err := os.ReadFile(record)
	if err != nil {
		t.Fatalf("the session recorded no block.json: %v", err)
	}
	if err := json.Unmarshal(data, &cb); err != nil || cb.Session != 1 || !cb.Complete || len(cb.Markers) != 4 {
		t.Fatalf("block.json = %s (%v); want session 1 and its 4 marker lines", data, err)
	}

	type validation struct {
		OK        bool            `json:"ok"`
		Exit      json.RawMessage `json:"exit"`
		Wake      json.RawMessage `json:"wake"`
		Cmd       json.RawMessage `json:"cmd"`
		Plans     json.RawMessage `json:"plans"`
		Fallbacks json.RawMessage `json:"fallbacks"`
		Errors    json.RawMessage `json:"errors"`
		Warnings  json.RawMessage `json:"warnings"`
	}
	type status struct {
		Tail []string        `json:"tail"`
		Last json.RawMessage `json:"last"`
	}
	read := func(what string) (validation, status) {
		t.Helper()
		var v validation
		var s status
		code, out := bin(t, env, dir, "validate", "--json")
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%s: validate --json (%d): %v\n%s", what, code, err, out)
		}
		code, out = bin(t, env, dir, "status", "--json")
		if err := json.Unmarshal([]byte(out), &s); err != nil || code != 0 {
			t.Fatalf("%s: status --json (%d): %v\n%s", what, code, err, out)
		}
		return v, s
	}
	withRecord, sWith := read("with block.json")
	if !withRecord.OK || !strings.Contains(string(withRecord.Warnings), "NOTAKEYWORD") || len(sWith.Tail) == 0 {
		t.Fatalf("validate with block.json: %+v, tail %q", withRecord, sWith.Tail)
	}
	// A wake with nothing due appends a note after the block: the record still holds.
	if code, out := bin(t, env, dir, "wake"); code != 0 || !strings.Contains(out, "not due") {
		t.Fatalf("wake: %d\n%s", code, out)
	}
	afterNote, sNote := read("after a note")
	if err := os.Remove(record); err != nil {
		t.Fatal(err)
	}
	without, sWithout := read("without block.json")
	if !reflect.DeepEqual(withRecord, without) || !reflect.DeepEqual(afterNote, without) {
		t.Errorf("validate differs with the record:\n%+v\nafter a note:\n%+v\nwithout:\n%+v", withRecord, afterNote, without)
	}
	if !reflect.DeepEqual(sWith.Last, sWithout.Last) || !reflect.DeepEqual(sNote.Tail, sWithout.Tail) {
		t.Errorf("status differs with the record:\n%+v\nwithout:\n%+v", sNote, sWithout)
	}

	// The next session records its block again; then a stray line lands after its END.
	if code, out := bin(t, env, dir, "wake", "--now"); code != 0 {
		t.Fatalf("wake --now: %d\n%s", code, out)
	}
	if _, err := os.Stat(record); err != nil {
		t.Fatalf("session 2 recorded no block.json: %v", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "cryo.log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("| a line after the END\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	code, out := bin(t, env, dir, "validate")
	if code == 0 || !strings.Contains(out, "output line after the END line of session 2") {
		t.Errorf("validate of a log changed after the recorded block (%d):\n%s", code, out)
	}
}

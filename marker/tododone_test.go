package marker

import (
	"testing"
	"time"
)

// [CRYO:TODO-DONE <id>] marks a pending TODO done (the agent finished it early, or it is moot).
func TestTodoDone(t *testing.T) {
	r := parseString(t, "[CRYO:TODO-DONE s3-1]\n[cryo:todo-done s4-2-a1] and text\n[CRYO:EXIT 0] ok\n", time.UTC)
	if len(r.Errors) != 0 || len(r.Warnings) != 0 {
		t.Fatalf("errors %v warnings %v", r.Errors, r.Warnings)
	}
	if len(r.TodosDone) != 2 || r.TodosDone[0].ID != "s3-1" || r.TodosDone[1].ID != "s4-2-a1" || r.TodosDone[1].Line != 2 {
		t.Fatalf("TodosDone = %+v", r.TodosDone)
	}
	for _, bad := range []string{"[CRYO:TODO-DONE]", "[CRYO:TODO-DONE s3-1 s3-2]", `[CRYO:TODO-DONE "s3-1"]`, "[CRYO:TODO-DONE ../x]"} {
		r := parseString(t, bad+"\n[CRYO:EXIT 0] ok\n", time.UTC)
		if len(r.Errors) != 1 || r.Errors[0].Keyword != "TODO-DONE" || len(r.TodosDone) != 0 {
			t.Errorf("%s: errors %v, done %v", bad, r.Errors, r.TodosDone)
		}
	}
}

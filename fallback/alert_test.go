package fallback

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cryochamber/cryochamber/internal/termtext"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func TestSanitizeBody(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want string
	}{
		{name: "CRLF to LF", in: "a\r\nb\rc\n", max: 100, want: "a\nb\nc\n"},
		{name: "controls to spaces, tabs kept", in: "a\x00b\x1bc\td", max: 100, want: "a b c\td"},
		{name: "invalid UTF-8", in: "a\xffb", max: 100, want: "a\uFFFDb"},
		{name: "cut on a rune boundary", in: "aé", max: 2, want: "a" + truncatedMark},
		{name: "within the bound", in: "abc", max: 3, want: "abc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sanitizeBody(tt.in, tt.max); got != tt.want {
				t.Errorf("sanitizeBody(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
			}
		})
	}
}

// TestAlertGolden pins the subject, body, webhook text and JSON body of a few alerts.
// Run with -update to rewrite testdata/*.golden after a deliberate change.
func TestAlertGolden(t *testing.T) {
	tests := []struct {
		name string
		a    Alert
	}{
		{name: "timeout", a: testAlert},
		{name: "hostile", a: Alert{
			Chamber: "/srv/chambers/night\r\nBcc: evil@x.example",
			Session: 7,
			Reason:  "refused\u202E",
			Message: "WAKE was <!channel> & <https://evil.example|docs>\r\nBcc: evil@x.example\x1b[2J\n\tdone",
			Time:    time.Date(2027, 3, 28, 1, 30, 0, 0, time.FixedZone("CET", 3600)),
		}},
		{name: "empty", a: Alert{}},
		{name: "long", a: Alert{
			Chamber: "/" + strings.Repeat("very-long-chamber-name-", 10),
			Session: 123456,
			Reason:  strings.Repeat("overdue ", 20),
			Message: strings.Repeat("word ", 1000),
			Time:    time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := WebhookBody(tt.a)
			if err != nil {
				t.Fatal(err)
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, body, "", "  "); err != nil {
				t.Fatal(err)
			}
			got := "Subject: " + Subject(tt.a) + "\n\n" + Body(tt.a) +
				"\n--- webhook text ---\n" + Text(tt.a) +
				"\n--- webhook body ---\n" + pretty.String() + "\n"
			golden := filepath.Join("testdata", "alert_"+tt.name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s (run with -update if intended):\n%s", golden, got)
			}
			checkTexts(t, tt.a)
		})
	}
}

// checkTexts states what must hold for any alert, hostile or not.
func checkTexts(t *testing.T, a Alert) {
	t.Helper()
	subj := Subject(a)
	if !utf8.ValidString(subj) || strings.ContainsFunc(subj, termtext.UnsafeInLine) {
		t.Errorf("subject %q holds an unsafe rune", subj)
	}
	if n := utf8.RuneCountInString(subj); n > 40+maxNameRunes+maxReasonRunes {
		t.Errorf("subject is %d runes long", n)
	}
	text := Text(a)
	if strings.ContainsAny(text, "\r\n<>") || strings.ContainsFunc(text, unicode.IsControl) {
		t.Errorf("webhook text %q is not one escaped paragraph", text)
	}
	body := Body(a)
	if strings.ContainsFunc(body, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }) {
		t.Errorf("body %q holds a control character", body)
	}
	if len(body) > maxMessageBytes+2*maxPathRunes*utf8.UTFMax {
		t.Errorf("body is %d bytes", len(body))
	}
}

package marker

import (
	"slices"
	"strings"
	"testing"
)

func TestSplitCommand(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"  \t ", nil},
		{"opencode", []string{"opencode"}},
		{`opencode run "Follow up on PR #41 rebase, check for new PRs"`, []string{"opencode", "run", "Follow up on PR #41 rebase, check for new PRs"}},
		{"a  b\tc\nd", []string{"a", "b", "c", "d"}},
		{"  a b  ", []string{"a", "b"}},
		{`'it'"'"'s'`, []string{"it's"}},
		{`'a'"b"c`, []string{"abc"}},
		{`''`, []string{""}},
		{`a "" b`, []string{"a", "", "b"}},
		{`'a\b'`, []string{`a\b`}},
		{`"q\" bs\\ d\$ b\` + "`" + ` n\n x\y"`, []string{`q" bs\ d$ b` + "`" + ` n\n x\y`}},
		{`a\ b`, []string{"a b"}},
		{`a\;b \$HOME \"x\"`, []string{"a;b", "$HOME", `"x"`}},
		{`'; | & < > ( ) $(x) ${y} $z` + "`w`'", []string{"; | & < > ( ) $(x) ${y} $z`w`"}},
		{`"; | & < > ( ) $(x) ${y} $z"`, []string{"; | & < > ( ) $(x) ${y} $z"}},
		{`claude "check [PR] later"`, []string{"claude", "check [PR] later"}},
		{`a*b ~/x #c {d} [e] !f`, []string{"a*b", "~/x", "#c", "{d}", "[e]", "!f"}},
		{"héllo 'wörld ☃'", []string{"héllo", "wörld ☃"}},
	}
	for _, tt := range tests {
		got, err := SplitCommand(tt.in)
		if err != nil {
			t.Errorf("SplitCommand(%q): %v", tt.in, err)
			continue
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("SplitCommand(%q) = %q, want %q", tt.in, got, tt.want)
		}
		again, err := SplitCommand(JoinCommand(got))
		if err != nil || !slices.Equal(again, got) {
			t.Errorf("SplitCommand(JoinCommand(%q)) = %q, %v", got, again, err)
		}
	}
}

func TestSplitCommandErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"a; b", `unquoted ";" is shell syntax`},
		{"a | b", `unquoted "|"`},
		{"a && b", `unquoted "&"`},
		{"a &", `unquoted "&"`},
		{"a > out", `unquoted ">"`},
		{"a < in", `unquoted "<"`},
		{"a `id`", "unquoted \"`\""},
		{"a $(id)", `unquoted "$("`},
		{"a ${HOME}", `unquoted "${"`},
		{"a $HOME", `unquoted "$"`},
		{"a $", `unquoted "$"`},
		{"a $'x'", `unquoted "$"`},
		{"(a)", `unquoted "("`},
		{"a)", `unquoted ")"`},
		{"a 'b", "unterminated single quote"},
		{`a "b`, "unterminated double quote"},
		{`a "b\"`, "unterminated double quote"},
		{`a \`, "trailing backslash"},
		{"a\x00b", "NUL byte"},
		{"'a\x00b'", "NUL byte"},
	}
	for _, tt := range tests {
		got, err := SplitCommand(tt.in)
		if err == nil {
			t.Errorf("SplitCommand(%q) = %q, want error containing %q", tt.in, got, tt.want)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("SplitCommand(%q) error = %q, want it to contain %q", tt.in, err, tt.want)
		}
		if got != nil {
			t.Errorf("SplitCommand(%q) returned words %q with its error", tt.in, got)
		}
	}
}

func TestJoinCommand(t *testing.T) {
	tests := []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{"opencode", "run"}, "opencode run"},
		{[]string{"a b", "", "it's", "x=1", "/usr/bin/a-b_c.d", "$HOME", "~"}, `'a b' '' 'it'\''s' x=1 /usr/bin/a-b_c.d '$HOME' '~'`},
	}
	for _, tt := range tests {
		if got := JoinCommand(tt.in); got != tt.want {
			t.Errorf("JoinCommand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

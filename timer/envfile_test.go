package timer

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// envVars are the golden file's variables: every character systemd's env-file parser treats
// specially.
var envVars = []string{
	"PATH=/usr/local/bin:/usr/bin:/bin:/opt/with space",
	"HOME=/home/alice",
	"SPACES=  leading and trailing  ",
	`QUOTES=it's "quoted"`,
	`DOLLAR=$HOME ${HOME} $$ $`,
	"BACKTICK=`date` $(date)",
	`BACKSLASH=a\b\\c\ \"\`,
	"PERCENT=100% %h %%",
	"UNICODE=héllo wörld ✓ 日本",
	"HASH=# not a comment ; nor this",
	"EMPTY=",
	"EQUALS=a=b=c",
	"_under_score9=x",
}

func TestFormatEnvFileGolden(t *testing.T) {
	got, err := FormatEnvFile(envVars)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "envfile", "env.golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("FormatEnvFile differs from %s:\n--- got\n%s\n--- want\n%s", golden, got, want)
	}
	back, err := ParseEnvFile(want)
	if err != nil || !slices.Equal(back, envVars) {
		t.Errorf("ParseEnvFile(golden) = %q, %v; want %q", back, err, envVars)
	}
}

func TestFormatEnvFileRefuses(t *testing.T) {
	tests := []struct {
		vars []string
		want string
	}{
		{[]string{"NOEQUALS"}, `variable 0 ("NOEQUALS") has no '='`},
		{[]string{"=value"}, "empty variable name"},
		{[]string{"1ABC=x"}, `invalid variable name "1ABC"`},
		{[]string{"A-B=x"}, `invalid variable name "A-B"`},
		{[]string{"ÄB=x"}, "invalid variable name"},
		{[]string{strings.Repeat("A", 257) + "=x"}, "longer than 256 bytes"},
		{[]string{"A=1", "B=2", "A=3"}, "variable A is given twice"},
		{[]string{"A=line\nbreak"}, "value of A contains the control character U+000A"},
		{[]string{"A=tab\there"}, "control character U+0009"},
		{[]string{"A=\x00"}, "control character U+0000"},
		{[]string{"A=bad\xffutf8"}, "value of A is not valid UTF-8"},
		{[]string{"A=" + strings.Repeat("x", MaxEnvFile)}, "larger than 1048576 bytes"},
	}
	for _, tt := range tests {
		_, err := FormatEnvFile(tt.vars)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("FormatEnvFile(%.60q) error = %v, want %q", tt.vars, err, tt.want)
		}
	}
}

func TestParseEnvFile(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"empty", "", nil},
		{"comments and blanks", "# c\n; c\n\n   \n  # indented\nA=\"1\"\n", []string{"A=1"}},
		{"no final newline", `A="1"`, []string{"A=1"}},
		{"unquoted", "A=plain value  \nB=esc\\ aped\\ \nC=\n", []string{"A=plain value", "B=esc aped ", "C="}},
		{"single quoted", `A='it is "x" $y \z'` + "\n", []string{`A=it is "x" $y \z`}},
		{"double quoted escapes", `A="\\ \" \$ \` + "`" + ` \n \q"` + "\n", []string{`A=\ " $ ` + "`" + ` \n \q`}},
		{"blanks around", "  A  =  \"v\"  \n", []string{"A=v"}},
		{"later replaces", "A=\"1\"\nB=\"2\"\nA=\"3\"\n", []string{"A=3", "B=2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseEnvFile([]byte(tt.in))
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("ParseEnvFile(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseEnvFileRefuses(t *testing.T) {
	tests := []struct {
		in   string
		line int
		want string
	}{
		{"A=\"1\"\nNOEQ\n", 2, `no '=' in "NOEQ"`},
		{"A=\"open\n", 1, "unterminated double quote"},
		{"A='open\n", 1, "unterminated single quote"},
		{"A=\"x\\", 1, "continues on the next line"},
		{"A=x\\\nB=y\n", 1, "continues on the next line"},
		{"A=\"x\" tail\n", 1, `text "tail" after the closing quote`},
		{"\n\n1A=\"x\"\n", 3, `invalid variable name "1A"`},
		{"A=\"tab\there\"\n", 1, "control character U+0009"},
		{"A=\"\xff\"\n", 1, "not valid UTF-8"},
		{"A=x\r\n", 1, "control character U+000D"},
	}
	for _, tt := range tests {
		_, err := ParseEnvFile([]byte(tt.in))
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Line != tt.line || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseEnvFile(%q) error = %v, want line %d: %q", tt.in, err, tt.line, tt.want)
		}
	}
	if _, err := ParseEnvFile(make([]byte, MaxEnvFile+1)); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized file: %v", err)
	}
}

// FuzzEnvFileRoundTrip: FormatEnvFile either refuses a value (for a reason it names) or
// ParseEnvFile reads back exactly what was written.
func FuzzEnvFileRoundTrip(f *testing.F) {
	for _, v := range envVars {
		name, value, _ := strings.Cut(v, "=")
		f.Add(name, value)
	}
	f.Add("A", "\n")
	f.Add("A", "\xff")
	f.Add("9", "x")
	f.Fuzz(func(t *testing.T, name, value string) {
		vars := []string{name + "=" + value, "ZZ_OTHER=\"x\""}
		if name == "ZZ_OTHER" {
			vars = vars[:1]
		}
		data, err := FormatEnvFile(vars)
		if err != nil {
			if checkEnvName(name) == nil && checkEnvValue(name, value) == nil && len(value) < MaxEnvFile/2 {
				t.Fatalf("FormatEnvFile refused a valid variable %q=%q: %v", name, value, err)
			}
			return
		}
		back, err := ParseEnvFile(data)
		if err != nil || !slices.Equal(back, vars) {
			t.Fatalf("round trip of %q: %q, %v\nfile:\n%s", vars, back, err, data)
		}
	})
}

// FuzzParseEnvFile: any file is either refused or read into variables that FormatEnvFile
// writes back to the same variables.
func FuzzParseEnvFile(f *testing.F) {
	golden, _ := FormatEnvFile(envVars)
	f.Add(golden)
	f.Add([]byte("A=plain\nB='single'\n# c\n"))
	f.Add([]byte("A=\"open\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		vars, err := ParseEnvFile(data)
		if err != nil {
			return
		}
		out, err := FormatEnvFile(vars)
		if err != nil {
			t.Fatalf("ParseEnvFile accepted %q but FormatEnvFile refuses its result %q: %v", data, vars, err)
		}
		again, err := ParseEnvFile(out)
		if err != nil || !slices.Equal(again, vars) {
			t.Fatalf("%q → %q → %q, %v", data, vars, again, err)
		}
	})
}

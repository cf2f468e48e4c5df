package envvars

import "testing"

func TestLookup(t *testing.T) {
	env := []string{"PATH=/bin", "HOME=/h", "PATH=/usr/bin", "EMPTY=", "NOEQUALS", "A=b=c"}
	for _, tc := range []struct {
		name, want string
		ok         bool
	}{
		{"PATH", "/usr/bin", true}, // the last entry wins, as for os/exec
		{"HOME", "/h", true},
		{"EMPTY", "", true},
		{"NOEQUALS", "", false},
		{"A", "b=c", true},
		{"PAT", "", false}, // a prefix of a name is not the name
		{"MISSING", "", false},
	} {
		if got, ok := Lookup(env, tc.name); got != tc.want || ok != tc.ok {
			t.Errorf("Lookup(%q) = %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

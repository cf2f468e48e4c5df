package timer

import (
	"regexp"
	"strings"
	"testing"
)

var idPattern = regexp.MustCompile(`^cryo-[a-z0-9]+(-[a-z0-9]+)*-[0-9a-f]{8}$`)

func TestID(t *testing.T) {
	tests := []struct {
		dir  string
		want string
	}{
		// Literal values (hashes from sha256sum): a change here renames every installed unit
		// of every user, so it must be deliberate.
		{"/home/alice/plans/garden", "cryo-garden-ee66b621"},
		{"/home/alice/plans/garden/", "cryo-garden-ee66b621"},
		{"/home/alice/plans/./garden", "cryo-garden-ee66b621"},
		{"/home/alice/My Project (2026)", "cryo-my-project-2026-bf473e6f"},
		{"/srv/--Weird__Name--", "cryo-weird-name-86937ad3"},
		{"/srv/été ✓ 日本", "cryo-t-d4bebf9d"},
		{"/srv/✓✓✓", "cryo-chamber-aa6d1db0"},
		{"/", "cryo-chamber-8a5edab2"},
	}
	for _, tt := range tests {
		got := ID(tt.dir)
		if got != tt.want {
			t.Errorf("ID(%q) = %q, want %q", tt.dir, got, tt.want)
		}
		if !idPattern.MatchString(got) {
			t.Errorf("ID(%q) = %q is not a valid unit name stem", tt.dir, got)
		}
		if err := checkID(got); err != nil {
			t.Errorf("checkID(ID(%q)): %v", tt.dir, err)
		}
	}
}

func TestIDSameBaseNameDiffers(t *testing.T) {
	a, b := ID("/home/alice/garden"), ID("/home/bob/garden")
	if a == b {
		t.Fatalf("two chambers named garden got the same ID %q", a)
	}
}

func TestSlugAtMost32Bytes(t *testing.T) {
	tests := []struct {
		name string
		want string
	}{
		{strings.Repeat("a", 40), strings.Repeat("a", 32)},
		{strings.Repeat("a", 32), strings.Repeat("a", 32)},
		{strings.Repeat("a", 31) + "-b", strings.Repeat("a", 31)}, // a dash and a letter would make 33
		{strings.Repeat("a", 30) + "-b", strings.Repeat("a", 30) + "-b"},
		{strings.Repeat("a", 30) + "--bc", strings.Repeat("a", 30) + "-b"},
		{strings.Repeat("ab ", 20), strings.TrimSuffix(strings.Repeat("ab-", 11), "-")},
		{"---", "chamber"},
		{"", "chamber"},
	}
	for _, tt := range tests {
		got := slug(tt.name)
		if got != tt.want {
			t.Errorf("slug(%q) = %q, want %q", tt.name, got, tt.want)
		}
		if len(got) > 32 || strings.HasSuffix(got, "-") || strings.HasPrefix(got, "-") {
			t.Errorf("slug(%q) = %q (%d bytes) breaks the slug rules", tt.name, got, len(got))
		}
	}
}

func FuzzID(f *testing.F) {
	for _, s := range []string{"/home/a/garden", "/", "/x/" + strings.Repeat("ab-", 20), "/é/✓"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dir string) {
		if !strings.HasPrefix(dir, "/") {
			return
		}
		id := ID(dir)
		if !idPattern.MatchString(id) || len(id) > len("cryo-")+32+1+8 {
			t.Fatalf("ID(%q) = %q", dir, id)
		}
		if id != ID(dir) {
			t.Fatalf("ID(%q) is not stable", dir)
		}
	})
}

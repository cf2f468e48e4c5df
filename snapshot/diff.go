package snapshot

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
)

// Change is one path that differs between two snapshots.
type Change struct {
	Status string `json:"status"`         // added, modified, deleted, renamed, type-changed
	Path   string `json:"path"`           // the path after (the path before, for deleted)
	From   string `json:"from,omitempty"` // renamed: the path before
}

var statusWords = map[byte]string{'A': "added", 'M': "modified", 'D': "deleted", 'R': "renamed", 'T': "type-changed", 'C': "copied"}

// Changes lists the paths that differ from tree a to tree b (renames found by content, as
// `git diff -M` finds them).
func (r *Repo) Changes(ctx context.Context, a, b string) ([]Change, error) {
	out, err := r.Git(ctx, nil, "diff-tree", "-r", "-M", "--no-ext-diff", "--no-textconv", "--name-status", "-z", a, b)
	if err != nil {
		return nil, err
	}
	fields := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	var list []Change
	for i := 0; i < len(fields); {
		st := fields[i]
		i++
		if st == "" {
			continue
		}
		c := Change{Status: statusWords[st[0]]}
		if c.Status == "" {
			c.Status = st
		}
		if (st[0] == 'R' || st[0] == 'C') && i+1 < len(fields) {
			c.From, c.Path = fields[i], fields[i+1]
			i += 2
		} else if i < len(fields) {
			c.Path = fields[i]
			i++
		}
		list = append(list, c)
	}
	return list, nil
}

// Patch writes the unified diff from tree a to tree b (renames found, binary files named, not
// shown).
func (r *Repo) Patch(ctx context.Context, w io.Writer, a, b string) error {
	return r.gitTo(ctx, nil, w, "diff-tree", "-r", "-p", "-M", "--no-ext-diff", "--no-textconv", "--no-color", a, b)
}

// Stat writes a summary (git's --stat) of the changes from tree a to tree b.
func (r *Repo) Stat(ctx context.Context, w io.Writer, a, b string) error {
	return r.gitTo(ctx, nil, w, "diff-tree", "-r", "--stat=100", "-M", "--no-ext-diff", "--no-textconv", "--no-color", a, b)
}

// AfterSession finds the snapshot taken after session n (the latest, if there are several)
// and the one before it (nil when it is the first snapshot kept).
func AfterSession(entries []Entry, n int) (prev, e *Entry) {
	for i := len(entries) - 1; i >= 0; i-- {
		if entries[i].Kind == KindSession && entries[i].Session == n {
			e = &entries[i]
			if i > 0 {
				prev = &entries[i-1]
			}
			return prev, e
		}
	}
	return nil, nil
}

// treeEntry is one file of a stored tree.
type treeEntry struct {
	mode, id string
}

// files lists every file of tree (`git ls-tree -r`), by path.
func (r *Repo) files(ctx context.Context, tree string) (map[string]treeEntry, error) {
	out, err := r.Git(ctx, nil, "ls-tree", "-r", "-z", "--full-tree", tree)
	if err != nil {
		return nil, err
	}
	m := map[string]treeEntry{}
	for _, rec := range bytes.Split(out, []byte{0}) {
		if len(rec) == 0 {
			continue
		}
		meta, p, ok := bytes.Cut(rec, []byte{'\t'})
		if !ok {
			return nil, fmt.Errorf("git ls-tree: unexpected line %q", rec)
		}
		f := strings.Fields(string(meta))
		if len(f) != 3 {
			return nil, fmt.Errorf("git ls-tree: unexpected line %q", rec)
		}
		m[string(p)] = treeEntry{mode: f[0], id: f[2]}
	}
	return m, nil
}

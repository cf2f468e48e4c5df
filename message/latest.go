package message

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/cryochamber/cryochamber/internal/confined"
)

// LatestNames is Names cut to its last n (n > 0): the latest n message files of dir, in time
// order. The listing is filtered and sorted from the names and types alone, and only the names
// taken are stat'ed (Names stats every one for its link count), from the latest back, so that
// the dashboard's latest 100 of a live outbox of 1,441 replies cost 100 stats, not 1,441
// (issue 28: the stats of both live mailbox directories were a third of the chamber page).
// The same files count as in Names, and a twin left by a killed publish is settled the same
// way, when it is reached.
func LatestNames(fsys *confined.Dir, dir string, n int) ([]string, error) {
	if n <= 0 {
		return nil, errors.New("message: LatestNames needs n > 0")
	}
	ents, err := fsys.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	cand := make([]fs.DirEntry, 0, len(ents))
	for _, e := range ents {
		if e.Type().IsRegular() && ValidName(e.Name()) {
			cand = append(cand, e)
		}
	}
	slices.SortFunc(cand, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	var out []string
	for i := len(cand) - 1; i >= 0 && len(out) < n; i-- {
		if oneName(fsys, dir, cand[i]) {
			out = append(out, cand[i].Name())
		}
	}
	slices.Reverse(out)
	return out, nil
}

// oneName is Names's check of a listed regular file: one name, or two of which the other is
// the stray temporary name of a killed publish (settled here).
func oneName(fsys *confined.Dir, dir string, e fs.DirEntry) bool {
	fi, err := e.Info()
	if err != nil {
		return false
	}
	l := confined.Links(fi)
	return l <= 1 || l == 2 && fsys.Settle(path.Join(dir, e.Name())) != ""
}

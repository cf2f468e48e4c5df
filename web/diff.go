package web

import (
	"context"
	"io"
	"strings"

	"github.com/cryochamber/cryochamber/chamber"
	"github.com/cryochamber/cryochamber/internal/termtext"
)

// maxDiffBytes bounds the patch a session's page shows: a session that rewrote a large text
// file must not make a page of megabytes. `cryochamber diff --session N` prints it all.
const maxDiffBytes = 256 << 10

// diffData is what a session changed in the chamber's files, on the session's page.
type diffData struct {
	Files   int
	Skipped []string // files left out of the snapshot, with why
	Lines   []diffLine
	Cut     bool   // the patch was longer than maxDiffBytes
	Err     string // no snapshot (snapshots off, dropped, a failure): said, not an error page
}

// diffLine is one line of the patch, with its kind for the page's colours.
type diffLine struct {
	Kind string // add, del, hunk, meta, ctx
	Text string
}

// readDiff is `cryochamber diff --session N`, bounded, with every line sanitized as the log's
// are (html/template then escapes it).
func readDiff(ctx context.Context, v *view, dir string, session int) diffData {
	if session <= 0 {
		return diffData{Err: "no session has run yet"}
	}
	d, err := chamber.LoadDiff(ctx, v.with(io.Discard), dir, session, maxDiffBytes)
	if err != nil {
		return diffData{Err: errText(err)}
	}
	out := diffData{Files: len(d.Files), Cut: d.Cut}
	for _, s := range d.Skipped {
		out.Skipped = append(out.Skipped, termtext.Line(s.Path+" ("+s.Why+")"))
	}
	for _, l := range strings.Split(strings.TrimSuffix(d.Patch, "\n"), "\n") {
		if l == "" && d.Patch == "" {
			break
		}
		k := "ctx"
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"), strings.HasPrefix(l, "diff --git"), strings.HasPrefix(l, "index "):
			k = "meta"
		case strings.HasPrefix(l, "+"):
			k = "add"
		case strings.HasPrefix(l, "-"):
			k = "del"
		case strings.HasPrefix(l, "@@"):
			k = "hunk"
		}
		out.Lines = append(out.Lines, diffLine{Kind: k, Text: termtext.Line(l)})
	}
	return out
}

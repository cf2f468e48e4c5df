package main

import _ "embed" // the man page below

// manPageRoff is the manual page `cryochamber man` prints (roff, section 1; make install puts it
// in man1), generated from this app's help text by urfave/cli's ToManWithSection (manPage in
// man_test.go) and kept in docs/cryochamber.1. It is generated ahead instead of at run time
// because ToManWithSection needs urfave/cli's docs.go, which links blackfriday and md2man, whose
// package initialisation every command paid at its start (0.9 ms of about 5; issue 28): the
// shipped build leaves docs.go out (BUILD_FLAGS in the Makefile: -tags urfave_cli_no_docs).
// TestManPageFileIsCurrent fails when the help text changed and the file was not regenerated:
// `make man` (go test -run TestManPageFileIsCurrent -update .) rewrites it.
//
//go:embed docs/cryochamber.1
var manPageRoff string

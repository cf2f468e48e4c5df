// Package binary holds, in its tests, the end-to-end tests that only drive the built
// cryochamber binary: against a private systemd user manager each (timer/systemdtest), real
// mail servers, the agent CLIs, a browser, a one-node Slurm cluster, a stand-in launchctl. They
// run in parallel, beside the root package's tests; how to write one is the doc of
// internal/e2e/fixture, whose fixtures they use. The package has no code of its own and never
// calls into package main (the tests that do stay in the root package).
package binary

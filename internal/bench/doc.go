// Package bench measures cryochamber as a user meets it: whole `cryochamber` processes against
// generated chambers and a private systemd user manager (timer/systemdtest), with their wall
// time and peak RSS (ru_maxrss of the child), and the lateness of real timer firings.
//
// Everything lives in the package's benchmarks (`go test -bench`); `make bench` runs them with
// -cryo.full (the full sizes: logs of 1 MiB to 1 GiB, 500 MB of agent output, 31 wakes, 24
// timer firings) and prints one table, which docs/BENCHMARKS.md records. Without -cryo.full
// the same code runs on small inputs, so that `go test -run xxx -bench . -benchtime 1x` stays
// quick. It never asserts a time: a target that is missed is a "NO" in the table, not a
// failed test.
//
// It never touches the machine's own user manager, units or home directory: every manager,
// chamber and log lives in a temporary directory removed at the end.
package bench

#!/bin/sh
# Runs every fuzz target of the module for the given time (default 20s) each, two at a time
# with one worker each (CI machines have two cores). A crasher is written to the package's
# testdata/fuzz/<Target>/ by go test and fails the run: fix it and keep the file.
set -eu
# Fuzz with a toolchain whose coordinator does not race its own -fuzztime deadline: up to Go
# 1.26 a worker still running an input when the deadline fires can be reported as a failure,
# "context deadline exceeded", with no crasher (go.dev/issue/75804, fixed in Go 1.27). CI hit it
# on FuzzWriteRead, whose inputs each write and fsync a log, and it reproduced here 1 time in 40
# with 2 s runs under CPU load. The module itself stays on the go.mod version; only fuzzing
# takes the newer toolchain, which go downloads once from the module proxy.
export GOTOOLCHAIN="${FUZZ_GOTOOLCHAIN:-go1.27.4}"
t=${1:-20s}
jobs=${FUZZJOBS:-2}
cd "$(dirname "$0")/.."
list=$(mktemp)
trap 'rm -f "$list"' EXIT
for pkg in $(go list ./...); do
	for f in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
		echo "$pkg $f" >> "$list"
	done
done
echo "fuzzing $(wc -l < "$list") targets for $t each, $jobs at a time, with $(go version)"
# Build each package's instrumented test binary once before the parallel runs.
cut -d' ' -f1 "$list" | sort -u | while read -r pkg; do
	go test -run '^$' -fuzz '^$' -fuzztime 1x "$pkg" >/dev/null 2>&1 || true
done
export t
xargs -P "$jobs" -L 1 sh -c '
	out=$(go test -run "^\$" -fuzz "^$1\$" -fuzztime "$t" -fuzzminimizetime 5s -parallel 1 "$0" 2>&1) ||
		{ printf "== %s %s FAILED\n%s\n" "$0" "$1" "$out"; exit 255; }
	printf "== %s %s: %s\n" "$0" "$1" "$(printf "%s\n" "$out" | grep -o "execs: [0-9]*" | tail -n 1)"
' < "$list"

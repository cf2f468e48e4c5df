#!/bin/sh
# Runs every fuzz target of the module for the given time (default 20s) each.
set -eu
t=${1:-20s}
cd "$(dirname "$0")/.."
for pkg in $(go list ./...); do
	for f in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
		echo "== $pkg $f ($t)"
		go test -run "^$" -fuzz "^$f\$" -fuzztime "$t" -fuzzminimizetime 5s "$pkg"
	done
done

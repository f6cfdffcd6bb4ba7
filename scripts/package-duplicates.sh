#!/bin/sh
# `duplicates` over the package's code, the generated documents aside (the findings' reproducers and
# the rendered scoreboard repeat their templates by design): a copy of the tracked files without
# them, so that every pair listed is code written twice.
set -eu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git ls-files qconform | grep -v -e '^qconform/docs/findings/' -e '^qconform/docs/scoreboard/' -e '^qconform/golden/' |
  while read -r f; do mkdir -p "$tmp/$(dirname "$f")"; cp "$f" "$tmp/$f"; done
cd "$tmp" && duplicates --repo qconform --most "${1:-60}" --seconds 120

#!/bin/sh
# The whole corpus through cpu-ref, onnxruntime and a failing runner (the oracle with the
# round-half-away deviation), with both front-ends, into OUT/<front-end>-<runner>/; then, given a
# second folder of such reports, whether each pair says the same (scripts/same_report.py).
#
#   scripts/whole-corpus-reports.sh OUT            # write the reports (from the repository root)
#   scripts/whole-corpus-reports.sh OUT BEFORE     # ... and compare each with BEFORE's
set -u
out=$1
py=${PYTHON:-.venv/bin/python}
mkdir -p "$out"
runners="cpu-ref onnxruntime deviation"
for r in $runners; do
  case $r in
    deviation) spec="qconform.diagnosis.runner:DeviationRunner"; opt="--runner-opt=model=round-half-away" ;;
    *) spec=$r; opt="" ;;
  esac
  $py -m qconform.cli certify --runner "$spec" $opt -j 2 --report "$out/certify-$r" >"$out/certify-$r.log" 2>&1
  echo "certify $r: exit $?"
  $py -m pytest -p no:cacheprovider -q --runner="$spec" $opt --runner-workers=2 --report="$out/pytest-$r" \
    >"$out/pytest-$r.log" 2>&1
  echo "pytest $r: exit $?"
done
if [ $# -ge 2 ]; then
  status=0
  for d in "$2"/certify-* "$2"/pytest-*; do
    [ -d "$d" ] || continue
    $py scripts/same_report.py "$d/report.json" "$out/$(basename "$d")/report.json" || status=1
  done
  exit $status
fi

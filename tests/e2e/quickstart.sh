#!/bin/sh
# The quickstart run, end to end, on three bundled tasks with a small budget: the run directory
# has everything docs/archive.md names, and the budget holds.
set -u
kiln=$1; src=$2; tmp=$3
rm -rf "$tmp"; mkdir -p "$tmp"
fail() { echo "FAIL: $*"; exit 1; }
tasks="$src/tests/tasks/cpu/2_ConvBnRelu.py $src/tests/tasks/cpu/6_MinMaxTuple.py $src/tests/tasks/cpu/7_RunningMean.py"
# shellcheck disable=SC2086
"$kiln" run --config "$src/config/quickstart.toml" --tasks $tasks --out "$tmp/run" >"$tmp/stdout" 2>"$tmp/stderr"
code=$?
cat "$tmp/stdout"
[ "$code" -eq 0 ] || fail "exit code $code: $(tail -20 "$tmp/stderr")"
run=$tmp/run
for f in summary.json archive.sqlite kiln.log; do [ -s "$run/$f" ] || fail "no $f"; done
grep -q "geomean speedup" "$tmp/stdout" || fail "no closing table"
grep -q "kiln: 2_ConvBnRelu" "$tmp/stderr" || fail "no progress lines"
grep -q '"strategy": "pike-b"' "$run/summary.json" || fail "summary: strategy"
for key in geomean_speedup '"llm"' '"queries"' input_tokens output_tokens cost_usd best_speedup best_runtime_ms reference_ms evaluations correct best_candidate; do
  grep -q "$key" "$run/summary.json" || fail "summary lacks $key"
done
db=$run/archive.sqlite
q() { sqlite3 "$db" "$1"; }
[ "$(q 'PRAGMA journal_mode')" = wal ] || fail "archive not in WAL mode"
[ "$(q 'PRAGMA integrity_check')" = ok ] || fail "archive integrity"
over=$(q "SELECT COUNT(*) FROM (SELECT task, COUNT(*) AS n FROM llm_calls GROUP BY task HAVING n > 12)")
[ "$over" -eq 0 ] || fail "a task used more than its 12 queries"
[ "$(q "SELECT COUNT(*) FROM candidates WHERE status IS NOT NULL")" -gt 0 ] || fail "no evaluated candidates"
[ "$(q "SELECT COUNT(*) FROM candidates WHERE status = 'correct'")" -gt 0 ] || fail "no correct candidate"
[ "$(q "SELECT COUNT(*) FROM tasks")" -eq 3 ] || fail "tasks table"
# Every best candidate named in the summary exists.
for b in $(grep -o '"best/[^"]*"' "$run/summary.json" | tr -d '"'); do [ -s "$run/$b" ] || fail "missing $b"; done
echo "quickstart ok"

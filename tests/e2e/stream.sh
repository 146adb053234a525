#!/bin/sh
# `kiln eval --stream` as a user runs it: every manifest line gets one JSON verdict through the
# whole pipeline (the extension-building candidate through a compile worker), and a bad
# manifest is refused with its file and line before anything starts.
set -u
kiln=$1; src=$2; tmp=$3
rm -rf "$tmp"; mkdir -p "$tmp"
fail() { echo "FAIL: $*"; exit 1; }
c="$src/tests/candidates"; t="$src/tests/tasks/cpu"

printf '# task\tcandidate\n%s\t%s\n%s\t%s\n%s\t%s\n' \
  "$t/1_MLP.py" "$c/mlp_good.py" \
  "$t/1_MLP.py" "$c/mlp_wrong.py" \
  "$t/1_MLP.py" "$c/ext_pybind_error.py" >"$tmp/stream.tsv"
cat >"$tmp/kiln.toml" <<TOML
[evaluator]
devices = "cpu"
cache_dir = "$tmp/cache"
compile_workers = 1
min_samples = 5
max_timing_s = 0.3
TOML
# With every log line on (KILN_LOG=debug), stdout still carries one JSON object per verdict and
# nothing else: logs go to stderr.
KILN_LOG=debug "$kiln" eval --stream "$tmp/stream.tsv" --config "$tmp/kiln.toml" --json >"$tmp/out.jsonl" 2>"$tmp/err.txt" || fail "exit $?: $(tail -5 "$tmp/err.txt")"
cat "$tmp/out.jsonl"
[ "$(wc -l <"$tmp/out.jsonl")" -eq 3 ] || fail "expected 3 verdicts"
/usr/bin/python3 -c '
import json, sys
codes = {}
for line in sys.stdin:
    v = json.loads(line)
    codes[v["candidate"].rsplit("/", 1)[-1]] = v["code"]
want = {"mlp_good.py": "ok", "mlp_wrong.py": "tolerance", "ext_pybind_error.py": "build_failed"}
sys.exit(0 if codes == want else "codes %r, expected %r" % (codes, want))
' <"$tmp/out.jsonl" || fail "stdout is not one JSON verdict per line with its code"
grep -q "debug" "$tmp/err.txt" || fail "KILN_LOG=debug wrote no log lines to stderr"
grep 'mlp_good.py' "$tmp/out.jsonl" | grep -q '"status": "correct"' || fail "good"
grep 'mlp_wrong.py' "$tmp/out.jsonl" | grep -q '"status": "incorrect"' || fail "wrong"
# Its build fails in the compile stage, which says so through compile_ms.
grep 'ext_pybind_error.py' "$tmp/out.jsonl" | grep -q '"status": "compile_error"' || fail "compile error"
grep 'ext_pybind_error.py' "$tmp/out.jsonl" | grep -q '"compile_ms": [1-9]' || fail "compile stage"
grep -q "3 evaluations in" "$tmp/err.txt" || fail "summary line: $(cat "$tmp/err.txt")"

printf '%s\n' "$t/1_MLP.py" >"$tmp/bad.tsv"
"$kiln" eval --stream "$tmp/bad.tsv" >"$tmp/bad.out" 2>&1
[ $? -eq 2 ] || fail "bad manifest: exit code"
grep -q "bad.tsv:1: expected" "$tmp/bad.out" || fail "bad manifest: $(cat "$tmp/bad.out")"
echo "stream ok"

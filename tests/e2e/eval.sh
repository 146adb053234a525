#!/bin/sh
# `kiln eval` as a user runs it: JSON verdicts for a good and a wrong candidate, exit code 0.
set -u
kiln=$1; src=$2; tmp=$3
rm -rf "$tmp"; mkdir -p "$tmp"
fail() { echo "FAIL: $*"; exit 1; }

"$kiln" --version | grep -q "^kiln " || fail "--version"
# Without a GPU driver, the evaluators see the CPU only, and nothing crashes.
"$kiln" devices | grep -q "^cpu " || fail "devices: $("$kiln" devices 2>&1)"
"$kiln" devices --json | grep -q '"id": "cpu"' || fail "devices --json"

"$kiln" eval --task "$src/tests/tasks/cpu/1_MLP.py" --candidate "$src/tests/candidates/mlp_good.py" --json >"$tmp/good.json" 2>"$tmp/good.err" || fail "good: exit $?"
cat "$tmp/good.json"
for key in '"status": "correct"' '"speedup": [0-9]' '"runtime_ms": [0-9]' '"reference_ms": [0-9]' '"max_abs_diff": [0-9]' '"reason"'; do
  grep -q "$key" "$tmp/good.json" || fail "good: no $key"
done

"$kiln" eval --task "$src/tests/tasks/cpu/1_MLP.py" --candidate "$src/tests/candidates/mlp_wrong.py" --json >"$tmp/wrong.json" 2>"$tmp/wrong.err" || fail "wrong: exit $?"
grep -q '"status": "incorrect"' "$tmp/wrong.json" || fail "wrong: $(cat "$tmp/wrong.json")"
grep -q '"speedup": null' "$tmp/wrong.json" || fail "wrong: speedup should be null"

"$kiln" eval --task "$src/tests/tasks/cpu/1_MLP.py" --candidate "$src/tests/candidates/mlp_good.py" >"$tmp/human.txt" || fail "human: exit $?"
grep -q "1_MLP: correct speedup" "$tmp/human.txt" || fail "human: $(cat "$tmp/human.txt")"
echo "eval ok"

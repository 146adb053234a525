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
# A candidate that builds an extension goes through the compile stage first (no GPU visible),
# as in a run: a good build is timed loading it from the cache, a broken one is the verdict with
# the compiler's line and never reaches the evaluator.
cat >"$tmp/kiln.toml" <<TOML
[evaluator]
cache_dir = "$tmp/cache"
min_samples = 5
max_timing_s = 0.3
TOML
"$kiln" eval --task "$src/tests/tasks/cpu/3_Softmax.py" --candidate "$src/tests/candidates/ext_pybind_add.py" --config "$tmp/kiln.toml" --json >"$tmp/ext.json" 2>"$tmp/ext.err" || fail "ext: exit $?"
grep -q '"status": "correct"' "$tmp/ext.json" || fail "ext: $(cat "$tmp/ext.json")"
grep -q '"compile_ms": [1-9]' "$tmp/ext.json" || fail "ext: no compile stage: $(cat "$tmp/ext.json")"
grep -q '"compile_cached": false' "$tmp/ext.json" || fail "ext: first build cached?"
grep -q 'cache hit' "$tmp/ext.json" || fail "ext: the evaluation built it again"
ls "$tmp/cache/ext" | grep -q . || fail "ext: nothing in the build cache"
"$kiln" eval --task "$src/tests/tasks/cpu/1_MLP.py" --candidate "$src/tests/candidates/ext_pybind_error.py" --config "$tmp/kiln.toml" --json >"$tmp/ext_err.json" 2>"$tmp/ext_err.err" || fail "ext_err: exit $?"
grep -q '"status": "compile_error"' "$tmp/ext_err.json" || fail "ext_err: $(cat "$tmp/ext_err.json")"
grep -q '"device": "compiler"' "$tmp/ext_err.json" || fail "ext_err: not judged by the compile stage"
grep -q 'kiln_undeclared_thing' "$tmp/ext_err.json" || fail "ext_err: no compiler line"
# The config's devices are the default device, --device overrides them: a config that names a
# GPU this host lacks is refused, never timed on the CPU instead.
printf '[evaluator]\ndevices = ["cuda:3"]\n' >"$tmp/gpu.toml"
for how in "--task $src/tests/tasks/cpu/1_MLP.py --candidate $src/tests/candidates/mlp_good.py" \
           "--stream $tmp/gpu.tsv"; do
  printf '%s\t%s\n' "$src/tests/tasks/cpu/1_MLP.py" "$src/tests/candidates/mlp_good.py" >"$tmp/gpu.tsv"
  code=0; "$kiln" eval $how --config "$tmp/gpu.toml" --json >"$tmp/gpu.json" 2>"$tmp/gpu.err" || code=$?
  [ $code -eq 2 ] || fail "config devices cuda:3 ($how): exit $code, $(cat "$tmp/gpu.json")"
  grep -q "cuda:3 not found" "$tmp/gpu.err" || fail "config devices cuda:3: $(cat "$tmp/gpu.err")"
done
"$kiln" eval --task "$src/tests/tasks/cpu/1_MLP.py" --candidate "$src/tests/candidates/mlp_good.py" \
  --config "$tmp/gpu.toml" --device cpu --json >"$tmp/cpu.json" 2>"$tmp/cpu.err" \
  || fail "--device cpu over the config: exit $?: $(cat "$tmp/cpu.err")"
grep -q '"device": "cpu"' "$tmp/cpu.json" || fail "--device cpu over the config: $(cat "$tmp/cpu.json")"
echo "eval ok"

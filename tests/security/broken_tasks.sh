#!/bin/sh
# A task whose reference does not import or run is found before any query (issue 14): the run
# names it and leaves it out, spends its queries on the tasks that work, and ends with exit 2
# when no task is left.
set -u
kiln=$1; src=$2; tmp=$3
rm -rf "$tmp"; mkdir -p "$tmp/tasks"; tmp=$(cd "$tmp" && pwd)
fail() { echo "FAIL: $*"; exit 1; }
cp "$src/tests/candidates/bad_task.py" "$tmp/tasks/1_NoInputs.py"
cat >"$tmp/tasks/2_NoImport.py" <<'PY'
import torch
import torch.nn as nn
import kiln_no_such_module


class Model(nn.Module):
    def forward(self, x):
        return x


def get_inputs():
    return [torch.randn(4)]


def get_init_inputs():
    return []
PY
cp "$src/tests/tasks/cpu/1_MLP.py" "$tmp/tasks/3_MLP.py"
write_config() { # $1: file, $2: run folder
  cat >"$1" <<TOML
[run]
tasks = ["$tmp/tasks"]
out = "$2"
seed = 2
[budget]
queries_per_task = 3
[evaluator]
devices = "cpu"
trials = 2
max_timing_s = 0.3
[llm.rules]
provider = "rules"
[strategy]
kind = "pike-b"
max_ideas = 1
phases = 1
parents = 1
parallel_candidates = 1
TOML
}
write_config "$tmp/mixed.toml" "$tmp/run-mixed"
"$kiln" run --config "$tmp/mixed.toml" >"$tmp/mixed.out" 2>"$tmp/mixed.err"
code=$?
[ $code -eq 0 ] || fail "mixed: exit $code: $(tail -5 "$tmp/mixed.err")"
grep -q "task 1_NoInputs .*its reference does not run.*ValueError: kiln test: this task cannot make inputs" \
  "$tmp/mixed.err" || fail "1_NoInputs not reported: $(cat "$tmp/mixed.err")"
grep -q "task 2_NoImport .*importing the task raised ModuleNotFoundError" "$tmp/mixed.err" \
  || fail "2_NoImport not reported: $(cat "$tmp/mixed.err")"
grep -q "its reference does not run" "$tmp/run-mixed/kiln.log" || fail "kiln.log lacks the report"
python3 - "$tmp/run-mixed/summary.json" <<'PY' || exit 1
import json, sys
s = json.load(open(sys.argv[1]))
names = [t.get("task") or t.get("name") for t in s["tasks"]]
if len(s["tasks"]) != 1 or "3_MLP" not in str(s["tasks"][0]):
    print("FAIL: tasks in the summary: %r" % names); sys.exit(1)
if s["llm"]["queries"] > 3:
    print("FAIL: %d queries: the broken tasks spent some" % s["llm"]["queries"]); sys.exit(1)
PY
rm "$tmp/tasks/3_MLP.py"
write_config "$tmp/none.toml" "$tmp/run-none"
"$kiln" run --config "$tmp/none.toml" >"$tmp/none.out" 2>"$tmp/none.err"
code=$?
[ $code -eq 2 ] || fail "no usable task: exit $code, expected 2"
grep -q "no task of the run has a reference that runs" "$tmp/none.err" || fail "$(cat "$tmp/none.err")"
echo "broken tasks ok"

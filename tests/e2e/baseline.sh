#!/bin/sh
# `kiln baseline` as a user runs it: reference timings of two CPU tasks as JSON (torch.compile
# modes reported unavailable where torch lacks it), the same through --out, and exit code 2 with
# a clear message for bad input.
set -u
kiln=$1; src=$2; tmp=$3
rm -rf "$tmp"; mkdir -p "$tmp"
fail() { echo "FAIL: $*"; exit 1; }
# The reference cache goes where the test can see it, not into the user's home.
export XDG_CACHE_HOME="$tmp/cache"
py=/usr/bin/python3

cat >"$tmp/fast.toml" <<'EOF'
[evaluator]
min_samples = 5
max_samples = 8
max_timing_s = 5
cpu_threads = 1
EOF

"$kiln" baseline --tasks "$src/tests/tasks/cpu/1_MLP.py" "$src/tests/tasks/cpu/3_Softmax.py" \
  --device cpu --modes eager,compile --config "$tmp/fast.toml" >"$tmp/out.json" 2>"$tmp/err.txt" \
  || fail "baseline: exit $? $(cat "$tmp/err.txt")"
cat "$tmp/out.json"
"$py" - "$tmp/out.json" <<'EOF' || fail "baseline JSON"
import json, sys
doc = json.load(open(sys.argv[1]))
for key in ("device", "device_name", "torch_version", "python_version", "timing", "modes", "tasks"):
    assert key in doc, "no %s" % key
assert doc["device"] == "cpu", doc["device"]
assert doc["modes"] == ["eager", "compile"], doc["modes"]
assert doc["timing"]["min_samples"] == 5 and doc["timing"]["cpu_threads"] == 1, doc["timing"]
assert [t["task"] for t in doc["tasks"]] == ["1_MLP", "3_Softmax"], doc["tasks"]
import torch
for t in doc["tasks"]:
    eager = t["modes"]["eager"]
    assert 5 <= eager["n"] <= 8, eager  # the count ends sampling, not the 5 s cap
    assert 0 < eager["p10_ms"] <= eager["median_ms"] <= eager["p90_ms"], eager
    assert eager["mean_ms"] > 0, eager
    assert eager["sm_clock_mhz"] is None, eager  # no GPU clocks on a CPU
    comp = t["modes"]["compile"]
    if hasattr(torch, "compile"):
        assert comp.get("median_ms", 0) > 0 or "error" in comp, comp
    else:
        assert comp["available"] is False and "no torch.compile" in comp["reason"], comp
print("json ok")
EOF
grep -q "kiln baseline: 1_MLP eager: " "$tmp/err.txt" || fail "no progress on stderr"
ls "$tmp/cache/kiln/reference/"*.json >/dev/null 2>&1 || fail "eager timings not in the reference cache"

# --out writes the same document to a file and nothing to stdout.
"$kiln" baseline --tasks "$src/tests/tasks/cpu/3_Softmax.py" --device cpu --config "$tmp/fast.toml" \
  --out "$tmp/file.json" >"$tmp/stdout.txt" 2>/dev/null || fail "--out: exit $?"
[ -s "$tmp/stdout.txt" ] && fail "--out also printed to stdout"
"$py" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["modes"]==["eager"] and d["tasks"][0]["modes"]["eager"]["n"]>0' \
  "$tmp/file.json" || fail "--out JSON"

# Bad input: exit 2, a message that names the problem, nothing on stdout.
bad() {
  expect=$1; shift
  "$kiln" baseline "$@" >"$tmp/bad.out" 2>"$tmp/bad.err"
  rc=$?
  [ "$rc" = 2 ] || fail "$*: exit $rc, expected 2"
  grep -q "$expect" "$tmp/bad.err" || fail "$*: message $(cat "$tmp/bad.err")"
  [ -s "$tmp/bad.out" ] && fail "$*: printed to stdout"
  return 0
}
bad 'unknown mode "fast" in --modes; known: eager, compile, compile-max-autotune' \
  --tasks "$src/tests/tasks/cpu/1_MLP.py" --modes eager,fast
bad "task path $tmp/nope.py does not exist" --tasks "$tmp/nope.py"
bad "device cuda:99 not found" --tasks "$src/tests/tasks/cpu/1_MLP.py" --device cuda:99
bad 'mode "eager" is listed twice' --tasks "$src/tests/tasks/cpu/1_MLP.py" --modes eager,eager
bad "folder $tmp/no/such does not exist" --tasks "$src/tests/tasks/cpu/1_MLP.py" --out "$tmp/no/such/x.json"

# kiln devices: without a driver the CPU only, with its clock where readable, and no crash.
"$kiln" devices --json >"$tmp/devices.json" || fail "devices --json"
"$py" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d[-1]["id"]=="cpu" and "readable" in d[-1]["clocks"]' \
  "$tmp/devices.json" || fail "devices JSON: $(cat "$tmp/devices.json")"
"$kiln" devices | grep -q "^nvml: " || fail "devices: no NVML line"
echo "baseline ok"

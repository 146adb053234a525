#!/bin/sh
# The strategy presets (PIKE-B, PIKE-O, PIKE-O's best variant, PIKE-B with a reviewer role added
# by config alone) run end to end against the fake LLM server, on the CPU, within their budgets.
set -u
kiln=$1; src=$2; tmp=$3
rm -rf "$tmp"; mkdir -p "$tmp"; tmp=$(cd "$tmp" && pwd)
fail() { echo "FAIL: $*"; exit 1; }
key="sk-presets-0123456789"
{
  printf 'Ideas:\n1. Fuse the layers.\n2. Run under inference mode.\n\n```python\n'
  cat "$src/tests/candidates/mlp_good.py"
  printf '```\n'
} >"$tmp/reply.txt"
python3 "$src/tests/fake_llm/fake_llm_server.py" --port 0 --port-file "$tmp/port" --key "$key" \
  --reply-file "$tmp/reply.txt" >"$tmp/server.out" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null' EXIT
n=0
while [ ! -s "$tmp/port" ]; do
  n=$((n + 1)); [ $n -lt 2000 ] || fail "fake server did not start"
  sleep 0.01
done
export KILN_API_KEY="$key"
for preset in ${PRESETS:-pike-b pike-o pike-o-best pike-b-review}; do
  sed -e "s#^base_url = .*#base_url = \"http://127.0.0.1:$(cat "$tmp/port")/v1\"#" \
      -e 's/^queries_per_task = 300/queries_per_task = 6/' \
      -e 's/^devices = "auto"/devices = "cpu"\nmax_timing_s = 0.3\ntrials = 2/' \
      -e "s#^out = .*#out = \"$tmp/run-$preset\"#" \
      "$src/config/$preset.toml" >"$tmp/$preset.toml"
  # Two candidates in flight, so that reviews get a share of the six queries.
  [ $preset = pike-b-review ] && sed -i 's/^parallel_candidates = 10/parallel_candidates = 2/' "$tmp/$preset.toml"
  "$kiln" run --config "$tmp/$preset.toml" --tasks "$src/tests/tasks/cpu/1_MLP.py" \
    >"$tmp/$preset.stdout" 2>"$tmp/$preset.stderr" || fail "$preset: $(tail -5 "$tmp/$preset.stderr")"
  python3 - "$tmp/run-$preset/summary.json" "$preset" "$tmp/run-$preset/archive.sqlite" <<'PY' || exit 1
import json, sqlite3, sys
s = json.load(open(sys.argv[1])); preset = sys.argv[2]
kind = "pike-o" if preset.startswith("pike-o") else "pike-b"
t = s["tasks"][0]
def fail(why):
    print("FAIL: %s: %s" % (preset, why)); sys.exit(1)
if s["strategy"] != kind: fail("strategy %r" % s["strategy"])
if not 0 < t["queries"] <= 6: fail("queries %r" % t["queries"])
if t["evaluations"] < 1 or t["correct"] < 1: fail("no correct evaluation: %r" % t)
roles = {r for (r,) in sqlite3.connect(sys.argv[3]).execute("SELECT DISTINCT role FROM llm_calls")}
if preset == "pike-b-review" and "reviewer" not in roles: fail("no reviewer queries: %r" % roles)
print("%s: %s, %d queries, %d evaluations, best %.2fx, ended by %s, roles %s" % (
    preset, s["strategy"], t["queries"], t["evaluations"], t["best_speedup"], t["stop_reason"],
    ",".join(sorted(roles))))
PY
done
echo "presets ok"

#!/bin/sh
# `kiln run` against each wire format (OpenAI-compatible, Anthropic, Gemini) served by the fake
# LLM server, which fails a third of the requests (429, 500, cut streams, truncated bodies):
# every run completes, answers come through the faults, the dollar budget holds, and the key
# appears nowhere kiln writes. Then `kiln llm` for each profile, and a replay of the first run.
set -u
kiln=$1; src=$2; tmp=$3
rm -rf "$tmp"; mkdir -p "$tmp"; tmp=$(cd "$tmp" && pwd)
fail() { echo "FAIL: $*"; exit 1; }
key="sk-e2e-$(date +%s)-secret-value"
cand=$src/tests/candidates/mlp_good.py
{
  printf 'Ideas:\n1. Fuse the two linear layers with the activation.\n2. Run under inference mode.\n\n```python\n'
  cat "$cand"
  printf '```\n'
} >"$tmp/reply.txt"
python3 "$src/tests/fake_llm/fake_llm_server.py" --port 0 --port-file "$tmp/port" --key "$key" \
  --reply-file "$tmp/reply.txt" --fault-rate 0.33 --fault-kinds "429@0,500,503,cut,truncated" \
  --fault-seed 7 --log "$tmp/server.jsonl" >"$tmp/server.out" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null' EXIT
n=0
while [ ! -s "$tmp/port" ]; do
  n=$((n + 1)); [ $n -lt 2000 ] || fail "fake server did not start: $(cat "$tmp/server.out")"
  kill -0 $server 2>/dev/null || fail "fake server died: $(cat "$tmp/server.out")"
  sleep 0.01
done
port=$(cat "$tmp/port")
export KILN_E2E_KEY="$key"
for provider in openai anthropic gemini; do
  base="http://127.0.0.1:$port/v1"; [ $provider = gemini ] && base="http://127.0.0.1:$port/v1beta"
  stream=true; [ $provider = anthropic ] && stream=false
  cat >"$tmp/$provider.toml" <<TOML
[run]
tasks = ["$src/tests/tasks/cpu/1_MLP.py"]
out = "$tmp/run-$provider"
seed = 3
[budget]
queries_per_task = 6
usd_total = 0.2
[evaluator]
devices = "cpu"
trials = 2
max_timing_s = 0.3
[llm.main]
provider = "$provider"
base_url = "$base"
model = "fake-model"
api_key_env = "KILN_E2E_KEY"
max_tokens = 2000
stream = $stream
retry_initial_s = 0.01
retry_max_s = 0.05
usd_per_mtok_input = 3
usd_per_mtok_output = 15
[strategy]
kind = "pike-b"
max_ideas = 2
phases = 2
parents = 1
parallel_candidates = 2
TOML
  "$kiln" run --config "$tmp/$provider.toml" >"$tmp/$provider.stdout" 2>"$tmp/$provider.stderr"
  code=$?
  [ $code -eq 0 ] || fail "$provider: exit $code: $(tail -5 "$tmp/$provider.stderr")"
  run=$tmp/run-$provider
  python3 - "$run/summary.json" "$provider" <<'PY' || exit 1
import json, sys
s = json.load(open(sys.argv[1]))
llm, who = s["llm"], sys.argv[2]
def fail(why):
    print("FAIL: %s: %s" % (who, why)); sys.exit(1)
if llm["queries"] < 3: fail("only %d queries answered" % llm["queries"])
if llm["input_tokens"] <= 0 or llm["output_tokens"] <= 0: fail("no tokens counted")
if not 0 < llm["cost_usd"] <= 0.2: fail("cost %r outside (0, usd_total]" % llm["cost_usd"])
t = s["tasks"][0]
if t["llm"]["queries"] != llm["queries"]: fail("per-task totals differ from the run's")
if t["correct"] < 1: fail("no correct candidate from the fake LLM's program")
print("%s: %d queries, %d in / %d out tokens, $%.4f, best %.2fx" % (
    who, llm["queries"], llm["input_tokens"], llm["output_tokens"], llm["cost_usd"],
    t["best_speedup"]))
PY
  for f in "$run/summary.json" "$run/archive.sqlite" "$run/kiln.log" "$tmp/$provider.stdout" \
    "$tmp/$provider.stderr"; do
    grep -q "$key" "$f" && fail "$provider: the key leaked into $f"
  done
  FAKE="$tmp/llm-$provider.json"
  "$kiln" llm --config "$tmp/$provider.toml" --profile main --prompt "Say hi" --json >"$FAKE" \
    || fail "$provider: kiln llm failed"
  for k in text input_tokens output_tokens cost_usd; do grep -q "\"$k\"" "$FAKE" || fail "kiln llm: no $k"; done
done
faults=$(grep -c '"fault": *"[a-z0-9]' "$tmp/server.jsonl")
[ "$faults" -gt 0 ] || fail "the server injected no faults"
echo "faults injected: $faults"

# A tight dollar cap: each query reserves its worst case (max_tokens 2000 at $15/M = $0.03 plus
# the prompt), so the run stops early, by budget, and never spends past the cap.
sed -e 's/usd_total = 0.2/usd_total = 0.05/' -e "s#run-openai#run-tight#" "$tmp/openai.toml" >"$tmp/tight.toml"
"$kiln" run --config "$tmp/tight.toml" >"$tmp/tight.stdout" 2>"$tmp/tight.stderr" || fail "tight run failed"
python3 - "$tmp/run-tight/summary.json" <<'PY' || exit 1
import json, sys
s = json.load(open(sys.argv[1]))
t = s["tasks"][0]
if not s["llm"]["cost_usd"] <= 0.05: print("FAIL: tight: spent %r" % s["llm"]["cost_usd"]); sys.exit(1)
if t["stop_reason"] != "budget" or t["queries"] >= 6: print("FAIL: tight: %r" % t); sys.exit(1)
print("tight cap: %d queries, $%.4f of $0.05" % (t["queries"], s["llm"]["cost_usd"]))
PY
# A dollar cap below one query's worst case: the run refuses every query and still ends well.
sed -e 's/usd_total = 0.2/usd_total = 0.0001/' -e "s#run-openai#run-capped#" "$tmp/openai.toml" >"$tmp/capped.toml"
"$kiln" run --config "$tmp/capped.toml" >"$tmp/capped.stdout" 2>"$tmp/capped.stderr" || fail "capped run failed"
grep -q '"queries": 0' "$tmp/run-capped/summary.json" || fail "capped run sent queries"

# Replay: the openai run's answers, matched by prompt, with no server at all.
kill $server 2>/dev/null
sed -e 's/provider = "openai"/provider = "replay"/' -e "s#run-openai#run-replay#" \
  -e "s#^base_url.*#replay_from = \"$tmp/run-openai/archive.sqlite\"#" "$tmp/openai.toml" >"$tmp/replay.toml"
python3 - "$kiln" "$tmp/replay.toml" "$tmp/run-openai/archive.sqlite" <<'PY' || fail "replay did not answer a recorded prompt"
import sqlite3, subprocess, sys
kiln, cfg, db = sys.argv[1:4]
prompt = sqlite3.connect(db).execute(
    "SELECT prompt FROM llm_calls WHERE error IS NULL OR error = '' ORDER BY id LIMIT 1").fetchone()[0]
r = subprocess.run([kiln, "llm", "--config", cfg, "--profile", "main", "--prompt", prompt],
                   capture_output=True, text=True)
sys.exit(0 if r.returncode == 0 and "ModelNew" in r.stdout else 1)
PY
"$kiln" llm --config "$tmp/replay.toml" --profile main --prompt "never asked" >/dev/null 2>"$tmp/replay-miss.stderr" \
  && fail "replay answered a prompt it never saw"
grep -q "no recorded answer" "$tmp/replay-miss.stderr" || fail "replay miss: $(cat "$tmp/replay-miss.stderr")"
echo "llm_run ok"

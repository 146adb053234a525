#!/bin/sh
# A PIKE-B run against a fake LLM that answers in turn with a good program, a broken one, a
# numerically wrong one, a cheating one (it patches torch.allclose), prose without a program,
# and once slowly: every kind gets its verdict (compile_error, incorrect, rejected, correct), the
# error fixer is asked about the failures, and the run stays within its budget.
set -u
kiln=$1; src=$2; tmp=$3
rm -rf "$tmp"; mkdir -p "$tmp/replies"; tmp=$(cd "$tmp" && pwd)
fail() { echo "FAIL: $*"; exit 1; }
c=$src/tests/candidates
fence() { printf '%s\n\n```python\n' "$1"; cat "$2"; printf '```\n'; }
{ printf 'Ideas:\n1. Fuse the layers.\n2. Run under inference mode.\n3. Use channels last.\n\n'
  fence "A faster version:" "$c/mlp_good.py"; } >"$tmp/replies/a_good.txt"
fence "This one does not parse:" "$c/mlp_syntax.py" >"$tmp/replies/b_broken.txt"
fence "This one computes the wrong thing:" "$c/mlp_wrong.py" >"$tmp/replies/c_wrong.txt"
fence "This one cheats:" "$c/integrity/patch_allclose.py" >"$tmp/replies/d_cheat.txt"
printf 'I would fuse the layers, but I will not write the code.\n' >"$tmp/replies/e_prose.txt"
python3 "$src/tests/fake_llm/fake_llm_server.py" --port 0 --port-file "$tmp/port" \
  --key sk-mixed-0123456789 --reply-dir "$tmp/replies" --faults "ok,ok,slow@1.5" \
  --log "$tmp/server.jsonl" >"$tmp/server.out" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null' EXIT
n=0
while [ ! -s "$tmp/port" ]; do
  n=$((n + 1)); [ $n -lt 2000 ] || fail "fake server did not start: $(cat "$tmp/server.out")"
  sleep 0.01
done
export KILN_API_KEY=sk-mixed-0123456789
sed -e "s#^base_url = .*#base_url = \"http://127.0.0.1:$(cat "$tmp/port")/v1\"#" \
    -e 's/^queries_per_task = 300/queries_per_task = 16/' \
    -e 's/^devices = "auto"/devices = "cpu"\nmax_timing_s = 0.3\ntrials = 2/' \
    -e 's/^parallel_candidates = 10/parallel_candidates = 3/' \
    -e 's/^max_attempts = 5/max_attempts = 2/' \
    -e "s#^out = .*#out = \"$tmp/run\"#" "$src/config/pike-b.toml" >"$tmp/run.toml"
"$kiln" run --config "$tmp/run.toml" --tasks "$src/tests/tasks/cpu/1_MLP.py" >"$tmp/stdout" \
  2>"$tmp/stderr" || fail "run: $(tail -5 "$tmp/stderr")"
python3 - "$tmp/run" <<'PY' || exit 1
import json, sqlite3, sys
run = sys.argv[1]
s = json.load(open(run + "/summary.json"))
db = sqlite3.connect(run + "/archive.sqlite")
def fail(why):
    print("FAIL: " + why); sys.exit(1)
statuses = {st: n for st, n in db.execute(
    "SELECT status, COUNT(*) FROM candidates WHERE status IS NOT NULL GROUP BY status")}
for want in ("correct", "compile_error", "incorrect", "rejected"):
    if not statuses.get(want):
        fail("no %s verdict among %r" % (want, statuses))
reasons = [r for (r,) in db.execute("SELECT reason FROM candidates WHERE status = 'rejected'")]
if not any("allclose" in r for r in reasons):
    fail("the cheat was not rejected for patching allclose: %r" % reasons)
fixes = db.execute("SELECT COUNT(*) FROM llm_calls WHERE kind IN ('fix', 'fix_correctness')"
                   ).fetchone()[0]
if fixes < 1:
    fail("the error fixer was never asked")
t = s["tasks"][0]
if t["queries"] > 16: fail("budget exceeded: %d queries" % t["queries"])
if t["correct"] < 1: fail("no correct candidate")
print("verdicts %r, %d fix queries, %d queries, best %.2fx" % (statuses, fixes, t["queries"],
                                                                t["best_speedup"]))
PY
grep -q '"fault": *"slow@1.5"' "$tmp/server.jsonl" || grep -q 'slow' "$tmp/server.jsonl" || fail "no slow reply served"
echo "mixed_llm ok"

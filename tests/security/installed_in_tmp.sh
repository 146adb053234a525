#!/bin/sh
# kiln and its launcher copied beneath /tmp, as a build or an unpacked release there leaves them:
# a sandboxed runner gets its own /tmp before the launcher runs, so the launcher must be
# reached by something other than its path. With the full sandbox required, the verdict is
# still `correct`.
set -u
kiln=$1; src=$2; tmp=$3
rm -rf "$tmp"; mkdir -p "$tmp"; tmp=$(cd "$tmp" && pwd)
fail() { echo "FAIL: $*"; exit 1; }
bin=$(mktemp -d /tmp/kiln-installed.XXXXXX) || fail "no folder in /tmp"
trap 'rm -rf "$bin"' EXIT
cp "$kiln" "$(dirname "$kiln")/kiln-sandbox" "$bin/" || fail "cannot copy kiln and kiln-sandbox"
# Nothing of the checkout named to the runners: only what kiln itself keeps.
unset KILN_TMP_KEEP
"$bin/kiln" devices >"$tmp/devices.txt" 2>&1 || fail "kiln devices: $(cat "$tmp/devices.txt")"
if grep -q "not isolated\|sandbox: off\|missing" "$tmp/devices.txt"; then
  echo "SKIP: runners get no full sandbox here: $(cat "$tmp/devices.txt")"
  exit 77
fi
cp "$src/tests/tasks/cpu/3_Softmax.py" "$src/tests/security/candidates/honest.py" "$bin/"
cat >"$tmp/kiln.toml" <<TOML
[evaluator]
devices = "cpu"
sandbox = "required"
cache_dir = "$bin/cache"
trials = 2
max_timing_s = 0.2
TOML
"$bin/kiln" eval --task "$bin/3_Softmax.py" --candidate "$bin/honest.py" --config "$tmp/kiln.toml" \
  --json >"$tmp/out.json" 2>"$tmp/err.txt" || fail "kiln eval: exit $?: $(tail -5 "$tmp/err.txt")"
python3 - "$tmp/out.json" <<'PY' || fail "verdict: $(cat "$tmp/out.json")"
import json, sys
v = json.load(open(sys.argv[1]))
sys.exit(0 if v["status"] == "correct" else 1)
PY
echo "installed in /tmp: correct"

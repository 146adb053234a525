#!/bin/sh
# No runner outlives the daemon: `kiln eval` is killed with SIGKILL (no handler, no cleanup)
# while its candidate hangs after starting two grandchildren, one in the runner's process group
# and one in a session of its own. Every runner of that kiln, and both grandchildren, must be
# gone within seconds: the runners die with their parent (PR_SET_PDEATHSIG) and, as inits of
# their own PID namespaces, take everything they started with them.
set -u
kiln=$1; src=$2; tmp=$3
rm -rf "$tmp"; mkdir -p "$tmp"
fail() { echo "FAIL: $*"; [ -n "${pid:-}" ] && kill -9 "$pid" 2>/dev/null; cleanup; exit 1; }
# An odd sleep duration is the marker that finds the grandchildren in the process table.
marker="7$(date +%N | cut -c1-4).$$"
cleanup() { pkill -9 -f "sleep $marker" 2>/dev/null; }
count() { pgrep -f "$1" | wc -l; }
# Polls (at most $2 tenths of a second) until the shell condition $1 holds.
within() {
  i=0
  while ! eval "$1"; do
    i=$((i + 1)); [ "$i" -le "$2" ] || return 1
    sleep 0.1
  done
}

cat >"$tmp/candidate.py" <<PY
# Starts two grandchildren, then hangs (kiln is killed meanwhile). Through libc, as a hostile
# candidate would, since the static scan refuses subprocess.
import ctypes
import time

import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, hidden_sizes, out_features):
        super().__init__()
        self.proj = nn.Linear(in_features, out_features)

    def forward(self, x):
        ctypes.CDLL(None).system(b"sleep $marker & setsid sleep $marker &")
        while True:
            time.sleep(1)
PY

# One kiln, killed; $1: extra arguments for `kiln eval`. Sets `levels` to the PID namespace
# depth the grandchildren had.
scenario() {
  TMPDIR="$tmp" "$kiln" eval --task "$src/tests/tasks/cpu/1_MLP.py" --candidate "$tmp/candidate.py" \
    --timeout 300 $1 >"$tmp/out.txt" 2>"$tmp/err.txt" &
  pid=$!
  runners="$tmp/kiln-eval-$pid/"
  within '[ "$(count "sleep $marker")" -ge 2 ] || ! kill -0 $pid 2>/dev/null' 600 \
    || fail "the candidate's grandchildren never started: $(tail -5 "$tmp/err.txt")"
  kill -0 "$pid" 2>/dev/null || fail "kiln ended early: $(cat "$tmp/out.txt" "$tmp/err.txt")"
  [ "$(count "$runners")" -ge 1 ] || fail "no runner of kiln $pid found"
  # NSpid lists one pid per namespace level.
  grandchild=$(pgrep -f "sleep $marker" | head -1)
  levels=$(awk '/^NSpid:/ { print NF - 1 }' "/proc/$grandchild/status" 2>/dev/null)
  kill -9 "$pid"
  wait "$pid" 2>/dev/null
  within '[ "$(count "$runners")" -eq 0 ]' 100 || fail "runners survived: $(pgrep -af "$runners")"
}

scenario ""
if [ "${levels:-1}" -ge 2 ]; then
  within '[ "$(count "sleep $marker")" -eq 0 ]' 100 \
    || fail "grandchildren survived: $(pgrep -af "sleep $marker")"
  # The control: with the sandbox off the runner still dies with kiln, but what it started
  # survives; the case above would fail without the namespace.
  printf '[evaluator]\nsandbox = "off"\n' >"$tmp/off.toml"
  scenario "--config $tmp/off.toml"
  [ "${levels:-1}" -eq 1 ] || fail "sandbox off still made a PID namespace"
  [ "$(count "sleep $marker")" -ge 1 ] || fail "control: grandchildren died without a namespace"
  cleanup
else
  # Without PID namespaces (not permitted here) nothing kills them: say so.
  echo "note: runners ran without a PID namespace; grandchildren are not covered"
  cleanup
fi
echo "sigkill ok"

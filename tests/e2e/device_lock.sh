#!/bin/sh
# Two `kiln eval` processes on one host never evaluate on one GPU at once. They share a fake GPU
# of the test hook (KILN_TEST_FAKE_GPUS: its runners see no GPU and run on the CPU), each under
# another mask and another name for it; interpreter wrappers log every runner of each. A's facts
# runner (which every evaluation waits for) is held on a FIFO until B has said that it waits for
# A, so without the lock B's runners would start, and time, while A's are alive. The script
# waits on FIFOs and on kiln's own output, never on a clock.
set -u
kiln=$1; src=$2; tmp=$3
rm -rf "$tmp"; mkdir -p "$tmp"
fail() {
  echo "FAIL: $*"
  echo go >&5 # let A's held runner go, so that nothing is left waiting
  exit 1
}
export XDG_CACHE_HOME="$tmp/cache"
export KILN_DEVICE_LOCK_DIR="$tmp/locks"
gpu0=GPU-6b696c6e-0000-4000-8000-000000000000
gpu1=GPU-6b696c6e-0000-4000-8000-000000000001
export KILN_TEST_FAKE_GPUS="$gpu0,$gpu1"
unset CUDA_VISIBLE_DEVICES
py=/usr/bin/python3
task="$src/tests/tasks/cpu/1_MLP.py"
good="$src/tests/candidates/mlp_good.py"
# Held open read-write by this script, so that neither side of a FIFO blocks on opening it.
mkfifo "$tmp/a-ready" "$tmp/a-go" "$tmp/b-stderr"
exec 4<>"$tmp/a-ready" 5<>"$tmp/a-go"

# kiln devices: kiln's mask decides which GPU is cuda:0; runners are given its UUID.
CUDA_VISIBLE_DEVICES=1 "$kiln" devices --json >"$tmp/devices.json" 2>"$tmp/devices.err" ||
  fail "devices: $(cat "$tmp/devices.err")"
"$py" - "$tmp/devices.json" "$gpu1" <<'PY' || fail "devices --json: $(cat "$tmp/devices.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert [x["id"] for x in d] == ["cuda:0", "cpu"], d
g = d[0]
assert g["uuid"] == sys.argv[2] and g["physical_index"] == 1, g
assert g["runner_visible_devices"] == sys.argv[2] and g["test_fake"] is True, g
assert g["held_by"] is None and d[1]["runner_visible_devices"] == "", d
PY
grep -q "test hook KILN_TEST_FAKE_GPUS is set" "$tmp/devices.err" ||
  fail "no warning that the test hook is on: $(cat "$tmp/devices.err")"

# One interpreter per eval: it logs each harness runner (not find_python's probe) with the
# CUDA_VISIBLE_DEVICES kiln gave it; A's facts runner first says so, then waits for the go.
for who in a b c; do
  cat >"$tmp/python-$who" <<SH
#!/bin/sh
case "\$3" in *kiln_harness.py) ;; *) exec "$py" "\$@" ;; esac
echo "$who start \$\$ \$CUDA_VISIBLE_DEVICES" >>"$tmp/events"
case "$who \$4" in "a "*/facts/job.json)
  echo ready >"$tmp/a-ready"
  read -r go <"$tmp/a-go" ;;
esac
"$py" "\$@"
rc=\$?
echo "$who end \$\$" >>"$tmp/events"
exit \$rc
SH
  chmod +x "$tmp/python-$who"
  cat >"$tmp/$who.toml" <<TOML
[evaluator]
python = "$tmp/python-$who"
sandbox = "off"
pool_size = 0
min_samples = 5
max_timing_s = 0.3
TOML
done
echo "device_lock_wait_s = 0" >>"$tmp/c.toml"

# A: the fake GPU 1 is its cuda:0.
(
  CUDA_VISIBLE_DEVICES=1 "$kiln" eval --task "$task" --candidate "$good" --device cuda:0 \
    --config "$tmp/a.toml" --json >"$tmp/a.json" 2>"$tmp/a.err"
  echo "ended $?" >"$tmp/a-ready"
) &
read -r state <&4
[ "$state" = ready ] || fail "A's facts runner never started ($state): $(cat "$tmp/a.err")"
lock="$tmp/locks/kiln-gpu-${gpu1#GPU-}.lock"
pid_a=$(sed -n 's/^pid=//p' "$lock")
[ -n "$pid_a" ] || fail "no holder's record in $lock: $(cat "$lock")"
grep -q "^device=cuda:0$" "$lock" || fail "the record names another device: $(cat "$lock")"

# C does not wait (device_lock_wait_s = 0): it names A, which calls the GPU cuda:0, and exits 1.
"$kiln" eval --task "$task" --candidate "$good" --device cuda:1 --config "$tmp/c.toml" --json \
  >"$tmp/c.json" 2>"$tmp/c.err"
code=$?
[ "$code" -eq 1 ] || fail "C: exit $code, expected 1: $(cat "$tmp/c.err")"
grep -q "^kiln: cuda:1 is held by pid $pid_a (kiln eval, started [0-9:]*, as its cuda:0); not waiting" \
  "$tmp/c.err" || fail "C: $(cat "$tmp/c.err")"
[ -s "$tmp/c.json" ] && fail "C printed a verdict: $(cat "$tmp/c.json")"
# The other GPU is free meanwhile: the lock is per device.
"$kiln" eval --task "$task" --candidate "$good" --device cuda:0 --config "$tmp/c.toml" --json \
  >"$tmp/d.json" 2>"$tmp/d.err" || fail "D: exit $?: $(cat "$tmp/d.err")"
grep -q '"status": "correct"' "$tmp/d.json" || fail "D: $(cat "$tmp/d.json")"
grep "^c start" "$tmp/events" | grep -vq " $gpu0\$" && fail "D's runners saw another GPU: $(cat "$tmp/events")"

# B: the same GPU as its cuda:1 (no mask). It must say that it waits for A, and start nothing.
"$kiln" eval --task "$task" --candidate "$good" --device cuda:1 --config "$tmp/b.toml" --json \
  >"$tmp/b.json" 2>"$tmp/b-stderr" &
pid_b=$!
exec 3<"$tmp/b-stderr"
waited=no
while IFS= read -r line <&3; do
  echo "$line" >>"$tmp/b.err"
  case "$line" in "kiln: cuda:1 is held by pid $pid_a (kiln eval, started "*"waiting up to 600 s"*)
    waited=yes; break ;;
  esac
done
[ $waited = yes ] || fail "B never waited for A: $(cat "$tmp/b.err")"
cat <&3 >>"$tmp/b.err" &
grep -q "^b " "$tmp/events" && fail "B started a runner while A held the GPU: $(cat "$tmp/events")"

echo go >&5
read -r state <&4
[ "$state" = "ended 0" ] || fail "A: $state: $(cat "$tmp/a.err")"
wait "$pid_b" || fail "B: exit $?: $(cat "$tmp/b.err")"
grep -q '"status": "correct"' "$tmp/a.json" || fail "A: $(cat "$tmp/a.json")"
grep -q '"status": "correct"' "$tmp/b.json" || fail "B: $(cat "$tmp/b.json")"

# Every runner of A ended before the first of B started, and each saw the shared GPU alone.
"$py" - "$tmp/events" "$gpu1" <<'PY' || fail "runner order: $(cat "$tmp/events")"
import sys
events = [l.split() for l in open(sys.argv[1]) if l[0] in "ab"]
whos = [e[0] for e in events]
assert "a" in whos and "b" in whos, whos
first_b = whos.index("b")
assert "a" not in whos[first_b:], whos
starts = [e for e in events if e[1] == "start"]
assert all(len(e) == 4 and e[3] == sys.argv[2] for e in starts), starts
assert sum(e[1] == "end" for e in events) == len(starts), events
PY
[ -z "$(sed -n 's/^pid=//p' "$lock")" ] || fail "the lock file still names a holder: $(cat "$lock")"
echo "device_lock ok"

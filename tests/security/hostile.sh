#!/bin/sh
# The hostile candidates of tests/security/README.md, each followed by an honest one, through one
# `kiln eval --stream` as a user runs it, with secrets planted where kiln and its user keep
# them. Afterwards: every verdict as its row allows, every honest one correct, no planted secret
# in any byte kiln printed or wrote, nobody at the host's listeners, nothing left behind.
set -u
kiln=$1; src=$2; tmp=$3
rm -rf "$tmp"; mkdir -p "$tmp"; tmp=$(cd "$tmp" && pwd)
fail() { echo "FAIL: $*"; exit 1; }
here="$src/tests/security"

# The full sandbox or nothing: on a machine that cannot give runners their own namespaces,
# Landlock and seccomp, these candidates would reach the host for real.
"$kiln" devices >"$tmp/devices.txt" 2>&1 || fail "kiln devices: $(cat "$tmp/devices.txt")"
if grep -q "not isolated\|sandbox: off\|missing" "$tmp/devices.txt"; then
  echo "SKIP: runners get no full sandbox here: $(cat "$tmp/devices.txt")"
  exit 77
fi

mark="m$$x$(date +%s)"
key="sk-sec-$mark-providerkey"
token="ghp-sec-$mark-servicetoken"
password="pw-sec-$mark-database"
filekey="sk-sec-$mark-filekey"
history="hist-sec-$mark-typedsecret"
mkdir -p "$tmp/secret"
# The user's home lies outside the test's folder, which is beneath the checkout that the suite
# lets runners read (KILN_TMP_KEEP): a home anywhere kiln names would prove nothing.
home=$(mktemp -d /var/tmp/kiln-sec-home.XXXXXX) || fail "no folder in /var/tmp for the home"
trap 'rm -rf "$home"' EXIT
chmod 700 "$tmp/secret"
printf '%s\n' "$filekey" >"$tmp/secret/provider.key"
chmod 600 "$tmp/secret/provider.key"
cp "$tmp/secret/provider.key" "$tmp/planted.txt"
chmod 600 "$tmp/planted.txt"
# A home as users have them: world-readable files beneath a folder anyone may enter.
printf 'export SERVICE_TOKEN=%s\n' "$history" >"$home/.bash_history"
chmod 755 "$home"; chmod 644 "$home/.bash_history"
cat >"$tmp/kiln.toml" <<TOML
# kiln's config: the provider key lives in $tmp/secret/provider.key
[evaluator]
devices = "${KILN_SECURITY_DEVICE:-cpu}"
sandbox = "required"
cache_dir = "$tmp/cache"
compile_workers = 1
trials = 2
min_samples = 5
max_timing_s = 0.2
timeout_s = 120
[llm.main]
provider = "openai"
base_url = "http://127.0.0.1:9/v1"
model = "fake-model"
api_key_file = "$tmp/secret/provider.key"
TOML

# The host's listeners: a TCP port on loopback and an abstract unix socket; each writes down
# whoever reached it.
# The abstract name goes through the environment: in the listener's command line, the check for
# processes left behind would find the listener.
LISTEN_NAME="kiln-sec-$mark" python3 - "$tmp/listen.port" "$tmp/listen.log" >"$tmp/listen.out" 2>&1 <<'PY' &
import os, select, socket, sys
port_file, log = sys.argv[1:]
name = os.environ["LISTEN_NAME"]
tcp = socket.socket(); tcp.bind(("127.0.0.1", 0)); tcp.listen(8)
unix = socket.socket(socket.AF_UNIX); unix.bind("\0" + name); unix.listen(8)
open(port_file + ".tmp", "w").write(str(tcp.getsockname()[1]))
os.rename(port_file + ".tmp", port_file)
while True:
    for s in select.select([tcp, unix], [], [])[0]:
        conn, _ = s.accept()
        with open(log, "a") as f:
            f.write("connection on %s\n" % ("tcp" if s is tcp else "unix"))
        conn.close()
PY
listener=$!
trap 'kill $listener 2>/dev/null; rm -rf "$home"' EXIT
n=0
while [ ! -s "$tmp/listen.port" ]; do
  n=$((n + 1)); [ $n -lt 1000 ] || fail "listener did not start: $(cat "$tmp/listen.out")"
  sleep 0.01
done
port=$(cat "$tmp/listen.port")

# The rows, their candidates with the run's values filled in, and the stream manifest: each
# hostile candidate, then its honest one.
mkdir -p "$tmp/cand"
grep '^| [^-c]' "$here/README.md" | grep '\.py |' >"$tmp/rows.txt"
[ "$(wc -l <"$tmp/rows.txt")" -ge 30 ] || fail "fewer than 30 rows in README.md"
: >"$tmp/stream.tsv"
i=0
while IFS='|' read -r _ cand task honest _rest; do
  cand=$(echo $cand); task=$(echo $task); honest=$(echo $honest)
  i=$((i + 1))
  [ -f "$here/candidates/$cand" ] && from="$here/candidates/$cand" || from="$here/$cand"
  [ -f "$from" ] || fail "row $i: no candidate $cand"
  to="$tmp/cand/$i-$(basename "$cand")"
  sed -e "s|@MARK@|$mark|g" -e "s|@PORT@|$port|g" -e "s|@PLANTED@|$tmp/planted.txt|g" \
      -e "s|@KEYFILE@|$tmp/secret/provider.key|g" -e "s|@CONFIG@|$tmp/kiln.toml|g" \
      -e "s|@HOME@|$home|g" "$from" >"$to"
  [ -f "$here/candidates/$honest" ] && good="$here/candidates/$honest" || good="$here/$honest"
  printf '%s\t%s\n%s\t%s\n' "$src/tests/tasks/cpu/$task.py" "$to" \
    "$src/tests/tasks/cpu/$task.py" "$good" >>"$tmp/stream.tsv"
done <"$tmp/rows.txt"

# Secrets where kiln keeps them: its environment (a provider key, a token, a password, each
# named as such variables are), the key file, the user's home.
HOME="$home" KILN_SEC_API_KEY="$key" GITHUB_TOKEN="$token" DB_PASSWORD="$password" \
  "$kiln" eval --stream "$tmp/stream.tsv" --config "$tmp/kiln.toml" --json \
  >"$tmp/out.jsonl" 2>"$tmp/err.txt" &
kiln_pid=$!
wait $kiln_pid
code=$?
[ $code -eq 0 ] || fail "kiln eval --stream: exit $code: $(tail -5 "$tmp/err.txt")"

# The verdicts fail the test at the end: the checks after them still run and say what they see.
verdicts_ok=1
python3 - "$tmp/rows.txt" "$tmp/out.jsonl" <<'PY' || verdicts_ok=0
import json, sys
rows = [[c.strip().replace("\0", "|") for c in line.replace("\\|", "\0").split("|")[1:-1]]
        for line in open(sys.argv[1])]
verdicts = [json.loads(line) for line in open(sys.argv[2])]
bad = []
if len(verdicts) != 2 * len(rows):
    bad.append("%d verdicts for %d rows" % (len(verdicts), len(rows)))
# Row i is manifest line 2i - 1, its honest candidate line 2i.
by_line = {v["line"]: v for v in verdicts}
for i, (cand, task, honest, allowed, reason, top) in enumerate(rows, 1):
    v = by_line.get(2 * i - 1)
    if v is None:
        bad.append("row %d %s: no verdict" % (i, cand)); continue
    after = by_line.get(2 * i)
    if after is None or after["status"] != "correct":
        bad.append("row %d: the honest candidate after %s: %s" % (
            i, cand, "no verdict" if after is None else "%s (%s)" % (
                after["status"], after.get("reason", "")[:300])))
    status, why = v["status"], v.get("reason", "")
    print("%-52s %-13s %-6s %s" % (cand.split("/")[-1], status,
                                   "%.2fx" % v["speedup"] if v.get("speedup") else "",
                                   why[:100].replace("\n", " ")))
    if status not in allowed.split("|"):
        bad.append("row %d %s: %s (%s), allowed %s" % (i, cand, status, why[:300], allowed))
    if reason and reason not in why:
        bad.append("row %d %s: reason lacks %r: %s" % (i, cand, reason, why[:300]))
    # Every figure of a task divides by the same reference timing: one taken while the machine
    # was busy lifts them all alike. A faked timing also stands out against the honest
    # candidate timed right after it.
    mine, theirs = v.get("speedup") or 0, (after or {}).get("speedup") or 0
    if status == "correct" and top and mine > float(top) and mine > 1.5 * theirs:
        bad.append("row %d %s: speedup %s above its honest figure %s (and %s for %s after it)" % (
            i, cand, mine, top, theirs, honest))
    for field in ("reason", "stderr_tail", "stdout_tail"):
        text = v.get(field) or ""
        if any(ord(ch) < 32 and ch not in "\n\t" for ch in text):
            bad.append("row %d %s: control characters in %s: %r" % (i, cand, field, text[:120]))
        if len(text) > 8192:
            bad.append("row %d %s: %s of %d bytes" % (i, cand, field, len(text)))
print("\n".join("BAD: " + b for b in bad))
sys.exit(1 if bad else 0)
PY

# No planted secret anywhere kiln wrote or printed: stdout, stderr, the cache and any file
# under the test's folder but the secrets' own.
for s in "$key" "$token" "$password" "$filekey" "$history"; do
  if grep -rl --exclude-dir=secret --exclude=planted.txt --exclude=.bash_history -e "$s" "$tmp" "$home" \
      >"$tmp/leak.txt" 2>/dev/null; then
    fail "secret $s in: $(cat "$tmp/leak.txt")"
  fi
done
[ ! -s "$tmp/listen.log" ] || fail "a candidate reached the host's listeners: $(cat "$tmp/listen.log")"
# The flood stayed in the runner's files: kiln's own output is small.
# (KILN_SECURITY_STDERR_MAX: a debug log is larger.)
max_err=${KILN_SECURITY_STDERR_MAX:-1048576}
[ "$(wc -c <"$tmp/err.txt")" -lt "$max_err" ] || fail "stderr of $(wc -c <"$tmp/err.txt") bytes"
[ "$(wc -c <"$tmp/out.jsonl")" -lt 4194304 ] || fail "stdout of $(wc -c <"$tmp/out.jsonl") bytes"

# Nothing left behind: the candidates' files on the host, their processes, kiln's scratch.
ls -d /dev/shm/kiln-sec-"$mark"* /tmp/kiln-sec-"$mark"* 2>/dev/null && fail "files left behind"
if pgrep -f "kiln-sec-$mark" >"$tmp/left.txt"; then
  fail "processes left behind: $(ps -o pid,args -p "$(paste -sd, "$tmp/left.txt")")"
fi
[ ! -e "/tmp/kiln-stream-$kiln_pid" ] || fail "kiln's scratch /tmp/kiln-stream-$kiln_pid is still there"
[ $verdicts_ok -eq 1 ] || fail "verdicts (above)"
echo "hostile ok: $(grep -c . "$tmp/rows.txt") hostile candidates, each followed by an honest one"

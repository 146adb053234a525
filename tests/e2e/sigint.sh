#!/bin/sh
# SIGINT during a run: in-flight work finishes, the summary says interrupted, the archive is
# consistent, and no runner process is left behind. The script waits on kiln's own progress
# output, not on a clock.
set -u
kiln=$1; src=$2; tmp=$3
rm -rf "$tmp"; mkdir -p "$tmp"
fail() { echo "FAIL: $*"; exit 1; }
mkfifo "$tmp/progress"
"$kiln" run --config "$src/config/quickstart.toml" --tasks "$src/tests/tasks/cpu" --out "$tmp/run" \
  >"$tmp/stdout" 2>"$tmp/progress" &
pid=$!
# The first progress line means a candidate has been judged; stop the run then.
exec 3<"$tmp/progress"
while IFS= read -r line <&3; do
  echo "$line" >>"$tmp/stderr"
  case "$line" in "kiln: "*"queries"*) break ;; esac
done
kill -INT "$pid"
cat <&3 >>"$tmp/stderr" &
wait "$pid"
code=$?
cat "$tmp/stdout"
[ "$code" -eq 130 ] || fail "exit code $code, expected 130: $(tail -5 "$tmp/stderr")"
grep -q '"interrupted": true' "$tmp/run/summary.json" || fail "summary not marked interrupted"
grep -q "not started" "$tmp/run/summary.json" || fail "no task left unstarted"
[ "$(sqlite3 "$tmp/run/archive.sqlite" 'PRAGMA integrity_check')" = ok ] || fail "archive integrity"
if pgrep -f "$tmp/run/.kiln" >/dev/null; then fail "runner processes survived"; fi
echo "sigint ok"

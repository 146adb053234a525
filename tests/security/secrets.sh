#!/bin/sh
# Secrets never leave (issue 14): a `kiln run` whose provider quotes the request's
# `Authorization: Bearer <key>` in its error bodies (the fake server's --echo-auth), whose first
# answer is a candidate that hunts for secrets (every /proc/*/environ and cmdline it can read, its
# own environment) and raises what it found into its verdict (and so into the error fixer's
# prompt), and whose answers quote a planted token: neither the key nor the credential-named
# variable of kiln's environment appears in any file the run writes, on stdout or stderr, or in
# any request body the server received. Then a key the provider refuses (401, echoed): the
# "takes no more queries" error is redacted too.
set -u
kiln=$1; src=$2; tmp=$3
rm -rf "$tmp"; mkdir -p "$tmp"; tmp=$(cd "$tmp" && pwd)
fail() { echo "FAIL: $*"; exit 1; }
key="sk-e2e-secrets-$(date +%s)-keyvalue"
token="tok-planted-$(date +%s)-servicetoken"
mkdir -p "$tmp/replies"
{
  printf 'Here is a faster version (service token %s).\n\n```python\n' "$token"
  cat <<'PY'
import glob
import os
import torch.nn as nn


def _hunt():
    found = [k + "=" + v for k, v in os.environ.items()]
    for name in glob.glob("/proc/[0-9]*/environ") + glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(name, "rb") as f:
                found.append(name + ": " + f.read().decode("utf-8", "replace"))
        except OSError as e:
            found.append(name + ": " + str(e))
    return " | ".join(found)


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
        raise RuntimeError("what I could read: " + _hunt())
PY
  printf '```\n'
} >"$tmp/replies/1.txt"
{
  printf 'Fixed; the token %s is not needed.\n\n```python\n' "$token"
  cat "$src/tests/candidates/mlp_good.py"
  printf '```\n'
} >"$tmp/replies/2.txt"

start_server() { # $1: name, then server flags
  name=$1; shift
  python3 "$src/tests/fake_llm/fake_llm_server.py" --port 0 --port-file "$tmp/$name.port" \
    --key "$key" --reply-dir "$tmp/replies" --echo-auth --log "$tmp/$name.jsonl" "$@" \
    >"$tmp/$name.out" 2>&1 &
  server=$!
  n=0
  while [ ! -s "$tmp/$name.port" ]; do
    n=$((n + 1)); [ $n -lt 2000 ] || fail "fake server did not start: $(cat "$tmp/$name.out")"
    kill -0 $server 2>/dev/null || fail "fake server died: $(cat "$tmp/$name.out")"
    sleep 0.01
  done
  port=$(cat "$tmp/$name.port")
}
write_config() { # $1: file, $2: run folder, $3: key variable
  cat >"$1" <<TOML
[run]
tasks = ["$src/tests/tasks/cpu/1_MLP.py"]
out = "$2"
seed = 5
[budget]
queries_per_task = 4
usd_total = 0.2
[evaluator]
devices = "cpu"
trials = 2
max_timing_s = 0.3
[llm.main]
provider = "openai"
base_url = "http://127.0.0.1:$port/v1"
model = "fake-model"
api_key_env = "$3"
max_tokens = 2000
stream = false
retry_initial_s = 0.01
retry_max_s = 0.05
usd_per_mtok_input = 3
usd_per_mtok_output = 15
[strategy]
kind = "pike-b"
max_ideas = 1
phases = 2
parents = 1
parallel_candidates = 1
TOML
}
leaks() { # the files to search: $1 the run folder, then more files
  run=$1; shift
  for f in $(find "$run" -type f) "$@"; do
    for s in "$key" "$token"; do
      grep -qa -- "$s" "$f" && echo "$f holds $(echo "$s" | cut -c1-14)..."
    done
  done
}

# 1. Errors that echo the key, then a hostile candidate, then an honest one.
start_server echo --faults "500,429@0,503"
trap 'kill $server 2>/dev/null' EXIT
write_config "$tmp/echo.toml" "$tmp/run-echo" KILN_E2E_SECRETS_KEY
KILN_E2E_SECRETS_KEY="$key" KILN_E2E_SERVICE_TOKEN="$token" \
  "$kiln" run --config "$tmp/echo.toml" >"$tmp/echo.stdout" 2>"$tmp/echo.stderr"
code=$?
kill $server 2>/dev/null; wait $server 2>/dev/null
[ $code -eq 0 ] || fail "run: exit $code: $(tail -5 "$tmp/echo.stderr")"
grep -q "Bearer" "$tmp/echo.jsonl" 2>/dev/null && fail "the server log quotes a bearer token"
grep -q "Authorization: Bearer <redacted>" "$tmp/run-echo/kiln.log" \
  || fail "kiln.log shows no redacted echo of the error bodies: $(grep -i retry "$tmp/run-echo/kiln.log" | head -3)"
grep -q "what I could read" "$tmp/run-echo/archive.sqlite" \
  || fail "the hostile candidate's verdict is not in the archive"
grep -q "what I could read" "$tmp/echo.jsonl" \
  || fail "the hostile candidate's reason did not reach the error fixer's prompt"
found=$(leaks "$tmp/run-echo" "$tmp/echo.stdout" "$tmp/echo.stderr" "$tmp/echo.jsonl")
[ -z "$found" ] || fail "secrets leaked: $found"

# 2. A key the provider refuses, quoted back in the 401's body: the profile stops, and its
# error is redacted wherever it is written.
start_server refused --faults "401"
write_config "$tmp/refused.toml" "$tmp/run-refused" KILN_E2E_SECRETS_KEY
KILN_E2E_SECRETS_KEY="$key" KILN_E2E_SERVICE_TOKEN="$token" \
  "$kiln" run --config "$tmp/refused.toml" >"$tmp/refused.stdout" 2>"$tmp/refused.stderr"
kill $server 2>/dev/null; wait $server 2>/dev/null
grep -q "takes no more queries" "$tmp/refused.stderr" \
  || fail "no stop of the refused profile: $(tail -3 "$tmp/refused.stderr")"
found=$(leaks "$tmp/run-refused" "$tmp/refused.stdout" "$tmp/refused.stderr" "$tmp/refused.jsonl")
[ -z "$found" ] || fail "secrets leaked: $found"
echo "secrets ok"

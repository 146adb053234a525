#!/bin/sh
# A bad config or bad input stops kiln before anything starts: exit code 2, the place named.
set -u
kiln=$1; src=$2; tmp=$3
rm -rf "$tmp"; mkdir -p "$tmp"
fail() { echo "FAIL: $*"; exit 1; }

expect() { # expect <name> <pattern> <kiln args...>
  name=$1; pattern=$2; shift 2
  "$kiln" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
  code=$?
  [ "$code" -eq 2 ] || fail "$name: exit code $code, expected 2 ($(cat "$tmp/$name.err"))"
  grep -q -- "$pattern" "$tmp/$name.err" || fail "$name: stderr lacks '$pattern': $(cat "$tmp/$name.err")"
  [ ! -e "$tmp/out-$name" ] || fail "$name: a run directory was created"
  echo "ok: $name"
}

printf '[run]\ntasks = ["x"\n' >"$tmp/syntax.toml"
expect syntax "syntax.toml:2:" run --config "$tmp/syntax.toml" --out "$tmp/out-syntax"

printf '[evaluator]\ndevices = "cpu"\nspeed = 3\n' >"$tmp/unknown.toml"
expect unknown "unknown key 'speed' in \[evaluator\]" run --config "$tmp/unknown.toml" --out "$tmp/out-unknown"

printf '[budget]\nqueries_per_task = "many"\n' >"$tmp/type.toml"
expect type "type.toml:2:.*queries_per_task must be an integer" run --config "$tmp/type.toml" --out "$tmp/out-type"

printf '[evaluator]\natol = -1.0\n' >"$tmp/range.toml"
expect range "range.toml:2:.*atol" run --config "$tmp/range.toml" --out "$tmp/out-range"

printf '[run]\ntasks = ["no/such/folder"]\n' >"$tmp/tasks.toml"
expect tasks "no/such/folder" run --config "$tmp/tasks.toml" --out "$tmp/out-tasks"

expect missing "cannot read" run --config "$tmp/does-not-exist.toml" --out "$tmp/out-missing"
expect eval_missing "cannot read candidate" eval --task "$src/tests/tasks/cpu/1_MLP.py" --candidate "$tmp/none.py"
expect cli "required" run
echo "all bad inputs rejected"

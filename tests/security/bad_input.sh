#!/bin/sh
# A bad config or bad input stops kiln before anything starts: exit code 2, the place named.
set -u
kiln=$1; src=$2; tmp=$3
rm -rf "$tmp"; mkdir -p "$tmp"
fail() { echo "FAIL: $*"; exit 1; }

expect() { # expect <name> <pattern> <kiln args...>
  name=$1; pattern=$2; shift 2
  # A hang (a FIFO read with a blocking open) shows up as exit 124, not as a stuck suite.
  timeout 120 "$kiln" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
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

# Inputs that are not regular files, or too big: one line naming the file, at once.
mlp=$src/tests/tasks/cpu/1_MLP.py
good=$src/tests/candidates/mlp_good.py
mkfifo "$tmp/fifo.toml" "$tmp/fifo.py"
mkdir -p "$tmp/folder.toml"
expect config_fifo "config $tmp/fifo.toml is a FIFO, not a regular file" run --config "$tmp/fifo.toml" --out "$tmp/out-config_fifo"
expect config_zero "config /dev/zero is a character device" run --config /dev/zero --out "$tmp/out-config_zero"
expect config_dir "config $tmp/folder.toml is a directory" eval --task "$mlp" --candidate "$good" --config "$tmp/folder.toml"
expect cand_fifo "candidate $tmp/fifo.py is a FIFO" eval --task "$mlp" --candidate "$tmp/fifo.py"
expect cand_zero "candidate /dev/zero is a character device" eval --task "$mlp" --candidate /dev/zero
expect cand_dir "candidate $tmp is a directory" eval --task "$mlp" --candidate "$tmp"
expect task_fifo "task $tmp/fifo.py is a FIFO" eval --task "$tmp/fifo.py" --candidate "$good"
expect stream_zero "stream manifest /dev/zero is a character device" eval --stream /dev/zero
head -c 1100000 /dev/zero | tr '\0' '#' >"$tmp/big.py"
expect cand_big "candidate $tmp/big.py has 1100000 bytes, more than the 1 MiB allowed" eval --task "$mlp" --candidate "$tmp/big.py"
for t in -5 0 nan inf 3x 1e9; do
  expect "timeout_$t" "timeout: must be a number of seconds above 0" eval --task "$mlp" --candidate "$good" --timeout "$t"
done
echo "all bad inputs rejected"

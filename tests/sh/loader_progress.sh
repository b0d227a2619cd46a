#!/usr/bin/env bash
# loader_progress.sh — the load progress bar: drawn when stderr is a terminal
# (run under `script`, which gives the command a pseudo-terminal), absent when not.
set -u
K3=${K3:-build/k3}
FIX=${K3_FIXTURES:-../shared/fixtures}
export K3_BYTE_TOKENIZER=1 # the shared fixtures have no tiktoken.model: their ids are bytes
M=$FIX/tiny-f32-sharded
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
check() { if eval "$2"; then echo "PASS $1"; else echo "FAIL $1"; fi; }

if ! command -v script >/dev/null; then
    echo "FAIL progress_script_missing (util-linux 'script' is needed for a pseudo-terminal)"
    exit 1
fi
script -qc "$K3 generate --model $M --prompt hi -m 2" /dev/null >"$out/tty.txt" 2>&1
tr '\r' '\n' <"$out/tty.txt" >"$out/tty.lines"
check progress_shards_bar_on_tty "grep -q 'mapping shards .*100.0%.*1.4/1.4 MB' $out/tty.lines"
check progress_shard_count_on_tty "grep -q '2/2 files, 178 tensors' $out/tty.lines"
check progress_layers_bar_on_tty "grep -q 'mapping tensors .*100.0%  4/4 layers' $out/tty.lines"
$K3 generate --model $M --prompt hi -m 2 >"$out/plain.txt" 2>&1
check progress_quiet_without_tty "! grep -q 'mapping' $out/plain.txt"
check progress_generation_still_runs "grep -q '^Generation: 2 tokens' $out/plain.txt"

#!/usr/bin/env bash
# serve_batch.sh — continuous batching, the queue limit and the prompt cache
# of `k3 serve` with concurrent streaming clients (tests/serve/batch.mjs).
# No check depends on timing: states are reached by polling /health.
cd "$(dirname "$0")/../.."
. tests/serve/lib.sh
rc=0
serve_start --test-mode || { echo "FAIL serve_batch_start"; exit 1; }
node tests/serve/batch.mjs "$SERVE_URL" batch || rc=1
n=$(grep -c "finish=cancelled" "$SERVE_LOG")
check serve_batch_cancel_logged test "$n" -ge 2
serve_stop || { echo "FAIL serve_batch_clean_exit"; rc=1; }

serve_start --test-mode --parallel 1 --max-queue 1 || { echo "FAIL serve_batch_start_queue"; exit 1; }
node tests/serve/batch.mjs "$SERVE_URL" queue || rc=1
serve_stop || { echo "FAIL serve_batch_clean_exit_queue"; rc=1; }

serve_start --test-mode || { echo "FAIL serve_batch_start_cache"; exit 1; }
node tests/serve/batch.mjs "$SERVE_URL" cache || rc=1
serve_stop || { echo "FAIL serve_batch_clean_exit_cache"; rc=1; }
# --batch-window-ms: requests that reach an idle server within the window
# start in one step. Four one-token requests (cache off: no snapshot marks,
# each prompt one chunk) sent 0.05 s apart to --parallel 4 with a 1 s window:
# the window closes when the fourth queues, so the server runs one step of
# four sequences. Without the window the first request starts alone, 50 ms
# before the second is sent (more than one step). Nothing is timed: the spread
# (0.15 s of sleeps) only has to stay under 1 s, even on a loaded machine.
serve_start --test-mode --cache-mb 0 --parallel 4 --batch-window-ms 1000 ||
    { echo "FAIL serve_batch_start_window"; exit 1; }
body='{"messages":[{"role":"user","content":"hi"}],"max_tokens":1,"chat_template_kwargs":{"thinking":false}}'
pids=()
for i in 1 2 3 4; do
    curl -s "$SERVE_URL/v1/chat/completions" -H 'Content-Type: application/json' -d "$body" \
        >"$SERVE_TMP/window.$i" &
    pids+=($!)
    sleep 0.05
done
wait "${pids[@]}"
check serve_batch_window_answers test "$(cat "$SERVE_TMP"/window.* | grep -o '"finish_reason"' | wc -l)" = 4
batch=$(curl -s "$SERVE_URL/health" | python3 -c 'import json,sys; b=json.load(sys.stdin)["batch"]; print(b["steps"], b["max_step_sequences"])')
check serve_batch_window_one_step test "$batch" = "1 4"
serve_stop || { echo "FAIL serve_batch_clean_exit_window"; rc=1; }
# --state-reserve-mb bounds the reserve in bytes: 1 MiB holds 33 of the
# fixture's 31680-byte blocks (the worker fills it while idle; polled, not timed)
health_kept() {
    curl -s "$SERVE_URL/health" | python3 -c 'import json,sys; print(json.load(sys.stdin)["batch"]["states_kept"])'
}
for mb in 1 0; do
    serve_start --test-mode --state-reserve-mb $mb || { echo "FAIL serve_batch_start_reserve_$mb"; exit 1; }
    want=$((mb ? 33 : 0))
    for _ in $(seq 1 1500); do [ "$(health_kept)" = $want ] && break; sleep 0.02; done
    check serve_batch_state_reserve_$mb test "$(health_kept)" = $want
    serve_stop || { echo "FAIL serve_batch_clean_exit_reserve_$mb"; rc=1; }
done
# --threads N is the model's thread count on the scheduler's worker thread
# too (OpenMP's setting is per thread: it once applied only to the thread that
# loaded the model, and the worker ran with every core); /health reports it
# (set before the server listens: serve_sched_new waits for the worker).
health_threads() {
    curl -s "$SERVE_URL/health" | python3 -c 'import json,sys; print(json.load(sys.stdin)["batch"]["threads"])'
}
for n in 1 3; do
    serve_start --test-mode --threads $n || { echo "FAIL serve_batch_start_threads_$n"; exit 1; }
    check serve_batch_worker_threads_$n test "$(health_threads)" = $n
    serve_stop || { echo "FAIL serve_batch_clean_exit_threads_$n"; rc=1; }
done

# OpenMP waiting. With nothing set, and over OMP_WAIT_POLICY=active (with a
# note), serve re-executes itself with a bounded spin (GOMP_SPINCOUNT=1000):
# spinning workers starved the HTTP threads (~1 tok/s instead of ~30), and
# sleeping at once cost 30% of decode. An explicit passive policy is kept.
unset OMP_WAIT_POLICY GOMP_SPINCOUNT K3_SERVE_SPIN
serve_start --test-mode || { echo "FAIL serve_batch_start_default_waits"; exit 1; }
check serve_batch_default_bounded_spin grep -qz "^GOMP_SPINCOUNT=1000$" "/proc/$SERVE_PID/environ"
check serve_batch_default_no_policy sh -c "! grep -qz '^OMP_WAIT_POLICY=' /proc/$SERVE_PID/environ"
serve_stop || { echo "FAIL serve_batch_clean_exit_default_waits"; rc=1; }
# an empty OMP_WAIT_POLICY is no policy (libgomp would spin its default while)
OMP_WAIT_POLICY= serve_start --test-mode || { echo "FAIL serve_batch_start_empty_policy"; exit 1; }
check serve_batch_empty_policy_bounded grep -qz "^GOMP_SPINCOUNT=1000$" "/proc/$SERVE_PID/environ"
serve_stop || { echo "FAIL serve_batch_clean_exit_empty_policy"; rc=1; }
OMP_WAIT_POLICY=passive serve_start --test-mode || { echo "FAIL serve_batch_start_passive"; exit 1; }
check serve_batch_passive_kept grep -qz "^OMP_WAIT_POLICY=passive$" "/proc/$SERVE_PID/environ"
check serve_batch_passive_no_spincount sh -c "! grep -qz '^GOMP_SPINCOUNT=' /proc/$SERVE_PID/environ"
serve_stop || { echo "FAIL serve_batch_clean_exit_passive"; rc=1; }
OMP_WAIT_POLICY=active serve_start --test-mode || { echo "FAIL serve_batch_start_active"; exit 1; }
check serve_batch_active_policy_noted grep -q "OMP_WAIT_POLICY=active ignored" "$SERVE_LOG"
check serve_batch_active_policy_bounded grep -qz "^GOMP_SPINCOUNT=1000$" "/proc/$SERVE_PID/environ"
check serve_batch_active_policy_dropped sh -c "! grep -qz '^OMP_WAIT_POLICY=' /proc/$SERVE_PID/environ"
out=$(curl -s "$SERVE_URL/v1/chat/completions" -H 'Content-Type: application/json' \
    -d '{"messages":[{"role":"user","content":"hi"}],"k3_test_force_text":"fine<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>","chat_template_kwargs":{"thinking":false}}')
check serve_batch_active_policy_serves grep -q '"content":"fine"' <<<"$out"
serve_stop || { echo "FAIL serve_batch_clean_exit_active"; rc=1; }
exit $rc

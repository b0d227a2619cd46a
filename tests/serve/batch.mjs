// batch.mjs — continuous batching and the prompt cache against a running
// `k3 serve --test-mode` (URL in argv[2]; the mode in argv[3]):
//   batch  concurrent streams share steps; a request joins a running batch;
//          one stream cancelled mid-batch leaves, the others finish exact
//   queue  (--parallel 1 --max-queue 1) a second request waits, a third gets
//          429 queue_full, the waiting one completes after the first leaves
//   cache  shared system prompt: the second request prefills only its own
//          tokens, an identical repeat prefills nothing; no hit across API
//          keys or cache_salt values; the state reserve refills when idle
// Nothing is timed: states are reached by polling /health counters, long
// streams are cancelled by the test once it has seen what it waits for.
const URL = process.argv[2], MODE = process.argv[3];
let failed = 0;
function check(name, ok, detail) {
  console.log(`${ok ? "PASS" : "FAIL"} ${MODE}_${name}`);
  if (!ok) { failed++; if (detail !== undefined) console.log("  " + JSON.stringify(detail).slice(0, 800)); }
}
const C = "<|close|>", S = "<|sep|>", EOM = "<|end_of_msg|>";
const END = `${C}response${S}${C}message${S}${EOM}`;
const health = async (h = {}) => (await fetch(`${URL}/health`, { headers: h })).json();
const until = async (what, pred, h) => { // poll /health until pred holds (bounded)
  for (let i = 0; i < 3000; i++) { const x = await health(h); if (pred(x)) return x; await new Promise((r) => setTimeout(r, 20)); }
  throw new Error(`never reached: ${what}`);
};

// A streaming request; onDelta(text so far, ctl) may abort. Resolves with the text.
async function stream(body, onDelta, headers = {}) {
  const ctl = new AbortController();
  const res = { text: "", done: false, status: 0, aborted: false };
  try {
    const r = await fetch(`${URL}/v1/chat/completions`, {
      method: "POST", signal: ctl.signal, headers: { "Content-Type": "application/json", ...headers },
      body: JSON.stringify({ stream: true, max_tokens: 4000, chat_template_kwargs: { thinking: false }, ...body }),
    });
    res.status = r.status;
    if (r.status !== 200) { res.body = await r.json(); return res; }
    const dec = new TextDecoder();
    let buf = "";
    for await (const part of r.body) {
      buf += dec.decode(part, { stream: true });
      let k;
      while ((k = buf.indexOf("\n\n")) >= 0) {
        const ev = buf.slice(0, k); buf = buf.slice(k + 2);
        if (ev.startsWith(":")) continue; // SSE comment (keep-alive while waiting)
        if (ev === "data: [DONE]") { res.done = true; continue; }
        const c = JSON.parse(ev.slice(6)).choices[0];
        if (c && c.delta.content) { res.text += c.delta.content; if (onDelta && onDelta(res.text)) { res.aborted = true; ctl.abort(); } }
      }
    }
  } catch (e) { if (!res.aborted) res.error = String(e); }
  return res;
}
const user = (t) => ({ messages: [{ role: "user", content: t }] });
const long = (tag) => `${tag} `.repeat(1500); // forced text far longer than any test waits for

async function batchMode() {
  // A and B run long; C joins the running batch, finishes exact; B is cancelled mid-batch.
  const h0 = await health();
  let startC, cancelB = false, cancelA = false;
  const gotFirst = new Promise((r) => (startC = r));
  const A = stream({ ...user("A"), k3_test_force_text: long("alpha") + END }, (t) => { startC(); return t.length > 0 && cancelA; });
  const B = stream({ ...user("B"), k3_test_force_text: long("beta") + END }, () => cancelB);
  await gotFirst;
  await until("A and B decoding together", (h) => h.active >= 2 && h.decode_tokens - h0.decode_tokens >= 4);
  const want = "gamma joins the batch and leaves";
  const c = await stream({ ...user("C"), k3_test_force_text: want + END });
  check("joined_request_exact", c.done && c.text === want, c);
  const h1 = await health();
  check("steps_shared", h1.batch.max_step_sequences >= 3, h1.batch);
  cancelB = true; // B leaves at its next delta, mid-batch
  const b = await B;
  check("cancelled_stream_ended", b.aborted && !b.done && b.text.startsWith("beta"), b);
  await until("B retired", (h) => h.active === 1);
  cancelA = true;
  const a = await A;
  check("survivor_prefix_exact", a.text.length > 0 && long("alpha").startsWith(a.text), a.text.slice(0, 80));
  const h2 = await until("all retired", (h) => h.active === 0 && h.queued === 0);
  check("requests_counted", h2.requests_done - h0.requests_done === 3, h2);
  // after the cancellations the server still serves a fresh pair in one batch
  const [x, y] = await Promise.all([stream({ ...user("x"), k3_test_force_text: "one two three" + END }),
                                    stream({ ...user("y"), k3_test_force_text: "four five" + END })]);
  const met = await (await fetch(`${URL}/metrics`)).text();
  const mv = (n) => Number((met.match(new RegExp(`^${n}\\{[^}]*\\} (\\S+)$`, "m")) || [])[1]);
  check("metrics_batch_counters", mv("k3_batch_max_step_sequences") >= 3 && mv("k3_batch_steps_total") > 0 &&
        mv("k3_batch_step_sequences_total") > mv("k3_batch_steps_total"), met.split("\n").filter((l) => l.includes("batch")));
  check("serves_after_cancel", x.done && y.done && x.text === "one two three" && y.text === "four five", [x, y]);
}

async function queueMode() {
  const h0 = await health();
  let stopA = false;
  const A = stream({ ...user("A"), k3_test_force_text: long("alpha") + END }, () => stopA);
  await until("A active", (h) => h.active === 1 && h.decode_tokens > h0.decode_tokens);
  const B = stream({ ...user("B"), k3_test_force_text: "waited its turn" + END });
  await until("B queued", (h) => h.queued === 1);
  const c = await stream({ ...user("C"), k3_test_force_text: "x" + END });
  check("third_gets_429", c.status === 429 && c.body.error.code === "queue_full", c);
  const h1 = await health();
  check("rejection_counted", h1.batch.rejected_queue === 1, h1.batch);
  stopA = true;
  await A;
  const b = await B;
  check("queued_completes", b.done && b.text === "waited its turn", b);
}

const SYS = "You are the shared system prompt of a benchmark. ".repeat(12);
async function chat(msgs, extra = {}, headers = {}) {
  const r = await fetch(`${URL}/v1/chat/completions`, {
    method: "POST", headers: { "Content-Type": "application/json", ...headers },
    body: JSON.stringify({ max_tokens: 50, chat_template_kwargs: { thinking: false }, messages: msgs, k3_test_force_text: "ok" + END, ...extra }),
  });
  const j = await r.json();
  return { status: r.status, usage: j.usage, json: j };
}
const cached = (r) => r.usage.prompt_tokens_details.cached_tokens;

async function cacheMode() {
  const sys = { role: "system", content: SYS };
  const key = { Authorization: "Bearer alice" };
  let h = await health(key);
  const r1 = await chat([sys, { role: "user", content: "first user" }], {}, key);
  let h1 = await health(key);
  check("first_prefills_all", cached(r1) === 0 && h1.prefill_tokens - h.prefill_tokens === r1.usage.prompt_tokens, [r1.usage, h1.prefill_tokens - h.prefill_tokens]);
  const r2 = await chat([sys, { role: "user", content: "second user, other words" }], {}, key);
  let h2 = await health(key);
  const pre2 = h2.prefill_tokens - h1.prefill_tokens;
  console.log(`  shared system prompt: prompt ${r2.usage.prompt_tokens}, cached ${cached(r2)}, prefilled ${pre2}`);
  check("second_reuses_system_prompt", cached(r2) > 100 && cached(r2) < r2.usage.prompt_tokens, r2.usage);
  check("second_prefills_only_its_own", pre2 === r2.usage.prompt_tokens - cached(r2) && pre2 < 80, [pre2, r2.usage]);
  const r3 = await chat([sys, { role: "user", content: "second user, other words" }], {}, key);
  let h3 = await health(key);
  check("identical_repeat_prefills_nothing", cached(r3) === r3.usage.prompt_tokens && h3.prefill_tokens === h2.prefill_tokens, [r3.usage, h3.prefill_tokens - h2.prefill_tokens]);
  check("repeat_same_answer", r3.json.choices[0].message.content === "ok", r3.json);
  // another key: the same prompt misses
  const r4 = await chat([sys, { role: "user", content: "second user, other words" }], {}, { Authorization: "Bearer bob" });
  check("no_hit_across_api_keys", r4.status === 200 && cached(r4) === 0, r4.usage);
  const r5 = await chat([sys, { role: "user", content: "second user, other words" }], {});
  check("no_hit_without_key", cached(r5) === 0, r5.usage);
  // cache_salt: same key, other salt misses; the same salt hits
  const r6 = await chat([sys, { role: "user", content: "salted" }], { cache_salt: "s1" }, key);
  const r7 = await chat([sys, { role: "user", content: "salted" }], { cache_salt: "s2" }, key);
  const r8 = await chat([sys, { role: "user", content: "salted" }], { cache_salt: "s1" }, key);
  check("salt_scopes", cached(r6) === 0 && cached(r7) === 0 && cached(r8) === r8.usage.prompt_tokens, [r6.usage, r7.usage, r8.usage]);
  const bad = await chat([sys], { cache_salt: 7 }, key);
  check("salt_type_checked", bad.status === 400 && bad.json.error.param === "cache_salt", bad.json);
  // the next turn: the first turn's prompt + answer + end of message come from
  // the cache (stored after the step that fed the stop token)
  const t1 = [sys, { role: "user", content: "turn one" }];
  const r9 = await chat(t1, {}, key);
  const r10 = await chat([...t1, { role: "assistant", content: r9.json.choices[0].message.content },
                          { role: "user", content: "turn two" }], {}, key);
  console.log(`  next turn: turn one ${r9.usage.prompt_tokens} + ${r9.usage.completion_tokens}, turn two cached ${cached(r10)} of ${r10.usage.prompt_tokens}`);
  check("next_turn_reuses_the_answer", cached(r10) === r9.usage.prompt_tokens + r9.usage.completion_tokens, [r9.usage, r10.usage]);
  const hz = await health(key);
  check("scopes_counted", hz.batch.cache_scopes >= 5, hz.batch);
  // the state reserve: while idle the worker faults in sequence state blocks
  // until 4 per --parallel slot (64: 256 of the fixture's small blocks) are
  // ready; the requests above took some of them
  const hr = await until("the state reserve refilled", (x) => x.batch.states_kept === 256, key);
  check("state_reserve_refilled", hr.batch.states_kept === 256, hr.batch);
}

try {
  await ({ batch: batchMode, queue: queueMode, cache: cacheMode })[MODE]();
} catch (e) { check("run", false, String(e)); }
process.exit(failed ? 1 : 0);

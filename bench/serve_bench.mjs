// serve_bench.mjs — N concurrent streaming clients against a running `k3 serve
// --test-mode` (bench/serve_bench.sh starts it). Usage:
//   node bench/serve_bench.mjs URL N TOKENS SYSTEM_CHARS ROUND
// Every client sends the same system prompt (SYSTEM_CHARS characters) and its
// own user message (N, ROUND and its index in it, so no two prompts are equal),
// streams TOKENS forced tokens (k3_test_force_tokens: the model still runs
// every step; forcing only fixes the length), and records the time to its
// first content delta and to its last. Prints one JSON line:
//   {n, tokens, wall_s, agg_tps, stream_tps_p50, decode_agg_tps, ttft_p50_ms, ttft_p95_ms,
//    cache_hits, cache_lookups, prefill_tokens, prompt_tokens, errors}
// Every client has a deadline (60 s + 2 s per token, or CLIENT_S seconds from
// the environment for slow models), so a stuck server cannot hang the benchmark.
const [URL, N, TOK, SYS, ROUND] = process.argv.slice(2).map((v, i) => (i ? Number(v) : v));
const health = async () => (await fetch(`${URL}/health`)).json();
const sys = "You are a careful assistant. ".repeat(Math.ceil(SYS / 29)).slice(0, SYS);
const forced = Array.from({ length: TOK }, (_, i) => 300 + ((i * 37) % 200));

async function client(i) {
  const r = { ttft: null, t_end: null, n: 0, err: null };
  const t0 = performance.now();
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), Number(process.env.CLIENT_S || 0) * 1000 || 60000 + 2000 * TOK);
  try {
    const res = await fetch(`${URL}/v1/chat/completions`, {
      method: "POST", signal: ctl.signal, headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ stream: true, max_tokens: TOK, k3_test_force_tokens: forced,
        chat_template_kwargs: { thinking: false },
        messages: [{ role: "system", content: sys },
                   { role: "user", content: `round ${ROUND} of ${N} clients: I am client ${i}` }] }),
    });
    if (res.status !== 200) throw new Error(`HTTP ${res.status}`);
    const dec = new TextDecoder();
    let buf = "";
    for await (const part of res.body) {
      buf += dec.decode(part, { stream: true });
      let k;
      while ((k = buf.indexOf("\n\n")) >= 0) {
        const ev = buf.slice(0, k); buf = buf.slice(k + 2);
        if (!ev.startsWith("data: ")) continue; // ": keep-alive" comments
        if (ev === "data: [DONE]") continue;
        const c = JSON.parse(ev.slice(6)).choices[0];
        if (c && c.delta && (c.delta.content || c.delta.reasoning_content)) {
          if (r.ttft === null) r.ttft = performance.now() - t0;
          r.n++;
          r.t_end = performance.now();
        }
      }
    }
  } catch (e) { r.err = String(e); }
  clearTimeout(timer);
  r.t_first = r.ttft === null ? null : t0 + r.ttft;
  return r;
}

const pct = (v, p) => { const s = [...v].sort((a, b) => a - b); return s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : null; };
// Warm the client's own request path first (a request the server refuses
// without running the model) and let it settle: on a machine with few cores,
// node's start-up work (compiling fetch and the stream reader) otherwise
// shares the cores with the timed requests' first steps. On 2 vCPUs it made
// a lone request's first step about 2x slower (TTFT 220 against 150 ms).
{
  const res = await fetch(`${URL}/v1/chat/completions`, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
  const dec = new TextDecoder();
  let buf = "";
  for await (const part of res.body) buf += dec.decode(part, { stream: true });
  JSON.parse(buf);
  await new Promise((r) => setTimeout(r, 300));
}
const h0 = await health();
const t0 = performance.now();
const rs = await Promise.all(Array.from({ length: N }, (_, i) => client(i)));
const wall = (performance.now() - t0) / 1000;
const h1 = await health();
const ok = rs.filter((r) => !r.err && r.ttft !== null);
const total = ok.reduce((a, r) => a + r.n, 0);
const per = ok.filter((r) => r.n > 1).map((r) => (r.n - 1) / ((r.t_end - r.t_first) / 1000));
// decode rate of all streams together: tokens after each stream's first, over
// the span from the first stream's first token to the last stream's last
const span = ok.length ? (Math.max(...ok.map((r) => r.t_end)) - Math.min(...ok.map((r) => r.t_first))) / 1000 : 0;
const dec = ok.reduce((a, r) => a + r.n - 1, 0);
const pc = (h) => h.prompt_cache || {};
console.log(JSON.stringify({
  n: N, tokens: TOK, wall_s: +wall.toFixed(3), agg_tps: +(total / wall).toFixed(2),
  stream_tps_p50: +(pct(per, 0.5) || 0).toFixed(2),
  decode_agg_tps: span > 0 ? +(dec / span).toFixed(3) : 0,
  ttft_p50_ms: +(pct(ok.map((r) => r.ttft), 0.5) || 0).toFixed(1),
  ttft_p95_ms: +(pct(ok.map((r) => r.ttft), 0.95) || 0).toFixed(1),
  cache_hits: pc(h1).hits - pc(h0).hits, cache_lookups: pc(h1).lookups - pc(h0).lookups,
  cache_tokens_reused: pc(h1).tokens_reused - pc(h0).tokens_reused,
  prefill_tokens: h1.prefill_tokens - h0.prefill_tokens,
  errors: rs.filter((r) => r.err).map((r) => r.err).slice(0, 3),
}));

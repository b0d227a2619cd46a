// fixtures.mjs — the four outputs users check first, against a running
// `k3 serve --test-mode` (URL in argv[2]). The generated tokens are forced
// (k3_test_force_text), but they still go through the real decode ->
// detokenize -> channel parse -> serialize path of the server.
// Also: stop strings, and the prompt cache (second turn prefills only the
// new tokens). Prints one PASS/FAIL line per check.
const URL = process.argv[2];
let failed = 0;
function check(name, ok, detail) {
  console.log(`${ok ? "PASS" : "FAIL"} ${name}`);
  if (!ok) { failed++; if (detail !== undefined) console.log("  " + JSON.stringify(detail).slice(0, 600)); }
}

const O = "<|open|>", C = "<|close|>", S = "<|sep|>", EOM = "<|end_of_msg|>";
const END = `${C}response${S}${C}message${S}${EOM}`;
const NO_THINK = { chat_template_kwargs: { thinking: false } };

async function chat(body) {
  const r = await fetch(`${URL}/v1/chat/completions`, {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ model: "tiny", max_tokens: 400, ...body }),
  });
  return { status: r.status, json: await r.json() };
}

// Streamed request: the parsed chunks, and whether the stream ended with [DONE].
async function chatStream(body) {
  const r = await fetch(`${URL}/v1/chat/completions`, {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ model: "tiny", max_tokens: 400, stream: true, ...body }),
  });
  const text = await r.text();
  const events = text.split("\n\n").filter((e) => e.length && !e.startsWith(":")); // ":" = SSE comment
  const chunks = [];
  let done = false, bad = [];
  for (const e of events) {
    if (!e.startsWith("data: ")) { bad.push(e); continue; }
    const d = e.slice(6);
    if (d === "[DONE]") { done = true; continue; }
    chunks.push(JSON.parse(d));
  }
  return { status: r.status, ctype: r.headers.get("content-type"), chunks, done, bad };
}

function joinDeltas(chunks, field) {
  return chunks.map((c) => (c.choices[0] && c.choices[0].delta[field]) || "").join("");
}
const hasMarker = (s) => /<\||\|>|response|think|message/.test(s);

// 1. Non-streaming content without any control text.
const CONTENT = "Hello, world! Ünïcödé 你好 🚀 done.";
{
  const { status, json } = await chat({ messages: [{ role: "user", content: "Hi" }], ...NO_THINK,
                                        k3_test_force_text: CONTENT + END });
  const m = json.choices && json.choices[0].message;
  check("fixture_content_status", status === 200, json);
  check("fixture_content_exact", m && m.content === CONTENT, m);
  check("fixture_content_no_reasoning", m && m.reasoning_content === undefined, m);
  check("fixture_content_finish_stop", json.choices[0].finish_reason === "stop", json.choices[0]);
  check("fixture_content_usage", json.usage.prompt_tokens > 0 && json.usage.completion_tokens > 0 &&
        json.usage.total_tokens === json.usage.prompt_tokens + json.usage.completion_tokens, json.usage);
}

// 2. The same content streamed: deltas reassemble it exactly, no delta
// carries marker text, the role comes first, a finish chunk, usage, [DONE].
{
  const s = await chatStream({ messages: [{ role: "user", content: "Hi" }], ...NO_THINK,
                               stream_options: { include_usage: true },
                               k3_test_force_text: CONTENT + END });
  check("fixture_stream_sse", s.status === 200 && /text\/event-stream/.test(s.ctype) && s.bad.length === 0, s.bad);
  check("fixture_stream_role_first", s.chunks[0].choices[0].delta.role === "assistant", s.chunks[0]);
  const content = joinDeltas(s.chunks, "content");
  check("fixture_stream_equals_nonstream", content === CONTENT, content);
  const deltas = s.chunks.filter((c) => c.choices.length && c.choices[0].delta.content);
  check("fixture_stream_many_deltas", deltas.length >= 5, deltas.length);
  check("fixture_stream_no_marker_in_any_delta",
        deltas.every((c) => !/<\||\|>/.test(c.choices[0].delta.content)), deltas.map((c) => c.choices[0].delta.content));
  const fin = s.chunks.filter((c) => c.choices.length && c.choices[0].finish_reason);
  check("fixture_stream_finish_chunk", fin.length === 1 && fin[0].choices[0].finish_reason === "stop", fin);
  const last = s.chunks[s.chunks.length - 1];
  check("fixture_stream_usage_chunk", last.choices.length === 0 && last.usage && last.usage.completion_tokens > 0, last);
  check("fixture_stream_done", s.done);
  check("fixture_stream_chunk_shape", s.chunks.every((c) => c.object === "chat.completion.chunk" && c.id === s.chunks[0].id));
}

// 3. Reasoning separated into its own field (thinking on: generation starts
// inside the think channel).
const REASON = "The user greets me; 2 + 2 = 4.";
const ANSWER = "Hi! The answer is 4.";
{
  const forced = `${REASON}${C}think${S}${O}response${S}${ANSWER}${END}`;
  const { json } = await chat({ messages: [{ role: "user", content: "Hi" }], k3_test_force_text: forced });
  const m = json.choices[0].message;
  check("fixture_reasoning_field", m.reasoning_content === REASON, m);
  check("fixture_reasoning_alias", m.reasoning === REASON, m);
  check("fixture_reasoning_content", m.content === ANSWER, m);
  const s = await chatStream({ messages: [{ role: "user", content: "Hi" }], k3_test_force_text: forced });
  check("fixture_reasoning_stream", joinDeltas(s.chunks, "reasoning_content") === REASON &&
        joinDeltas(s.chunks, "reasoning") === REASON && joinDeltas(s.chunks, "content") === ANSWER,
        [joinDeltas(s.chunks, "reasoning_content"), joinDeltas(s.chunks, "content")]);
}

// 4. A tool call returned as structured tool_calls.
const TOOLS = [{ type: "function", function: { name: "get_weather", description: "Weather for a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];
const CALL = `I should look it up.${C}think${S}${O}response${S}${C}response${S}${O}tools${S}` +
  `${O}call tool="get_weather" index="1"${S}${O}argument key="city" type="string"${S}Tokyo` +
  `${C}argument${S}${C}call${S}${C}tools${S}${C}message${S}${EOM}`;
{
  const { json } = await chat({ messages: [{ role: "user", content: "Weather in Tokyo?" }], tools: TOOLS,
                                k3_test_force_text: CALL });
  const ch = json.choices[0], tc = ch.message.tool_calls;
  check("fixture_tool_finish_reason", ch.finish_reason === "tool_calls", ch);
  check("fixture_tool_structured", Array.isArray(tc) && tc.length === 1 && tc[0].type === "function" &&
        tc[0].function.name === "get_weather" && typeof tc[0].id === "string" && tc[0].id.length > 0, tc);
  let args = null;
  try { args = JSON.parse(tc[0].function.arguments); } catch (e) {}
  check("fixture_tool_arguments", args && args.city === "Tokyo" && Object.keys(args).length === 1, tc && tc[0]);
  check("fixture_tool_content_clean", ch.message.content === null || !hasMarker(ch.message.content), ch.message);
  check("fixture_tool_reasoning", ch.message.reasoning_content === "I should look it up.", ch.message);
  const s = await chatStream({ messages: [{ role: "user", content: "Weather in Tokyo?" }], tools: TOOLS,
                               k3_test_force_text: CALL });
  const tcs = s.chunks.flatMap((c) => (c.choices[0] && c.choices[0].delta.tool_calls) || []);
  // OpenAI style: a header delta (id, type, name) then argument fragments, all index 0
  const calls = [];
  for (const t of tcs) {
    const c = (calls[t.index] = calls[t.index] || { id: "", name: "", arguments: "" });
    if (t.id) c.id = t.id;
    if (t.function && t.function.name) c.name += t.function.name;
    if (t.function && t.function.arguments) c.arguments += t.function.arguments;
  }
  check("fixture_tool_stream_delta", tcs.length >= 2 && tcs[0].id && tcs[0].type === "function" &&
        calls.length === 1 && calls[0].name === "get_weather" && JSON.parse(calls[0].arguments).city === "Tokyo", tcs);
  const fin = s.chunks.find((c) => c.choices.length && c.choices[0].finish_reason);
  check("fixture_tool_stream_finish", fin && fin.choices[0].finish_reason === "tool_calls", fin);
  check("fixture_tool_stream_no_marker", !/<\|/.test(joinDeltas(s.chunks, "content") + joinDeltas(s.chunks, "reasoning_content")));
}

// Byte-by-byte: every character its own token (ids 0..255 are the bytes in
// the synthetic model's tokenizer; the control block is its last 256 ids), so
// each marker tag and each UTF-8 character arrives split across tokens.
{
  const fs = await import("node:fs");
  const cfg = JSON.parse(fs.readFileSync(process.argv[3] + "/config.json", "utf8"));
  const V = (cfg.text_config || cfg).vocab_size, B = V - 256;
  const ID = { eom: B + 2, open: B + 3, close: B + 4, sep: B + 5 };
  const bytes = (t) => [...Buffer.from(t, "utf8")];
  const ids = [...bytes("ab <|"), ID.close, ...bytes("think"), ID.sep, ID.open, ...bytes("response"), ID.sep,
               ...bytes("Hi 你好 <"), ID.close, ...bytes("response"), ID.sep, ID.close, ...bytes("message"),
               ID.sep, ID.eom];
  const body = { messages: [{ role: "user", content: "Hi" }], k3_test_force_tokens: ids };
  const s = await chatStream(body);
  const deltas = s.chunks.filter((c) => c.choices.length).map((c) => c.choices[0].delta);
  const r = joinDeltas(s.chunks, "reasoning_content"), c = joinDeltas(s.chunks, "content");
  check("bytewise_stream_channels", r === "ab <|" && c === "Hi 你好 <", [r, c]);
  check("bytewise_no_marker_text", deltas.every((d) => !/think|response|message|<\|close|<\|sep|<\|open/.test(
        (d.content || "") + (d.reasoning_content || ""))), deltas);
  check("bytewise_many_deltas", deltas.filter((d) => d.content || d.reasoning_content).length >= 4, deltas.length);
  const { json } = await chat(body);
  check("bytewise_nonstream_same", json.choices[0].message.reasoning_content === r && json.choices[0].message.content === c,
        json.choices[0].message);
}

// Sampling is seeded: the same seed gives the same text, greedy is stable.
{
  const base = { messages: [{ role: "user", content: "Tell me a story" }], ...NO_THINK, max_tokens: 24 };
  const a = await chat({ ...base, temperature: 1.0, seed: 42 });
  const b = await chat({ ...base, temperature: 1.0, seed: 42 });
  const c = await chat({ ...base, temperature: 1.0, seed: 43 });
  const g1 = await chat({ ...base, temperature: 0 }), g2 = await chat({ ...base, temperature: 0 });
  const t = (r) => r.json.choices[0].message.content;
  check("seed_reproducible", t(a) === t(b) && t(a).length > 0, [t(a), t(b)]);
  check("seed_changes_output", t(a) !== t(c), [t(a), t(c)]);
  check("greedy_reproducible", t(g1) === t(g2), [t(g1), t(g2)]);
}

// An engine failure mid-generation (a forced id outside the vocabulary,
// which k3_forward rejects): non-stream gets a 500 JSON error, a stream an
// SSE error event and [DONE]; the server keeps serving.
{
  const body = { messages: [{ role: "user", content: "Hi" }], ...NO_THINK, k3_test_force_tokens: [65, 66, 1 << 30, 67] };
  const r = await chat(body);
  check("engine_error_500", r.status === 500 && r.json.error && r.json.error.type === "server_error" &&
        /token|range|vocab/i.test(r.json.error.message), r);
  const st = await fetch(`${URL}/v1/chat/completions`, { method: "POST", headers: { "Content-Type": "application/json" },
                         body: JSON.stringify({ ...body, stream: true }) });
  const text = await st.text();
  const evs = text.split("\n\n").filter((e) => e);
  const err = evs.map((e) => { try { return JSON.parse(e.slice(6)); } catch (x) { return null; } }).find((d) => d && d.error);
  check("engine_error_stream_event", err && err.error.code === "engine_error" && evs[evs.length - 1] === "data: [DONE]", evs);
  const ok = await chat({ messages: [{ role: "user", content: "Hi" }], ...NO_THINK, k3_test_force_text: "fine" + END });
  check("engine_error_then_serving", ok.status === 200 && ok.json.choices[0].message.content === "fine", ok.json);
}

// Stop strings end the output before the match, also when streamed.
{
  const { json } = await chat({ messages: [{ role: "user", content: "Hi" }], ...NO_THINK, stop: ["STOP"],
                                k3_test_force_text: "one two STOP three" + END });
  check("stop_string_nonstream", json.choices[0].message.content === "one two " && json.choices[0].finish_reason === "stop", json.choices[0]);
  const s = await chatStream({ messages: [{ role: "user", content: "Hi" }], ...NO_THINK, stop: "STOP",
                               k3_test_force_text: "one two STOP three" + END });
  check("stop_string_stream", joinDeltas(s.chunks, "content") === "one two ", joinDeltas(s.chunks, "content"));
}

// max_tokens cuts the output: finish_reason "length".
{
  const { json } = await chat({ messages: [{ role: "user", content: "Hi" }], ...NO_THINK, max_tokens: 3,
                                k3_test_force_text: CONTENT + END });
  check("finish_length", json.choices[0].finish_reason === "length" && json.usage.completion_tokens === 3, json);
}

// logprobs / top_logprobs: one entry per generated (non-stop) token, each
// a log-probability, alternatives sorted; streamed entries add up the same.
{
  const body = { messages: [{ role: "user", content: "Hi" }], ...NO_THINK, logprobs: true, top_logprobs: 3,
                 k3_test_force_text: "abc" + END };
  const { json } = await chat(body);
  const lp = json.choices[0].logprobs && json.choices[0].logprobs.content;
  const okEntry = (e) => e.logprob <= 0 && e.top_logprobs.length === 3 &&
    e.top_logprobs.every((t, k) => t.logprob <= 0 && (k === 0 || t.logprob <= e.top_logprobs[k - 1].logprob)) &&
    e.top_logprobs.every((t) => t.token !== e.token || Math.abs(t.logprob - e.logprob) < 1e-9) &&
    e.top_logprobs[0].logprob >= e.logprob;
  check("logprobs_nonstream", Array.isArray(lp) && lp.length === json.usage.completion_tokens - 1 && lp.every(okEntry), lp);
  const s = await chatStream(body);
  const streamed = s.chunks.flatMap((c) => (c.choices[0] && c.choices[0].logprobs && c.choices[0].logprobs.content) || []);
  check("logprobs_stream", Array.isArray(lp) && streamed.length === lp.length &&
        streamed.every((e, k) => e.token === lp[k].token && Math.abs(e.logprob - lp[k].logprob) < 1e-9), streamed);
}

// Prompt cache: turn 2 extends turn 1, so only its new tokens are prefilled.
async function health() { return (await fetch(`${URL}/health`)).json(); }
{
  const sys = { role: "system", content: "You are a terse assistant. ".repeat(8) };
  const turn1 = [sys, { role: "user", content: "What is 2+2?" }];
  const r1 = await chat({ messages: turn1, k3_test_force_text: `Add.${C}think${S}${O}response${S}4${END}` });
  const h1 = await health();
  const turn2 = [...turn1, { role: "assistant", content: "4", reasoning_content: "Add." },
                 { role: "user", content: "And 3+3?" }];
  const r2 = await chat({ messages: turn2, k3_test_force_text: `Add.${C}think${S}${O}response${S}6${END}` });
  const h2 = await health();
  const prefilled = h2.prefill_tokens - h1.prefill_tokens;
  const seen = r1.json.usage.prompt_tokens + r1.json.usage.completion_tokens;
  const fresh = r2.json.usage.prompt_tokens - seen;
  console.log(`  prompt cache: turn1 prompt ${r1.json.usage.prompt_tokens} + answer ${r1.json.usage.completion_tokens}` +
              `, turn2 prompt ${r2.json.usage.prompt_tokens}, cached ${r2.json.usage.prompt_tokens_details.cached_tokens}, prefilled ${prefilled}`);
  check("prompt_cache_hit", r2.json.usage.prompt_tokens_details.cached_tokens === seen, r2.json.usage);
  check("prompt_cache_prefill_only_new", prefilled === fresh && fresh > 0 && fresh < r2.json.usage.prompt_tokens,
        { prefilled, fresh });
  check("prompt_cache_stats", h2.prompt_cache.hits > h1.prompt_cache.hits && h2.prompt_cache.entries > 0 &&
        h2.prompt_cache.bytes <= h2.prompt_cache.budget, h2.prompt_cache);
  check("prompt_cache_same_output", r2.json.choices[0].message.content === "6", r2.json.choices[0]);
}
process.exit(failed ? 1 : 0);

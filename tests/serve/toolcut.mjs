// toolcut.mjs — a tool call and max_tokens, against `k3 serve --test-mode`
// (URL in argv[2]). The forced output is a reasoning line and one
// get_weather call; every max_tokens from 1 to its full length is tried. A
// call must never vanish: each answer is "none" (the call had not begun),
// "cut" (the last tool_calls entry's arguments are an unterminated JSON
// prefix, finish_reason "length") or "whole" (arguments parse, finish_reason
// "tool_calls"), in that order; a call that only lacks its closing tag is
// whole. Streamed answers agree with the non-streamed ones.
const URL = process.argv[2];
let failed = 0;
function check(name, ok, detail) {
  console.log(`${ok ? "PASS" : "FAIL"} ${name}`);
  if (!ok) { failed++; if (detail !== undefined) console.log("  " + JSON.stringify(detail).slice(0, 800)); }
}
const O = "<|open|>", C = "<|close|>", S = "<|sep|>", EOM = "<|end_of_msg|>";
const TOOLS = [{ type: "function", function: { name: "get_weather",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];
const HEAD = `Look.${C}think${S}${O}response${S}${C}response${S}${O}tools${S}` +
  `${O}call tool="get_weather" index="1"${S}${O}argument key="city" type="string"${S}Tokyo${C}argument${S}`;
const CALL = HEAD + `${C}call${S}${C}tools${S}${C}message${S}${EOM}`;
const post = async (path, body) => (await fetch(URL + path, { method: "POST",
  headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) })).json();
const ntok = async (text) => (await post("/tokenize", { content: text, parse_special: true })).count;
const req = (n, stream) => ({ model: "tiny", messages: [{ role: "user", content: "Weather?" }], tools: TOOLS,
  max_tokens: n, stream, k3_test_force_text: CALL });

function category(finish, calls) {
  if (!calls.length) return finish === "length" ? "none" : `bad(${finish}, no calls)`;
  const last = calls[calls.length - 1];
  let args = null;
  try { args = JSON.parse(last.function.arguments); } catch (e) {}
  if (calls.length === 1 && finish === "tool_calls" && args && args.city === "Tokyo" && last.function.name === "get_weather") return "whole";
  if (finish === "length" && args === null && last.function.arguments.startsWith("{")) return "cut";
  return `bad(${finish}, ${JSON.stringify(calls)})`;
}

async function streamed(n) {
  const r = await fetch(URL + "/v1/chat/completions", { method: "POST",
    headers: { "Content-Type": "application/json" }, body: JSON.stringify(req(n, true)) });
  const calls = [];
  let finish = null;
  for (const ev of (await r.text()).split("\n\n")) {
    if (!ev.startsWith("data: ") || ev === "data: [DONE]") continue;
    const ch = JSON.parse(ev.slice(6)).choices[0];
    if (!ch) continue;
    if (ch.finish_reason) finish = ch.finish_reason;
    for (const tc of ch.delta.tool_calls || []) {
      const c = calls[tc.index] || (calls[tc.index] = { function: { name: "", arguments: "" } });
      if (tc.function.name) c.function.name += tc.function.name;
      if (tc.function.arguments) c.function.arguments += tc.function.arguments;
    }
  }
  return category(finish, calls);
}

const full = await ntok(CALL);
const closeAt = await ntok(HEAD + C); // the closing tag of the call has begun
const seq = [], mismatch = [];
for (let n = 1; n <= full; n++) {
  const j = await post("/v1/chat/completions", req(n, false));
  const ch = j.choices[0];
  const cat = category(ch.finish_reason, ch.message.tool_calls || []);
  seq.push(cat);
  if (n % 3 === 0 || n >= closeAt - 1) { const s = await streamed(n); if (s !== cat) mismatch.push({ n, cat, s }); }
}
const str = seq.map((c) => c[0]).join("");
check("toolcut_order", /^n+c+w+$/.test(str), { str, seq: seq.filter((c) => c.startsWith("bad")) });
check("toolcut_never_dropped", !seq.some((c, i) => c === "none" && seq.slice(0, i).some((d) => d !== "none")), str);
check("toolcut_unclosed_is_whole", seq[closeAt - 1] === "whole", { closeAt, str });
check("toolcut_before_close_is_cut", seq[closeAt - 2] === "cut", { closeAt, str });
check("toolcut_full_is_whole", seq[full - 1] === "whole", str);
check("toolcut_stream_agrees", mismatch.length === 0, mismatch);
process.exit(failed ? 1 : 0);

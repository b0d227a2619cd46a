// openai_client.mjs — the official `openai` npm client, unmodified, against
// a running `k3 serve --test-mode --api-key test-key` (URL in argv[2]):
// models.list, chat (non-stream), chat stream, tools (stream and not), and
// the client's error type for a bad request. Output is forced through the
// server's real decode/parse/serialize path with k3_test_force_text.
import OpenAI from "../npm/node_modules/openai/index.mjs";

const client = new OpenAI({ baseURL: `${process.argv[2]}/v1`, apiKey: "test-key", maxRetries: 0 });
let failed = 0;
function check(name, ok, detail) {
  console.log(`${ok ? "PASS" : "FAIL"} ${name}`);
  if (!ok) { failed++; if (detail !== undefined) console.log("  " + JSON.stringify(detail).slice(0, 600)); }
}
const O = "<|open|>", C = "<|close|>", S = "<|sep|>", EOM = "<|end_of_msg|>";
const END = `${C}response${S}${C}message${S}${EOM}`;

async function run(name, fn) {
  try { await fn(); } catch (e) { check(name, false, String(e && e.stack || e)); }
}

await run("openai_models", async () => {
  const list = await client.models.list();
  check("openai_models", list.data.length === 1 && list.data[0].id === "tiny", list.data);
});

await run("openai_chat", async () => {
  const r = await client.chat.completions.create({
    model: "tiny", max_tokens: 200, messages: [{ role: "user", content: "Say hello" }],
    k3_test_force_text: `Greet.${C}think${S}${O}response${S}Hello from k3!${END}`,
  });
  check("openai_chat", r.choices[0].message.content === "Hello from k3!" && r.choices[0].finish_reason === "stop", r);
  check("openai_chat_reasoning", r.choices[0].message.reasoning_content === "Greet.", r.choices[0].message);
  check("openai_chat_usage", r.usage.prompt_tokens > 0 && r.usage.completion_tokens > 0, r.usage);
});

await run("openai_stream", async () => {
  const stream = await client.chat.completions.create({
    model: "tiny", max_tokens: 200, stream: true, stream_options: { include_usage: true },
    messages: [{ role: "user", content: "Count" }], chat_template_kwargs: { thinking: false },
    k3_test_force_text: `one, two, three — 四五六 🚀${END}`,
  });
  let text = "", finish = null, usage = null, n = 0;
  for await (const chunk of stream) {
    n++;
    if (chunk.usage) usage = chunk.usage;
    const c = chunk.choices[0];
    if (!c) continue;
    if (c.delta.content) text += c.delta.content;
    if (c.finish_reason) finish = c.finish_reason;
  }
  check("openai_stream", text === "one, two, three — 四五六 🚀" && finish === "stop" && n > 3, { text, finish, n });
  check("openai_stream_usage", usage && usage.completion_tokens > 0, usage);
});

const tools = [{ type: "function", function: { name: "get_weather", description: "Current weather",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];
const CALL = `Look it up.${C}think${S}${O}response${S}${C}response${S}${O}tools${S}` +
  `${O}call tool="get_weather" index="1"${S}${O}argument key="city" type="string"${S}Tokyo` +
  `${C}argument${S}${C}call${S}${C}tools${S}${C}message${S}${EOM}`;

await run("openai_tools", async () => {
  const r = await client.chat.completions.create({
    model: "tiny", max_tokens: 300, tools, messages: [{ role: "user", content: "Weather in Tokyo?" }],
    k3_test_force_text: CALL,
  });
  const tc = r.choices[0].message.tool_calls;
  check("openai_tools", r.choices[0].finish_reason === "tool_calls" && tc && tc.length === 1 &&
        tc[0].function.name === "get_weather" && JSON.parse(tc[0].function.arguments).city === "Tokyo", r.choices[0]);
  // the tool result goes back as history and the conversation continues
  const r2 = await client.chat.completions.create({
    model: "tiny", max_tokens: 300, tools,
    messages: [{ role: "user", content: "Weather in Tokyo?" }, r.choices[0].message,
               { role: "tool", tool_call_id: tc[0].id, content: "sunny, 21 C" }],
    k3_test_force_text: `Answer.${C}think${S}${O}response${S}It is sunny in Tokyo.${END}`,
  });
  check("openai_tools_followup", r2.choices[0].message.content === "It is sunny in Tokyo.", r2.choices[0]);
});

await run("openai_tools_stream", async () => {
  const stream = await client.chat.completions.create({
    model: "tiny", max_tokens: 300, tools, stream: true,
    messages: [{ role: "user", content: "Weather in Tokyo?" }], k3_test_force_text: CALL,
  });
  const calls = [];
  let finish = null;
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (!c) continue;
    for (const t of c.delta.tool_calls || []) {
      calls[t.index] = calls[t.index] || { name: "", arguments: "" };
      if (t.function.name) calls[t.index].name += t.function.name;
      if (t.function.arguments) calls[t.index].arguments += t.function.arguments;
    }
    if (c.finish_reason) finish = c.finish_reason;
  }
  check("openai_tools_stream", calls.length === 1 && calls[0].name === "get_weather" &&
        JSON.parse(calls[0].arguments).city === "Tokyo" && finish === "tool_calls", { calls, finish });
});

await run("openai_developer_role", async () => {
  const r = await client.chat.completions.create({
    model: "tiny", max_tokens: 50,
    messages: [{ role: "developer", content: "Answer in one word." }, { role: "user", content: "Hi" }],
    k3_test_force_text: `Short.${C}think${S}${O}response${S}Hello${END}`,
  });
  check("openai_developer_role", r.choices[0].message.content === "Hello", r.choices[0]);
});

await run("openai_bad_request", async () => {
  let err = null;
  try {
    await client.chat.completions.create({ model: "tiny", messages: [], max_tokens: 5 });
  } catch (e) { err = e; }
  check("openai_bad_request", err instanceof OpenAI.BadRequestError && err.status === 400 &&
        err.param === "messages", err && { status: err.status, param: err.param, message: err.message });
});

await run("openai_wrong_key", async () => {
  const bad = new OpenAI({ baseURL: `${process.argv[2]}/v1`, apiKey: "nope", maxRetries: 0 });
  let err = null;
  try { await bad.models.list(); } catch (e) { err = e; }
  check("openai_wrong_key", err instanceof OpenAI.AuthenticationError && err.status === 401, err && err.status);
});
process.exit(failed ? 1 : 0);

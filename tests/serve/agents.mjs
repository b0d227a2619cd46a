// agents.mjs — the clients agents are built on, unmodified from npm, against a
// running `k3 serve --test-mode --api-key test-key` (URL in argv[2]):
//   openai            responses.create plain / streamed / tools + function_call_output
//                     round trip (previous_response_id and full input), evicted id
//   @anthropic-ai/sdk messages.create plain / streamed / tools + tool_result round trip /
//                     thinking on, count_tokens, error shape
//   ai + @ai-sdk/openai (its default provider = Responses API) generateText / streamText
//                     with tools
//   @langchain/openai ChatOpenAI with useResponsesApi: invoke, tools
// Output is forced with k3_test_force_text: it still goes through the real
// decode → channel parse → tool-call parse → chat stream → API re-shaping path.
import { check, finish, npm, run } from "./harness.mjs";
const OpenAI = npm("openai").default;
const Anthropic = npm("@anthropic-ai/sdk").default;
const { generateText, streamText, tool, stepCountIs } = npm("ai");
const { createOpenAI } = npm("@ai-sdk/openai");
const { ChatOpenAI } = npm("@langchain/openai");
const { z } = npm("zod");

const URL_ = process.argv[2];
const O = "<|open|>", C = "<|close|>", S = "<|sep|>", EOM = "<|end_of_msg|>";
const END = `${C}response${S}${C}message${S}${EOM}`;
const say = (reason, text) => `${reason}${C}think${S}${O}response${S}${text}${END}`;
const call = (reason, name, args) => `${reason}${C}think${S}${O}response${S}${C}response${S}${O}tools${S}` +
  `${O}call tool="${name}" index="1"${S}${O}json type="object"${S}${JSON.stringify(args)}${C}json${S}${C}call${S}` +
  `${C}tools${S}${C}message${S}${EOM}`;
const plainCall = (name, args) => call("", name, args).replace(`${C}think${S}${O}response${S}`, "");

// ---------------- openai: Responses API ----------------
const oa = new OpenAI({ baseURL: `${URL_}/v1`, apiKey: "test-key", maxRetries: 0 });
const weatherTool = { type: "function", name: "get_weather", description: "Current weather",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } };

await run("openai_responses_plain", async () => {
  const r = await oa.responses.create({ model: "tiny", input: "Say hello", instructions: "Be brief.",
    k3_test_force_text: say("Greet.", "Hello from k3!") });
  check("openai_responses_plain", r.output_text === "Hello from k3!" && r.status === "completed" &&
        r.usage.input_tokens > 0 && r.usage.output_tokens > 0, r);
  check("openai_responses_reasoning_item", r.output[0].type === "reasoning" && r.output[0].summary[0].text === "Greet.", r.output);
});

await run("openai_responses_stream", async () => {
  const stream = await oa.responses.create({ model: "tiny", input: [{ role: "user", content: "Count" }],
    stream: true, reasoning: { effort: "low" }, k3_test_force_text: say("Counting.", "one, two — 四 🚀") });
  let text = "", types = [], completed = null, reasoning = "";
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === "response.output_text.delta") text += ev.delta;
    if (ev.type === "response.reasoning_summary_text.delta") reasoning += ev.delta;
    if (ev.type === "response.completed") completed = ev.response;
  }
  check("openai_responses_stream", text === "one, two — 四 🚀" && reasoning === "Counting." && completed &&
        completed.status === "completed" && completed.usage.output_tokens > 0 && types[0] === "response.created", { text, reasoning, types });
  // the SDK's own accumulating helper must accept the event sequence
  const s2 = oa.responses.stream({ model: "tiny", input: "Count", k3_test_force_text: say("R.", "abc") });
  const final = await s2.finalResponse();
  const msg = final.output.find(o => o.type === "message");
  check("openai_responses_stream_helper", final.status === "completed" && msg && msg.content[0].text === "abc", final);
});

await run("openai_responses_tools", async () => {
  const r1 = await oa.responses.create({ model: "tiny", input: "Weather in Tokyo?", tools: [weatherTool],
    k3_test_force_text: call("Look it up.", "get_weather", { city: "Tokyo" }) });
  const fc = r1.output.find(o => o.type === "function_call");
  check("openai_responses_function_call", fc && fc.name === "get_weather" && JSON.parse(fc.arguments).city === "Tokyo" && fc.call_id, r1.output);
  // round trip by previous_response_id
  const r2 = await oa.responses.create({ model: "tiny", previous_response_id: r1.id, tools: [weatherTool],
    input: [{ type: "function_call_output", call_id: fc.call_id, output: "sunny, 21 C" }],
    k3_test_force_text: say("Answer.", "It is sunny in Tokyo.") });
  check("openai_responses_function_call_output", r2.output_text === "It is sunny in Tokyo." &&
        r2.previous_response_id === r1.id, r2);
  // the same round trip with the whole conversation as input items
  const r3 = await oa.responses.create({ model: "tiny", tools: [weatherTool], store: false,
    input: [{ role: "user", content: "Weather in Tokyo?" }, fc,
            { type: "function_call_output", call_id: fc.call_id, output: "sunny, 21 C" }],
    k3_test_force_text: say("Answer.", "Sunny.") });
  check("openai_responses_input_items", r3.output_text === "Sunny.", r3);
  // streamed tool call
  const st = await oa.responses.create({ model: "tiny", input: "Weather?", tools: [weatherTool], stream: true,
    k3_test_force_text: call("", "get_weather", { city: "Oslo" }) });
  let args = "", done = null;
  for await (const ev of st) {
    if (ev.type === "response.function_call_arguments.delta") args += ev.delta;
    if (ev.type === "response.function_call_arguments.done") done = ev;
  }
  check("openai_responses_stream_tools", JSON.parse(args).city === "Oslo" && done && done.arguments === args, { args, done });
});

await run("openai_responses_evicted", async () => {
  let err = null;
  try { await oa.responses.create({ model: "tiny", input: "x", previous_response_id: "resp_gone" }); } catch (e) { err = e; }
  check("openai_responses_previous_not_found", err && err.status === 400 && err.code === "previous_response_not_found", err && err.message);
});

await run("openai_responses_structured", async () => {
  const r = await oa.responses.create({ model: "tiny", input: "JSON please", temperature: 1, max_output_tokens: 80,
    reasoning: { effort: "none" },
    text: { format: { type: "json_schema", name: "p", schema: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] } } } });
  let ok = false;
  try { ok = Number.isInteger(JSON.parse(r.output_text).n); } catch (e) {}
  check("openai_responses_text_format_enforced", ok, r.output_text);
});

// ---------------- Anthropic Messages ----------------
const an = new Anthropic({ baseURL: URL_, apiKey: "test-key", maxRetries: 0 });
const anTool = { name: "get_weather", description: "Current weather",
  input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } };

await run("anthropic_plain", async () => {
  const m = await an.messages.create({ model: "tiny", max_tokens: 200, system: "Be brief.",
    messages: [{ role: "user", content: "Say hello" }], k3_test_force_text: `Hello from k3!${END}` });
  check("anthropic_plain", m.type === "message" && m.content.length === 1 && m.content[0].type === "text" &&
        m.content[0].text === "Hello from k3!" && m.stop_reason === "end_turn" && m.usage.output_tokens > 0, m);
});

await run("anthropic_stream", async () => {
  const stream = an.messages.stream({ model: "tiny", max_tokens: 200, messages: [{ role: "user", content: "Count" }],
    k3_test_force_text: `one, two — 四 🚀${END}` });
  let text = "";
  stream.on("text", t => { text += t; });
  const final = await stream.finalMessage();
  check("anthropic_stream", text === "one, two — 四 🚀" && final.content[0].text === text && final.stop_reason === "end_turn", { text, final });
});

await run("anthropic_thinking", async () => {
  const m = await an.messages.create({ model: "tiny", max_tokens: 300, thinking: { type: "enabled", budget_tokens: 2048 },
    messages: [{ role: "user", content: "Think first" }], k3_test_force_text: say("Let me think.", "Done.") });
  check("anthropic_thinking", m.content[0].type === "thinking" && m.content[0].thinking === "Let me think." &&
        m.content[1].type === "text" && m.content[1].text === "Done.", m.content);
  const stream = an.messages.stream({ model: "tiny", max_tokens: 300, thinking: { type: "enabled", budget_tokens: 20000 },
    messages: [{ role: "user", content: "Think first" }], k3_test_force_text: say("Hmm.", "Ok.") });
  let thinking = "";
  stream.on("thinking", t => { thinking += t; });
  const f = await stream.finalMessage();
  check("anthropic_thinking_stream", thinking === "Hmm." && f.content[1].text === "Ok.", f.content);
});

await run("anthropic_tools", async () => {
  const m1 = await an.messages.create({ model: "tiny", max_tokens: 300, tools: [anTool],
    messages: [{ role: "user", content: "Weather in Tokyo?" }], k3_test_force_text: plainCall("get_weather", { city: "Tokyo" }) });
  const tu = m1.content.find(b => b.type === "tool_use");
  check("anthropic_tool_use", m1.stop_reason === "tool_use" && tu && tu.name === "get_weather" && tu.input.city === "Tokyo", m1);
  const m2 = await an.messages.create({ model: "tiny", max_tokens: 300, tools: [anTool],
    messages: [{ role: "user", content: "Weather in Tokyo?" }, { role: "assistant", content: m1.content },
               { role: "user", content: [{ type: "tool_result", tool_use_id: tu.id, content: "sunny, 21 C" }] }],
    k3_test_force_text: `It is sunny in Tokyo.${END}` });
  check("anthropic_tool_result", m2.content[0].text === "It is sunny in Tokyo." && m2.stop_reason === "end_turn", m2);
  const st = an.messages.stream({ model: "tiny", max_tokens: 300, tools: [anTool], tool_choice: { type: "tool", name: "get_weather" },
    messages: [{ role: "user", content: "Weather?" }], k3_test_force_text: plainCall("get_weather", { city: "Oslo" }) });
  let partial = "";
  st.on("inputJson", (delta) => { partial += delta; });
  const f = await st.finalMessage();
  const tu2 = f.content.find(b => b.type === "tool_use");
  check("anthropic_tool_stream", tu2 && tu2.input.city === "Oslo" && JSON.parse(partial).city === "Oslo", f.content);
});

await run("anthropic_count_tokens", async () => {
  const r = await an.messages.countTokens({ model: "tiny", messages: [{ role: "user", content: "Hello there" }] });
  check("anthropic_count_tokens", r.input_tokens > 3, r);
});

await run("anthropic_errors", async () => {
  let err = null;
  try { await an.messages.create({ model: "tiny", max_tokens: 10, messages: [] }); } catch (e) { err = e; }
  check("anthropic_error_shape", err && err.status === 400 && err.error && err.error.type === "error" &&
        err.error.error.type === "invalid_request_error", err && err.error);
  const bad = new Anthropic({ baseURL: URL_, apiKey: "nope", maxRetries: 0 });
  err = null;
  try { await bad.messages.create({ model: "tiny", max_tokens: 10, messages: [{ role: "user", content: "x" }] }); } catch (e) { err = e; }
  check("anthropic_auth_error", err && err.status === 401 && err.error.error.type === "authentication_error", err && err.error);
});

// ---------------- Vercel AI SDK, default OpenAI provider (Responses API) ----------------
// The clients cannot send extension fields per call, so their fetch adds the
// next forced output to each request body (the transport only; nothing else).
function forcingFetch(queue, seen) {
  return async (url, init) => {
    seen.push(String(url));
    const body = JSON.parse(init.body);
    body.k3_test_force_text = queue.shift();
    return fetch(url, { ...init, body: JSON.stringify(body) });
  };
}
await run("ai_sdk_generate_text", async () => {
  const seen = [];
  const provider = createOpenAI({ baseURL: `${URL_}/v1`, apiKey: "test-key",
    fetch: forcingFetch([call("", "get_weather", { city: "Paris" }), say("", "It is sunny in Paris.")], seen) });
  const tools = { get_weather: tool({ description: "Current weather", inputSchema: z.object({ city: z.string() }),
                                      execute: async ({ city }) => `sunny in ${city}` }) };
  const r = await generateText({ model: provider("tiny"), prompt: "Weather in Paris?", tools, stopWhen: stepCountIs(3) });
  check("ai_sdk_generate_text_tools", r.text === "It is sunny in Paris." && r.steps.length === 2 &&
        r.steps[0].toolCalls[0].input.city === "Paris" && seen.every(u => u.endsWith("/responses")),
        { text: r.text, steps: r.steps.length, seen });
});
await run("ai_sdk_stream_text", async () => {
  const seen = [];
  const provider = createOpenAI({ baseURL: `${URL_}/v1`, apiKey: "test-key",
    fetch: forcingFetch([call("Check.", "get_weather", { city: "Rome" }), say("", "Rome is sunny.")], seen) });
  const tools = { get_weather: tool({ description: "Current weather", inputSchema: z.object({ city: z.string() }),
                                      execute: async ({ city }) => `sunny in ${city}` }) };
  const r = streamText({ model: provider("tiny"), prompt: "Weather in Rome?", tools, stopWhen: stepCountIs(3) });
  let text = "";
  for await (const t of r.textStream) text += t;
  const steps = await r.steps;
  check("ai_sdk_stream_text_tools", text === "Rome is sunny." && steps.length === 2 &&
        steps[0].toolCalls[0].input.city === "Rome" && seen.every(u => u.endsWith("/responses")), { text, steps: steps.length, seen });
});

// ---------------- LangChain ChatOpenAI with the Responses API ----------------
await run("langchain_responses", async () => {
  const seen = [];
  const llm = new ChatOpenAI({ model: "tiny", apiKey: "test-key", useResponsesApi: true, maxRetries: 0,
    configuration: { baseURL: `${URL_}/v1`, fetch: forcingFetch([say("Hm.", "Hello from LangChain."),
                                                                 call("", "get_weather", { city: "Lima" })], seen) } });
  const r = await llm.invoke("Say hello");
  const text = typeof r.content === "string" ? r.content : r.content.filter(p => p.type === "text").map(p => p.text).join("");
  check("langchain_responses_invoke", text === "Hello from LangChain." && seen[0].endsWith("/responses"), { content: r.content, seen });
  const withTools = llm.bindTools([{ type: "function", function: { name: "get_weather", description: "Current weather",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }]);
  const r2 = await withTools.invoke("Weather in Lima?");
  check("langchain_responses_tools", r2.tool_calls && r2.tool_calls[0].name === "get_weather" && r2.tool_calls[0].args.city === "Lima", r2.tool_calls);
});
finish();

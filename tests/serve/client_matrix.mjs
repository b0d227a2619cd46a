// client_matrix.mjs — the structured-output helper of every official JS
// client, unmodified from npm, against a running `k3 serve` on a random
// synthetic model (URL in argv[2]) with sampling and no test hooks. One zod
// schema with what clients send most: bounded integers, an email, a
// datetime, a discriminated union, an optional field, a bounded list. Each
// client's own parse must succeed and the JSON must validate (ajv, formats)
// against z.toJSONSchema of the schema:
//   openai            chat.completions.parse + zodResponseFormat,
//                     responses.parse + zodTextFormat
//   ai                generateObject and generateText + Output.object over
//                     @ai-sdk/openai (Responses, and .chat for chat completions)
//                     and @ai-sdk/openai-compatible
//   @langchain/openai withStructuredOutput (chat completions and Responses)
//   @anthropic-ai/sdk messages.parse + zodOutputFormat
// and, through the openai client, n, logit_bias, penalties, an echoed
// assistant message with U+0000 and responses.retrieve.
import { createRequire } from "module";
const require = createRequire(new URL("../npm/package.json", import.meta.url));
const OpenAI = require("openai").default;
const { zodResponseFormat, zodTextFormat } = require("openai/helpers/zod");
const Anthropic = require("@anthropic-ai/sdk").default;
const { zodOutputFormat } = require("@anthropic-ai/sdk/helpers/zod");
const { generateObject, generateText, Output } = require("ai");
const { createOpenAI } = require("@ai-sdk/openai");
const { ChatOpenAI } = require("@langchain/openai");
const { z } = require("zod");
const Ajv = require("ajv/dist/2020").default;
const addFormats = require("ajv-formats").default;

const URL_ = process.argv[2];
const SEEDS = [1, 2];
let failed = 0;
function check(name, ok, detail) {
  console.log(`${ok ? "PASS" : "FAIL"} ${name}`);
  if (!ok) { failed++; if (detail !== undefined) console.log("  " + JSON.stringify(detail).slice(0, 900)); }
}

const Shape = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("circle"), r: z.number().int().min(1).max(9) }),
  z.object({ kind: z.literal("square"), side: z.number().int().positive().max(99) }),
]);
const Person = z.object({
  name: z.string().max(16), age: z.number().int().min(0).max(120), email: z.email(),
  joined: z.iso.datetime(), shape: Shape, nick: z.string().max(8).nullable(),
  tags: z.array(z.string().max(6)).max(3),
});
// Anthropic's helper moves bounds (minimum, maxLength, pattern...) into
// descriptions, as its API enforces none, and checks them in the client: the
// same shape without bounds
const AnthPerson = z.object({
  name: z.string(), age: z.number().int(), email: z.email(), joined: z.iso.datetime(),
  shape: z.discriminatedUnion("kind", [z.object({ kind: z.literal("circle"), r: z.number().int() }),
                                       z.object({ kind: z.literal("square"), side: z.number().int() })]),
  nick: z.string().nullable(), tags: z.array(z.string()),
});
const ajv = new Ajv({ strict: false });
addFormats(ajv);
const validators = { Person: ajv.compile(z.toJSONSchema(Person)), AnthPerson: ajv.compile(z.toJSONSchema(AnthPerson)) };
const prompt = "Describe a person as JSON.";

// Each case returns the parsed object (as the client gives it) for a seed.
// Reasoning is off (each API's own field): on the random model it would run
// until the budget cuts it, and a cut answer is honestly finish "length",
// which the parse helpers refuse.
async function matrix(name, oneSeed, schema = "Person") {
  const validate = validators[schema];
  for (const seed of SEEDS) {
    let got, err = null;
    try { got = await oneSeed(seed); } catch (e) { err = String(e && e.stack || e); }
    const ok = !err && got && validate(got);
    if (process.env.K3_MATRIX_VERBOSE) console.log(JSON.stringify(got));
    check(`client_matrix_${name}_seed${seed}`, ok, err || { got, errors: validate.errors });
  }
}

const oa = new OpenAI({ baseURL: `${URL_}/v1`, apiKey: "none", maxRetries: 0 });
await matrix("openai_chat_parse_zodResponseFormat", async (seed) => {
  const r = await oa.chat.completions.parse({ model: "tiny", seed, temperature: 1, max_tokens: 400,
    reasoning_effort: "none", messages: [{ role: "user", content: prompt }], response_format: zodResponseFormat(Person, "person") });
  return r.choices[0].message.parsed;
});
await matrix("openai_responses_parse_zodTextFormat", async (seed) => {
  const r = await oa.responses.parse({ model: "tiny", temperature: 1, max_output_tokens: 400, input: prompt, reasoning: { effort: "none" },
    text: { format: zodTextFormat(Person, "person") } });
  return r.output_parsed;
});

// the AI SDK sends no seed: sampling differs per call anyway
const aiOpenAI = createOpenAI({ baseURL: `${URL_}/v1`, apiKey: "none" });
const providerOptions = { openai: { reasoningEffort: "none" } };
await matrix("ai_sdk_openai_generateObject", async () =>
  (await generateObject({ model: aiOpenAI("tiny"), schema: Person, prompt, temperature: 1, maxOutputTokens: 400, maxRetries: 0, providerOptions })).object);
await matrix("ai_sdk_openai_chat_generateObject", async () =>
  (await generateObject({ model: aiOpenAI.chat("tiny"), schema: Person, prompt, temperature: 1, maxOutputTokens: 400, maxRetries: 0, providerOptions })).object);
await matrix("ai_sdk_openai_Output_object", async () =>
  (await generateText({ model: aiOpenAI("tiny"), output: Output.object({ schema: Person }), prompt, temperature: 1,
                        maxOutputTokens: 400, maxRetries: 0, providerOptions })).output);
{
  const compat = require("@ai-sdk/openai-compatible");
  const p = compat.createOpenAICompatible({ name: "k3", baseURL: `${URL_}/v1`, apiKey: "none", supportsStructuredOutputs: true });
  await matrix("ai_sdk_openai_compatible_generateObject", async () =>
    (await generateObject({ model: p("tiny"), schema: Person, prompt, temperature: 1, maxOutputTokens: 400, maxRetries: 0, providerOptions })).object);
  await matrix("ai_sdk_openai_compatible_Output_object", async () =>
    (await generateText({ model: p("tiny"), output: Output.object({ schema: Person }), prompt, temperature: 1,
                          maxOutputTokens: 400, maxRetries: 0, providerOptions })).output);
}

for (const responses of [false, true]) {
  const llm = new ChatOpenAI({ model: "tiny", apiKey: "none", temperature: 1, maxTokens: 400, maxRetries: 0,
    useResponsesApi: responses, configuration: { baseURL: `${URL_}/v1` },
    // LangChain sends its `reasoning` option only for OpenAI's reasoning model names
    modelKwargs: responses ? { reasoning: { effort: "none" } } : { reasoning_effort: "none" } });
  await matrix(`langchain_withStructuredOutput${responses ? "_responses" : ""}`, async () =>
    llm.withStructuredOutput(Person).invoke(prompt));
}

const an = new Anthropic({ baseURL: URL_, apiKey: "none", maxRetries: 0 });
await matrix("anthropic_messages_parse_zodOutputFormat", async () => {
  const m = await an.messages.parse({ model: "tiny", max_tokens: 400, temperature: 1, thinking: { type: "disabled" },
    messages: [{ role: "user", content: prompt }], output_config: { format: zodOutputFormat(AnthPerson) } });
  return m.parsed_output;
}, "AnthPerson");
// The other request fields agents send, through the openai client as it
// sends them: n choices, logit_bias, penalties, an echoed assistant message
// holding U+0000, and a stored response read back with responses.retrieve.
const chat = (extra, max_tokens = 24) => oa.chat.completions.create({ model: "tiny", temperature: 0, max_tokens,
  reasoning_effort: "none", messages: [{ role: "user", content: "Count and repeat." }], ...extra });
async function field(name, fn) {
  let ok = false, detail;
  try { [ok, detail] = await fn(); } catch (e) { detail = String(e && e.stack || e); }
  check(`client_matrix_openai_${name}`, ok, detail);
}
await field("n_3", async () => {
  const r = await chat({ n: 3, temperature: 1, seed: 7 }, 8);
  return [r.choices.length === 3 && r.choices.map((c) => c.index).join() === "0,1,2", r.choices];
});
const greedy = (await chat({}, 40)).choices[0].message.content;
await field("logit_bias", async () => {
  const r = await chat({ logit_bias: { 65: 100 } }, 40);
  return [r.choices[0].message.content !== greedy, r.choices[0].message.content];
});
await field("frequency_penalty", async () => {
  const r = await chat({ frequency_penalty: 2 }, 40);
  return [r.choices[0].message.content !== greedy, r.choices[0].message.content];
});
await field("presence_penalty", async () => {
  const r = await chat({ presence_penalty: 2 }, 40);
  return [r.choices[0].message.content !== greedy, r.choices[0].message.content];
});
await field("assistant_echo_with_nul", async () => {
  const r = await oa.chat.completions.create({ model: "tiny", max_tokens: 4, reasoning_effort: "none",
    messages: [{ role: "user", content: "hi" }, { role: "assistant", content: "a\u0000b" }, { role: "user", content: "again" }] });
  return [r.choices.length === 1, r];
});
await field("responses_retrieve", async () => {
  const made = await oa.responses.create({ model: "tiny", input: "hello", max_output_tokens: 8, store: true,
    reasoning: { effort: "none" } });
  const back = await oa.responses.retrieve(made.id);
  return [back.id === made.id && back.output_text === made.output_text, { made: made.id, back: back.id }];
});
process.exit(failed ? 1 : 0);

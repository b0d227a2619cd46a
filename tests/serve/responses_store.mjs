// responses_store.mjs — the official openai npm client, unmodified, on the
// stored side of the Responses API against `k3 serve --test-mode --api-key
// key-a --api-key key-b` (URL in argv[2]): responses.retrieve, responses.delete,
// responses.inputItems.list (pagination: limit, order, after; the client's
// auto-pagination), another key's id answering NotFound exactly like an
// unknown id, and reasoning_effort with the same values on chat completions and
// Responses (none ... max; anything else a 400 naming the field).
import { check, error, finish, npm, run } from "./harness.mjs";
const OpenAI = npm("openai").default;

const URL_ = process.argv[2];

const a = new OpenAI({ baseURL: `${URL_}/v1`, apiKey: "key-a", maxRetries: 0 });
const b = new OpenAI({ baseURL: `${URL_}/v1`, apiKey: "key-b", maxRetries: 0 });
const base = { model: "tiny", max_output_tokens: 4, k3_test_force_text: "ok" };
const FAKE = "resp_" + "0".repeat(32);

await run("openai_responses_retrieve", async () => {
  const r = await a.responses.create({ ...base, input: "hello" });
  const got = await a.responses.retrieve(r.id);
  check("openai_responses_retrieve", got.id === r.id && got.status === r.status &&
        JSON.stringify(got.output) === JSON.stringify(r.output), { r, got });
  const eb = await error(b.responses.retrieve(r.id));
  const eu = await error(b.responses.retrieve(FAKE));
  check("openai_responses_retrieve_other_key_not_found",
        eb instanceof OpenAI.NotFoundError && eu instanceof OpenAI.NotFoundError &&
        eb.message.replace(r.id, "ID") === eu.message.replace(FAKE, "ID"), [eb && eb.message, eu && eu.message]);
});

await run("openai_responses_delete", async () => {
  const r = await a.responses.create({ ...base, input: "to delete" });
  const eb = await error(b.responses.delete(r.id));
  check("openai_responses_delete_other_key_not_found", eb instanceof OpenAI.NotFoundError, eb && eb.message);
  const d = await a.responses.delete(r.id);  // the client resolves with no body content of use
  check("openai_responses_delete_ok", d === undefined || d === null || typeof d === "object", d);
  const e = await error(a.responses.retrieve(r.id));
  check("openai_responses_deleted_not_found", e instanceof OpenAI.NotFoundError, e && e.message);
  const e2 = await error(a.responses.create({ ...base, input: "x", previous_response_id: r.id }));
  check("openai_responses_deleted_previous_400", e2 && e2.status === 400 &&
        e2.code === "previous_response_not_found", e2 && e2.message);
});

await run("openai_responses_input_items", async () => {
  const input = ["m0", "m1", "m2", "m3", "m4"].map((t) => ({ role: "user", content: t }));
  const r = await a.responses.create({ ...base, input });
  const text = (it) => it.content[0].text;
  const all = await a.responses.inputItems.list(r.id);
  check("openai_input_items_default_desc", all.data.map(text).join() === "m4,m3,m2,m1,m0" &&
        all.data.every((it) => it.type === "message" && it.role === "user" && it.id), all.data);
  const p1 = await a.responses.inputItems.list(r.id, { order: "asc", limit: 2 });
  const p2 = await a.responses.inputItems.list(r.id, { order: "asc", limit: 2, after: p1.data[1].id });
  check("openai_input_items_after", p1.data.map(text).join() === "m0,m1" &&
        p2.data.map(text).join() === "m2,m3" && p1.has_more, [p1.data, p2.data]);
  const seen = [];
  for await (const it of a.responses.inputItems.list(r.id, { order: "asc", limit: 2 })) seen.push(text(it));
  check("openai_input_items_autopaginate", seen.join() === "m0,m1,m2,m3,m4", seen);
  const eb = await error(b.responses.inputItems.list(r.id));
  check("openai_input_items_other_key_not_found", eb instanceof OpenAI.NotFoundError, eb && eb.message);
  const el = await error(a.responses.inputItems.list(r.id, { limit: 101 }));
  check("openai_input_items_limit_400", el && el.status === 400 && el.param === "limit", el && el.message);
});

await run("openai_reasoning_effort", async () => {
  const values = ["none", "minimal", "low", "medium", "high", "xhigh", "max"];
  const chat = {}, resp = {};
  for (const v of values) {
    const c = await a.chat.completions.create({ model: "tiny", max_tokens: 2, k3_test_force_text: "ok",
      messages: [{ role: "user", content: "hi" }], reasoning_effort: v });
    const r = await a.responses.create({ ...base, input: "hi", reasoning: { effort: v } });
    check(`openai_reasoning_effort_${v}`, c.choices.length === 1 && r.status === "completed", [c, r]);
    chat[v] = c.usage.prompt_tokens;
    resp[v] = r.usage.input_tokens;
  }
  // the prompt shows the mapping: minimal = low, medium = high, xhigh = max; none has no
  // effort message (thinking off); the two routes render the same prompt
  check("openai_reasoning_effort_mapping", chat.minimal === chat.low && chat.medium === chat.high &&
        chat.xhigh === chat.max && chat.none < chat.low &&
        values.every((v) => chat[v] === resp[v]), { chat, resp });
  const ec = await error(a.chat.completions.create({ model: "tiny", max_tokens: 2,
    messages: [{ role: "user", content: "hi" }], reasoning_effort: "extreme" }));
  const er = await error(a.responses.create({ ...base, input: "hi", reasoning: { effort: "extreme" } }));
  check("openai_reasoning_effort_unknown_400_both", ec && ec.status === 400 && ec.param === "reasoning_effort" &&
        er && er.status === 400 && er.param === "reasoning.effort", [ec && ec.message, er && er.message]);
});

finish();

// anthropic_check.mjs — the Anthropic routes against a real `k3 serve` (random
// model, sampling, no test hooks): /v1/messages and /v1/messages/count_tokens
// refuse exactly the same bodies with the same field named (one validator),
// and structured outputs (output_config.format, what @anthropic-ai/sdk's
// messages.parse sends) are enforced. Usage: node anthropic_check.mjs URL
import { createRequire } from "module";
const require = createRequire(new URL("../npm/package.json", import.meta.url));
const Anthropic = require("@anthropic-ai/sdk").default;
const { zodOutputFormat } = require("@anthropic-ai/sdk/helpers/zod");
const { z } = require("zod");

const url = process.argv[2];
let fails = 0;
const check = (name, ok, info) => {
    console.log(`${ok ? "PASS" : "FAIL"} ${name}`);
    if (!ok) { fails++; if (info !== undefined) console.log("  " + JSON.stringify(info).slice(0, 900)); }
};
async function post(path, body) {
    const r = await fetch(url + path, { method: "POST", headers: { "Content-Type": "application/json" },
                                        body: JSON.stringify(body) });
    return { status: r.status, body: await r.json() };
}
const U = { role: "user", content: "Hi" };
const base = { model: "tiny", max_tokens: 16, messages: [U] };
const useA = { type: "tool_use", id: "t1", name: "f", input: {} };
const tool = { name: "f", input_schema: { type: "object" } };
const cases = [
    ["system_object", { system: { text: "be brief" } }, "system"],
    ["system_block_not_text", { system: [{ type: "image" }] }, "system.0"],
    ["budget_negative", { max_tokens: 2048, thinking: { type: "enabled", budget_tokens: -5 } }, "thinking.budget_tokens"],
    ["budget_string", { max_tokens: 2048, thinking: { type: "enabled", budget_tokens: "x" } }, "thinking.budget_tokens"],
    ["budget_missing", { thinking: { type: "enabled" } }, "thinking.budget_tokens"],
    ["thinking_type", { thinking: { type: "sometimes" } }, "thinking.type"],
    ["duplicate_tool_use_ids", { tools: [tool], messages: [U,
        { role: "assistant", content: [useA, { ...useA }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "t1", content: "ok" }] }] },
     "messages.1.content.1"],
    ["duplicate_ids_across_turns", { tools: [tool], messages: [U, { role: "assistant", content: [useA] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "t1", content: "ok" }] },
        { role: "assistant", content: [useA] }] }, "messages.3.content.0"],
    ["tool_result_unknown_id", { messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: "zz" }] }] },
     "messages.0.content.0"],
    ["duplicate_tool_names", { tools: [tool, tool] }, "tools.1"],
    ["temperature_range", { temperature: 1.5 }, "temperature"],
    ["max_tokens_zero", { max_tokens: 0 }, "max_tokens"],
    ["stream_not_bool", { stream: "yes" }, "stream"],
    ["unknown_field", { frobnicate: 1 }, "frobnicate"],
    ["unimplemented_field", { mcp_servers: [] }, "mcp_servers"],
    ["output_format_shape", { output_config: { format: { type: "json_schema" } } }, "output_config.format"],
    ["effort_value", { output_config: { effort: "extreme" } }, "output_config.effort"],
    ["image_block", { messages: [{ role: "user", content: [{ type: "image", source: {} }] }] }, "messages.0.content.0"],
];
for (const [name, patch, param] of cases) {
    const body = { ...base, ...patch };
    const m = await post("/v1/messages", body);
    const c = await post("/v1/messages/count_tokens", body);
    const said = (r) => r.body?.error?.message ?? "";
    check(`anthropic_refuses_${name}`, m.status === 400 && c.status === 400 &&
          said(m).startsWith(param + ":") && said(c) === said(m) && m.body.type === "error",
          { m, c });
}
// a valid body without max_tokens: count_tokens counts, messages requires it
const ok = await post("/v1/messages/count_tokens", { model: "tiny", messages: [U] });
check("anthropic_count_tokens_without_max_tokens", ok.status === 200 && ok.body.input_tokens > 0, ok);
const need = await post("/v1/messages", { model: "tiny", messages: [U] });
check("anthropic_messages_needs_max_tokens", need.status === 400 && /max_tokens/.test(need.body.error.message), need);
// a schema the grammar cannot enforce is refused by both routes alike
const badSchema = { ...base, output_config: { format: { type: "json_schema", schema: { type: "object", properties: { a: { $ref: "#/nope" } } } } } };
const bm = await post("/v1/messages", badSchema), bc = await post("/v1/messages/count_tokens", badSchema);
check("anthropic_bad_schema_both_routes", bm.status === 400 && bc.status === 400 && bm.body.error.message === bc.body.error.message, { bm, bc });

// structured outputs through the SDK's messages.parse, sampled (temperature 1)
const an = new Anthropic({ baseURL: url, apiKey: "k", maxRetries: 0 });
const Person = z.object({ name: z.string(), age: z.number(), tags: z.array(z.string()), member: z.boolean(),
                          role: z.enum(["admin", "user"]) });
for (const seed of [1, 2, 3]) {
    try {
        const m = await an.messages.parse({ model: "tiny", max_tokens: 160, temperature: 1,
            messages: [{ role: "user", content: `Describe person ${seed} as JSON.` }],
            output_config: { format: zodOutputFormat(Person) } });
        const p = m.parsed_output;
        check(`anthropic_messages_parse_${seed}`, p && typeof p.name === "string" && typeof p.age === "number" &&
              Array.isArray(p.tags) && typeof p.member === "boolean" && ["admin", "user"].includes(p.role), m);
    } catch (e) {
        check(`anthropic_messages_parse_${seed}`, false, String(e));
    }
}
// the same through a stream: the text deltas concatenate to valid JSON
const st = an.messages.stream({ model: "tiny", max_tokens: 160, temperature: 1, messages: [U],
    output_config: { format: { type: "json_schema", schema: { type: "object", properties: { x: { type: "boolean" } },
                                                              required: ["x"], additionalProperties: false } } } });
let text = "";
st.on("text", (t) => { text += t; });
await st.finalMessage();
let parsed = null;
try { parsed = JSON.parse(text); } catch {}
check("anthropic_structured_stream", parsed && typeof parsed.x === "boolean" && Object.keys(parsed).length === 1, text);
process.exit(fails ? 1 : 0);

// structured.mjs — structured output enforced at sampling time, against a
// running `k3 serve` on a random synthetic model (URL in argv[2]), through the
// official `openai` client: temperature 1, many seeds, and every answer must
// parse and validate (ajv) against its schema; a named tool_choice always
// yields a call of that function with schema-valid arguments; "required"
// always yields calls; an unenforceable schema and `grammar` are refused.
import OpenAI from "../npm/node_modules/openai/index.mjs";
import Ajv from "../npm/node_modules/ajv/dist/2020.js";
import addFormats from "../npm/node_modules/ajv-formats/dist/index.js";
import { readFileSync } from "node:fs";

const client = new OpenAI({ baseURL: `${process.argv[2]}/v1`, apiKey: "none", maxRetries: 0 });
const ajv = new Ajv.default({ strict: false });
addFormats.default(ajv);
let failed = 0;
function check(name, ok, detail) {
  console.log(`${ok ? "PASS" : "FAIL"} ${name}`);
  if (!ok) { failed++; if (detail !== undefined) console.log("  " + JSON.stringify(detail).slice(0, 800)); }
}
const SEEDS = Number(process.env.K3_STRUCTURED_SEEDS || 24);

// zod v4 (z.toJSONSchema) and Pydantic v2 (tests/serve/schemas/pydantic.json)
// schemas for common types: each is enforced and every sample validates
const z = await import("../npm/node_modules/zod/index.js");
const zodSchemas = {
  zod_user: z.object({ email: z.email(), site: z.url(), at: z.iso.datetime(), id: z.uuid(), age: z.number().int().min(0).max(130),
    count: z.number().int(), price: z.number().positive().max(1000), nick: z.string().optional(), note: z.string().nullable(),
    role: z.enum(["admin", "user"]), kind: z.literal("person"), tags: z.array(z.string().max(8)).min(1).max(3),
    day: z.iso.date(), ip: z.ipv4(), code: z.string().regex(/^[a-z]{2}\d{2}$/), v6: z.ipv6(), choice: z.union([z.string(), z.number()]) }),
  // object unions: a discriminated union, a plain union of objects told
  // apart by a property each alone has, and records
  zod_unions: z.object({
    shape: z.discriminatedUnion("kind", [z.object({ kind: z.literal("circle"), r: z.number().positive().max(10) }),
      z.object({ kind: z.literal("rect"), w: z.number().int().min(1).max(9), h: z.number().int().min(1).max(9) }),
      z.object({ kind: z.enum(["dot", "none"]) })]),
    contact: z.union([z.object({ email: z.email(), name: z.string().max(12) }), z.object({ phone: z.string().regex(/^\+\d{6,9}$/), name: z.string().max(12) }),
      z.null()]),
    scores: z.record(z.string(), z.number().int().min(0).max(100)),
    flags: z.record(z.enum(["a", "b"]), z.boolean()),
    host: z.hostname(),
  }),
};
const pyd = JSON.parse(readFileSync(new URL("./schemas/pydantic.json", import.meta.url), "utf8"));
delete pyd._comment;

const schemas = {
  ...Object.fromEntries(Object.entries(zodSchemas).map(([k, v]) => [k, z.toJSONSchema(v)])),
  ...Object.fromEntries(Object.entries(pyd).map(([k, v]) => [`pydantic_${k}`, v])),
  person: {
    type: "object", additionalProperties: false,
    properties: {
      name: { type: "string", maxLength: 24 },
      age: { type: "integer", minimum: 0 },
      email: { type: ["string", "null"] },
      kind: { enum: ["cat", "dog", 3, null] },
      tags: { type: "array", items: { type: "string", maxLength: 6 }, maxItems: 3 },
      address: { type: "object", properties: { city: { type: "string" }, zip: { type: "number" } },
                 required: ["city"], additionalProperties: false },
    },
    required: ["name", "age", "kind", "tags", "address"],
  },
  dates: {
    type: "object",
    properties: { day: { type: "string", format: "date" }, at: { type: "string", format: "date-time" },
                  id: { type: "string", format: "uuid" }, when: { type: "string", format: "time" } },
    required: ["day", "at", "id", "when"],
  },
  defs: {
    $defs: { Item: { type: "object", properties: { sku: { type: "string", minLength: 2, maxLength: 5 },
                                                   qty: { type: "integer" } }, required: ["sku", "qty"] } },
    type: "object", properties: { items: { type: "array", items: { $ref: "#/$defs/Item" }, minItems: 1, maxItems: 2 },
                                  note: { anyOf: [{ type: "string", maxLength: 10 }, { type: "null" }] } },
    required: ["items", "note"],
  },
  list: { type: "array", items: { type: "boolean" }, minItems: 2, maxItems: 4 },
  bounds: {
    type: "object", additionalProperties: false, required: ["pct", "zint", "pos", "step", "temp", "big"],
    properties: {
      pct: { type: "integer", minimum: 0, maximum: 100 },
      zint: { type: "integer", minimum: -9007199254740991, maximum: 9007199254740991 }, // zod .int()
      pos: { type: "number", exclusiveMinimum: 0 }, // zod .positive()
      step: { type: "integer", multipleOf: 5, exclusiveMinimum: -20, exclusiveMaximum: 20 },
      temp: { type: "number", minimum: -1.5, maximum: 2.25 },
      big: { type: "integer", minimum: 9223372036854775000 },
    },
  },
};

async function chat(extra) {
  return client.chat.completions.create({
    model: "tiny", temperature: 1, max_tokens: 400, messages: [{ role: "user", content: "Answer." }], ...extra,
  });
}
// The seeds of one check are sent at once: the server decodes them in one
// batch (every answer is checked alike, whatever the batch). f(seed) -> result,
// the results in seed order.
async function bySeed(n, f) {
  return Promise.all(Array.from({ length: n }, (_, i) => f(i + 1)));
}

for (const [name, schema] of Object.entries(schemas)) {
  const validate = ajv.compile(schema);
  let bad = 0, n = 0, first = null;
  const rs = await bySeed(SEEDS, (seed) => chat({ seed, thinking: seed % 3 === 0, // a third keep the (random) reasoning first
    response_format: { type: "json_schema", json_schema: { name, schema, strict: true } } }));
  for (const [i, r] of rs.entries()) {
    const seed = i + 1;
    const text = r.choices[0].message.content;
    let doc, ok = false;
    try { doc = JSON.parse(text); ok = validate(doc); } catch (e) { ok = false; }
    n++;
    if (!ok) { bad++; if (!first) first = { seed, text, errors: validate.errors, finish: r.choices[0].finish_reason }; }
  }
  check(`structured_json_schema_${name}`, bad === 0, first && { bad, n, ...first });
}

{ // json_object and vLLM's guided_json
  let bad = 0, first = null;
  for (const r of await bySeed(SEEDS, (seed) => chat({ seed, thinking: false, response_format: { type: "json_object" } }))) {
    let ok = false;
    try { const d = JSON.parse(r.choices[0].message.content); ok = d !== null && typeof d === "object" && !Array.isArray(d); } catch (e) {}
    if (!ok) { bad++; first = first || r.choices[0].message.content; }
  }
  check("structured_json_object", bad === 0, first);
  const validate = ajv.compile(schemas.list);
  bad = 0;
  for (const r of await bySeed(8, (seed) => chat({ seed, thinking: false, guided_json: schemas.list }))) {
    try { if (!validate(JSON.parse(r.choices[0].message.content))) bad++; } catch (e) { bad++; }
  }
  check("structured_guided_json", bad === 0, bad);
}

const tools = [
  { type: "function", function: { name: "get_weather", parameters: { type: "object", additionalProperties: false,
    properties: { city: { type: "string", maxLength: 16 }, unit: { enum: ["c", "f"] }, days: { type: "integer", minimum: 0 } },
    required: ["city", "unit"] } } },
  { type: "function", function: { name: "search", parameters: { type: "object",
    properties: { q: { type: "string" }, filters: { type: "array", items: { type: "string", maxLength: 5 }, maxItems: 2 } },
    required: ["q"] } } },
  { type: "function", function: { name: "ping" } },
];
const validators = Object.fromEntries(tools.map(t => [t.function.name, ajv.compile(t.function.parameters || {})]));

for (const fname of ["get_weather", "search"]) {
  let bad = 0, first = null;
  const rs = await bySeed(SEEDS, (seed) => chat({ seed, tools, tool_choice: { type: "function", function: { name: fname } } }));
  for (const [i, r] of rs.entries()) {
    const seed = i + 1;
    const tc = r.choices[0].message.tool_calls || [];
    let ok = tc.length === 1 && tc[0].function.name === fname;
    try { ok = ok && validators[fname](JSON.parse(tc[0].function.arguments)); } catch (e) { ok = false; }
    if (!ok) { bad++; first = first || { seed, message: r.choices[0].message, finish: r.choices[0].finish_reason }; }
  }
  check(`structured_tool_choice_named_${fname}`, bad === 0, first);
}
{
  let bad = 0, first = null;
  const rs = await bySeed(SEEDS, (seed) => chat({ seed, thinking: false, tools, tool_choice: "required" }));
  for (const [i, r] of rs.entries()) {
    const seed = i + 1;
    const tc = r.choices[0].message.tool_calls || [];
    let ok = tc.length >= 1;
    for (const c of tc) {
      try { ok = ok && validators[c.function.name] && validators[c.function.name](JSON.parse(c.function.arguments)); } catch (e) { ok = false; }
    }
    if (!ok) { bad++; first = first || { seed, message: r.choices[0].message }; }
  }
  check("structured_tool_choice_required", bad === 0, first);
}
{ // auto: whatever calls the model makes have valid arguments
  let bad = 0, calls = 0, first = null;
  for (const r of await bySeed(SEEDS, (seed) => chat({ seed, thinking: false, tools, max_tokens: 60 }))) {
    for (const c of r.choices[0].message.tool_calls || []) {
      calls++;
      try { if (!validators[c.function.name](JSON.parse(c.function.arguments))) throw 0; } catch (e) { bad++; first = first || c; }
    }
  }
  check("structured_tool_choice_auto_args", bad === 0, first);
}

async function refused(name, body, code) {
  let err = null;
  try { await chat(body); } catch (e) { err = e; }
  check(name, err && err.status === 400 && (!code || (err.code === code)), err && { status: err.status, code: err.code, message: err.message });
}
await refused("structured_refuses_backreference",
  { response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "string", pattern: "^(a)\\1$" } } } }, "unsupported_schema");
await refused("structured_refuses_empty_range",
  { response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object", properties: { n: { type: "integer", minimum: 4, maximum: 3 } } } } } }, "unsupported_schema");
await refused("structured_refuses_indistinct_object_union",
  { response_format: { type: "json_schema", json_schema: { name: "x", schema: { anyOf: [
    { type: "object", properties: { a: { type: "string" } }, required: ["a"] }, { type: "object", properties: { a: { type: "integer" } } }] } } } },
  "unsupported_schema");
await refused("structured_refuses_grammar", { grammar: "root ::= \"a\"" }, "unsupported_constraint");
await refused("structured_refuses_unknown_tool", { tools, tool_choice: { type: "function", function: { name: "nope" } } });
await refused("structured_refuses_named_bad_params",
  { tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: { a: { type: "string", not: {} } } } } }],
    tool_choice: { type: "function", function: { name: "f" } } }, "unsupported_schema");

// Schemas that would expand exponentially as a tree ($defs sharing each
// other twice per level) compile to a shared graph: refused at once as too
// complex (their smallest document has 2^N strings) or answered; never a
// server that grows without bound. Counts, not times: the status, the error
// code and the server's RSS growth (argv[3] is its pid).
function doubling(n) {
  const $defs = { d0: { type: "string", maxLength: 3 } };
  for (let i = 1; i < n; i++)
    $defs[`d${i}`] = { type: "object", additionalProperties: false, required: ["a", "b"],
                       properties: { a: { $ref: `#/$defs/d${i - 1}` }, b: { $ref: `#/$defs/d${i - 1}` } } };
  return { $defs, $ref: `#/$defs/d${n - 1}` };
}
function anyofLevels(n, distinct) { // each level's alternatives $ref the previous one
  const $defs = { l0: { type: "integer" } };
  for (let i = 1; i < n; i++) {
    const p = { $ref: `#/$defs/l${i - 1}` };
    $defs[`l${i}`] = distinct
      ? { anyOf: [{ type: "array", items: p }, { type: "object", properties: { x: p }, required: ["x"] }, { type: "string" }] }
      : { anyOf: [p, p] };
  }
  return { $defs, $ref: `#/$defs/l${n - 1}` };
}
function rssKiB() {
  try { return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${process.argv[3]}/status`, "utf8"))[1]); } catch (e) { return 0; }
}
async function post(body) {
  const r = await fetch(`${process.argv[2]}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "tiny", max_tokens: 24, temperature: 1, seed: 1, messages: [{ role: "user", content: "x" }], ...body }) });
  let j = null; try { j = await r.json(); } catch (e) {}
  return { status: r.status, code: j && j.error && j.error.code, message: j && j.error && j.error.message, j };
}
const rf = schema => ({ response_format: { type: "json_schema", json_schema: { name: "x", schema } } });
const asTool = schema => ({ tools: [{ type: "function", function: { name: "f", parameters: schema } }], tool_choice: "required" });
const asAutoTool = schema => ({ tools: [{ type: "function", function: { name: "f", parameters: schema } }] });
const rss0 = rssKiB();
for (const n of [22, 25, 40]) {
  for (const [how, wrap] of [["response_format", rf], ["tool_required", asTool], ["tool_auto", asAutoTool]]) {
    const r = await post(wrap(doubling(n)));
    check(`structured_doubling_refs_${n}_${how}_400`, r.status === 400 && r.code === "request_too_complex" || (n === 40 && r.status === 400), r);
  }
}
{
  const r = await post(rf(anyofLevels(16, true)));
  let ok = r.status === 200;
  try { ok = ok && JSON.parse(r.j.choices[0].message.content) !== undefined; } catch (e) { ok = r.j && r.j.choices[0].finish_reason === "length"; }
  check("structured_anyof_ref_levels_shared_200", ok, r);
  const lv = anyofLevels(16, true);
  const t = await post(asTool({ $defs: lv.$defs, type: "object", properties: { v: { $ref: lv.$ref } }, required: ["v"] }));
  check("structured_anyof_ref_levels_tool_200", t.status === 200, t);
  const amb = await post(rf(anyofLevels(16, false)));
  check("structured_anyof_ambiguous_400", amb.status === 400 && amb.code === "unsupported_schema", amb);
}
const rss1 = rssKiB();
check("structured_hostile_schemas_rss_bounded", !rss0 || rss1 - rss0 < 256 * 1024, { rss0, rss1 });
const h = await fetch(`${process.argv[2]}/health`);
check("structured_hostile_schemas_server_alive", h.status === 200);
process.exit(failed ? 1 : 0);

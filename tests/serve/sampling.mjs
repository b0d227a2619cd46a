// sampling.mjs — logit_bias and presence / frequency penalties change what a
// real server generates (greedy, so every answer here is deterministic), and
// the fields k3 does not implement are refused by name; n > 1 chat choices
// (whole and streamed). Usage: node sampling.mjs URL
const url = process.argv[2];
let fails = 0;
const check = (name, ok, info) => {
    console.log(`${ok ? "PASS" : "FAIL"} ${name}${ok || info === undefined ? "" : ` (${info})`}`);
    if (!ok) fails++;
};
async function post(path, body) {
    const r = await fetch(url + path, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
    });
    return { status: r.status, body: await r.json() };
}
const PROMPT = "The quick brown fox";
const complete = async (extra, n = 1) =>
    post("/v1/completions", { prompt: PROMPT, max_tokens: n, temperature: 0, ...extra });
// the id of a generated piece of text: it tokenizes to one id that detokenizes back
async function idOf(text) {
    const t = await post("/tokenize", { content: text });
    if (t.body.tokens.length !== 1) return -1;
    const d = await post("/detokenize", { tokens: t.body.tokens });
    return d.body.content === text ? t.body.tokens[0] : -1;
}

const base = await complete({});
check("sampling_greedy_baseline", base.status === 200, JSON.stringify(base.body));
const first = base.body.choices[0].text;
const argmax = await idOf(first);
check("sampling_argmax_id_known", argmax >= 0, JSON.stringify(first));

// -100 on the greedy token: greedy picks another one
const down = await complete({ logit_bias: { [argmax]: -100 } });
check("sampling_logit_bias_minus100_moves_greedy",
      down.status === 200 && down.body.choices[0].text !== first,
      JSON.stringify(down.body));
const again = await complete({ logit_bias: { [argmax]: -100 } });
check("sampling_logit_bias_deterministic", again.body.choices[0].text === down.body.choices[0].text);
// +100 on the runner-up's neighbour: that token is generated, on chat too
const other = await idOf(down.body.choices[0].text);
check("sampling_runner_up_id_known", other >= 0 && other !== argmax);
const up = await post("/v1/chat/completions", {
    messages: [{ role: "user", content: "Hi" }], max_tokens: 1, temperature: 0,
    chat_template_kwargs: { thinking: false }, logit_bias: { [other]: 100 },
});
const upText = up.status === 200 ? up.body.choices[0].message.content : "";
check("sampling_logit_bias_plus100_chat", up.status === 200 && (await idOf(upText)) === other,
      JSON.stringify(up.body));

// penalties: a long greedy answer repeats tokens; frequency_penalty 2 must change it
const long = await complete({}, 40);
const pen = await complete({ frequency_penalty: 2 }, 40);
const pres = await complete({ presence_penalty: 2 }, 40);
check("sampling_frequency_penalty_changes_output",
      pen.status === 200 && pen.body.choices[0].text !== long.body.choices[0].text,
      JSON.stringify(pen.body.choices?.[0]));
check("sampling_presence_penalty_changes_output",
      pres.status === 200 && pres.body.choices[0].text !== long.body.choices[0].text);
const zero = await complete({ frequency_penalty: 0, presence_penalty: 0 }, 40);
check("sampling_zero_penalties_are_identity", zero.body.choices[0].text === long.body.choices[0].text);

// n choices: each its own sequence; greedy, so each equals the single answer
const CHAT = { messages: [{ role: "user", content: "Say something" }], max_tokens: 12, temperature: 0,
               chat_template_kwargs: { thinking: false } };
const one = await post("/v1/chat/completions", CHAT);
const three = await post("/v1/chat/completions", { ...CHAT, n: 3 });
const texts = three.body.choices?.map((c) => c.message.content) ?? [];
check("sampling_n3_three_choices", three.status === 200 && texts.length === 3 &&
      three.body.choices.every((c, i) => c.index === i && c.finish_reason === one.body.choices[0].finish_reason),
      JSON.stringify(three.body).slice(0, 400));
check("sampling_n3_greedy_choices_equal_single", texts.every((t) => t === one.body.choices[0].message.content),
      JSON.stringify(texts));
check("sampling_n3_usage_counts_every_choice",
      three.body.usage?.prompt_tokens === one.body.usage.prompt_tokens &&
      three.body.usage?.completion_tokens === 3 * one.body.usage.completion_tokens,
      JSON.stringify(three.body.usage));
{
    const r = await fetch(url + "/v1/chat/completions", {
        method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ ...CHAT, n: 3, stream: true, stream_options: { include_usage: true } }),
    });
    const events = (await r.text()).split("\n\n").filter((e) => e.startsWith("data: ")).map((e) => e.slice(6));
    const done = events.filter((e) => e === "[DONE]").length;
    const chunks = events.filter((e) => e !== "[DONE]").map((e) => JSON.parse(e));
    const byIndex = [0, 1, 2].map((i) => chunks.filter((c) => c.choices[0]?.index === i));
    const content = byIndex.map((cs) => cs.map((c) => c.choices[0].delta.content ?? "").join(""));
    const usage = chunks.at(-1).usage;
    check("sampling_n3_stream_one_done_last", done === 1 && events.at(-1) === "[DONE]", done);
    check("sampling_n3_stream_one_id", new Set(chunks.map((c) => c.id)).size === 1);
    check("sampling_n3_stream_each_index_role_and_finish", byIndex.every((cs) =>
          cs[0].choices[0].delta.role === "assistant" && cs.at(-1).choices[0].finish_reason !== null));
    check("sampling_n3_stream_content_equals_whole", content.every((t, i) => t === texts[i]), JSON.stringify(content));
    check("sampling_n3_stream_usage_last", usage && usage.completion_tokens === three.body.usage?.completion_tokens,
          JSON.stringify(usage));
}

// refused by name, never silently accepted
for (const [path, body, param] of [
    ["/v1/completions", { prompt: "a", echo: true }, "echo"],
    ["/v1/completions", { prompt: "a", suffix: "z" }, "suffix"],
    ["/v1/completions", { prompt: "a", best_of: 3 }, "best_of"],
    ["/v1/completions", { prompt: "a", logit_bias: { "99999999": 1 } }, "logit_bias"],
    ["/v1/chat/completions", { messages: [{ role: "user", content: "x" }], n: 9 }, "n"],
    ["/v1/chat/completions", { messages: [{ role: "user", content: "x" }], n: 1.5 }, "n"],
    ["/v1/completions", { prompt: "a", n: 2 }, "n"],
    ["/v1/chat/completions", { messages: [{ role: "user", content: "x" }], audio: {} }, "audio"],
]) {
    const r = await post(path, body);
    check(`sampling_refuses_${param}`, r.status === 400 && r.body.error?.param === param,
          `${r.status} ${JSON.stringify(r.body)}`);
}
process.exit(fails ? 1 : 0);

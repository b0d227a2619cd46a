// sampling.mjs — logit_bias and presence / frequency penalties change what a
// real server generates (greedy, so every answer here is deterministic), and
// the fields k3 does not implement are refused by name. Usage: node sampling.mjs URL
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

// refused by name, never silently accepted
for (const [path, body, param] of [
    ["/v1/completions", { prompt: "a", echo: true }, "echo"],
    ["/v1/completions", { prompt: "a", suffix: "z" }, "suffix"],
    ["/v1/completions", { prompt: "a", best_of: 3 }, "best_of"],
    ["/v1/completions", { prompt: "a", logit_bias: { "99999999": 1 } }, "logit_bias"],
    ["/v1/chat/completions", { messages: [{ role: "user", content: "x" }], n: 3 }, "n"],
    ["/v1/chat/completions", { messages: [{ role: "user", content: "x" }], audio: {} }, "audio"],
]) {
    const r = await post(path, body);
    check(`sampling_refuses_${param}`, r.status === 400 && r.body.error?.param === param,
          `${r.status} ${JSON.stringify(r.body)}`);
}
process.exit(fails ? 1 : 0);

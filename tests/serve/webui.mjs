// webui.mjs — the chat page at GET / in headless Chromium (puppeteer-core),
// against a running `k3 serve --test-mode --name tiny --ctx-size 131072
// --max-tokens 131072` (URL in argv[2]) and a
// second one with `--api-key sekrit` (argv[3]). The answers are forced
// (k3_test_force_text, sent through the page's "extra request fields") but
// go through the server's real stream: the page must show the reasoning in a
// collapsible block, the answer, a tool call, and stop a long answer with its
// Stop button, after which the server must stop generating. A screenshot of
// the page goes to argv[4]. Prints one PASS/FAIL line per check.
import { createRequire } from "module";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
const require = createRequire(new URL("../npm/package.json", import.meta.url));
const puppeteer = require("puppeteer-core");

const [BASE, KEY_URL, SHOT] = process.argv.slice(2);
let failed = 0;
function check(name, ok, detail) {
  console.log(`${ok ? "PASS" : "FAIL"} ${name}`);
  if (!ok) { failed++; if (detail !== undefined) console.log("  " + JSON.stringify(detail).slice(0, 600)); }
}

const O = "<|open|>", C = "<|close|>", S = "<|sep|>", EOM = "<|end_of_msg|>";
const END = `${C}response${S}${C}message${S}${EOM}`;
const THOUGHT = "The user greets me.";
const ANSWER = "Hello from k3! <b>not bold</b>";
const REPLY = `${THOUGHT}${C}think${S}${O}response${S}${ANSWER}${END}`;
const TOOLS = [{ type: "function", function: { name: "get_weather", description: "Weather for a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];
const CALL = `Look it up.${C}think${S}${O}response${S}${C}response${S}${O}tools${S}` +
  `${O}call tool="get_weather" index="1"${S}${O}argument key="city" type="string"${S}Tokyo` +
  `${C}argument${S}${C}call${S}${C}tools${S}${C}message${S}${EOM}`;

const health = async () => (await fetch(`${BASE}/health`)).json();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const profile = mkdtempSync(join(tmpdir(), "k3-webui-"));
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         `--user-data-dir=${profile}`],
  protocolTimeout: 120000,
});
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1000, height: 760 });
  const foreign = [];
  page.on("request", (r) => { if (!r.url().startsWith(BASE) && !r.url().startsWith("data:")) foreign.push(r.url()); });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(`${BASE}/`, { waitUntil: "load" });

  // the model id and its limits, from /v1/models and /props
  await page.waitForFunction(() => document.getElementById("limits").textContent !== "", { timeout: 30000 });
  const head = await page.evaluate(() => ({ model: document.getElementById("model").textContent,
                                            limits: document.getElementById("limits").textContent }));
  check("webui_model_name", head.model === "tiny", head);
  check("webui_limits_shown", /context 131072 tokens/.test(head.limits) && /max tokens 131072/.test(head.limits), head);

  const setField = (id, v) => page.evaluate((id, v) => {
    const e = document.getElementById(id);
    if (e.type === "checkbox") e.checked = v; else e.value = v;
  }, id, v);
  // type a message, press Enter, wait for the bubble's finish (data-finish)
  async function ask(text) {
    await page.focus("#input");
    await page.keyboard.type(text);
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => {
      const b = [...document.querySelectorAll(".msg.assistant")].pop();
      return b && b.dataset.finish;
    }, { timeout: 60000 });
    return page.evaluate(() => {
      const b = [...document.querySelectorAll(".msg.assistant")].pop();
      const d = b.querySelector("details.reasoning");
      return { finish: b.dataset.finish, content: b.querySelector(".content").textContent,
               reasoning: d.hidden ? null : b.querySelector(".reasoning-text").textContent,
               folded: !d.open, bold: b.querySelectorAll("b").length,
               tools: [...b.querySelectorAll(".tool")].map((t) => t.textContent),
               meta: b.querySelector(".meta").textContent };
    });
  }

  // 1. reasoning + answer
  await setField("extra", JSON.stringify({ k3_test_force_text: REPLY }));
  const a = await ask("Hi there");
  check("webui_answer_text", a.content === ANSWER, a);
  check("webui_answer_not_html", a.bold === 0, a);
  check("webui_reasoning_block", a.reasoning === THOUGHT && a.folded, a);
  check("webui_answer_finish", a.finish === "stop" && /finish: stop/.test(a.meta) && /tokens/.test(a.meta), a);

  // 2. a tool call
  await setField("tools", JSON.stringify(TOOLS));
  await setField("extra", JSON.stringify({ k3_test_force_text: CALL }));
  const t = await ask("Weather in Tokyo?");
  check("webui_tool_call_shown", t.tools.length === 1 && /tool call: get_weather\(\{"city":\s*"Tokyo"\}\)/.test(t.tools[0]), t);
  check("webui_tool_call_finish", t.finish === "tool_calls", t);
  await setField("tools", "");

  // 3. stop a long answer once some of it has streamed in (100000 tokens:
  // at this model's 2000-3000 tokens/s the answer cannot end before the click)
  const before = await health();
  await setField("max_tokens", "100000");
  await setField("thinking", false); // the forced text is then the answer
  await setField("extra", JSON.stringify({ k3_test_force_text: "a".repeat(200000) }));
  await page.focus("#input");
  await page.keyboard.type("Write a lot");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => {
    const b = [...document.querySelectorAll(".msg.assistant")].pop();
    return b && !b.dataset.finish && b.querySelector(".content").textContent.length >= 8;
  }, { timeout: 60000 });
  const stopEnabled = await page.$eval("#stop", (b) => !b.disabled);
  check("webui_streams_partial_answer", stopEnabled);
  await page.click("#stop");
  await page.waitForFunction(() => [...document.querySelectorAll(".msg.assistant")].pop().dataset.finish,
                             { timeout: 30000 });
  const s = await page.evaluate(() => {
    const b = [...document.querySelectorAll(".msg.assistant")].pop();
    return { finish: b.dataset.finish, len: b.querySelector(".content").textContent.length,
             send: !document.getElementById("send").disabled, stop: document.getElementById("stop").disabled };
  });
  check("webui_stop_button", s.finish === "stopped" && s.len > 0 && s.len < 190000 && s.send && s.stop, s);
  // the server retires the request (its generation is cancelled, not finished)
  let after = await health();
  for (let i = 0; i < 300 && !(after.requests_done > before.requests_done && after.active === 0); i++) {
    await sleep(100);
    after = await health();
  }
  check("webui_stop_frees_server", after.active === 0 && after.requests_done === before.requests_done + 1, after);
  check("webui_stop_stops_decoding", after.decode_tokens - before.decode_tokens < 99000,
        { decoded: after.decode_tokens - before.decode_tokens });
  const metrics = await (await fetch(`${BASE}/metrics`)).text();
  check("webui_stop_counted_cancelled",
        /k3_request_finish_total\{model="tiny",finished_reason="cancelled"\} 1\n/.test(metrics));

  // 4. the page still works after a stop (a short answer)
  await setField("max_tokens", "");
  await setField("thinking", true);
  await setField("extra", JSON.stringify({ k3_test_force_text: REPLY }));
  const again = await ask("Once more");
  check("webui_after_stop", again.content === ANSWER && again.finish === "stop", again);

  check("webui_no_foreign_requests", foreign.length === 0, foreign);
  check("webui_no_page_errors", errors.length === 0, errors);
  if (SHOT) await page.screenshot({ path: SHOT, fullPage: false });

  // 5. with --api-key: the page asks for the key, then sends it as a Bearer token
  const kp = await browser.newPage();
  await kp.goto(`${KEY_URL}/`, { waitUntil: "load" });
  await kp.waitForFunction(() => document.getElementById("keybox").classList.contains("show"), { timeout: 30000 });
  check("webui_key_asked", true);
  await kp.type("#key", "sekrit");
  await kp.click("#keysave");
  await kp.waitForFunction(() => document.getElementById("model").textContent === "tiny", { timeout: 30000 });
  await kp.evaluate((r) => { document.getElementById("extra").value = JSON.stringify({ k3_test_force_text: r }); }, REPLY);
  await kp.focus("#input");
  await kp.keyboard.type("Hi");
  await kp.keyboard.press("Enter");
  await kp.waitForFunction(() => [...document.querySelectorAll(".msg.assistant")].pop()?.dataset.finish, { timeout: 60000 });
  const k = await kp.evaluate(() => {
    const b = [...document.querySelectorAll(".msg.assistant")].pop();
    return { finish: b.dataset.finish, content: b.querySelector(".content").textContent };
  });
  check("webui_key_bearer", k.finish === "stop" && k.content === ANSWER, k);
} catch (e) {
  check("webui_run", false, String(e && e.stack || e).split("\n").filter((l) => !/node_modules/.test(l)).join(" | "));
  if (SHOT) for (const p of await browser.pages()) await p.screenshot({ path: SHOT }).catch(() => {});
} finally {
  await browser.close();
  rmSync(profile, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);

// make_parity.js — builds a K3-style tokenizer directory from a public BPE
// vocabulary shipped by js-tiktoken and the expected encodings of a few
// thousand generated strings, for tests/sh/tokenizer_parity.sh.
//
//   node make_parity.js ENCODING OUTDIR COUNT SEED [--shuffle]
//
// ENCODING: o200k_base or cl100k_base. Writes OUTDIR/tiktoken.model (base64
// + rank per line; --shuffle writes the lines in a random order),
// OUTDIR/tokenizer_config.json (K3's named control tokens at num_base +
// their K3 offsets), OUTDIR/strings.bin (NUL-terminated texts),
// OUTDIR/expect_plain.txt and OUTDIR/expect_special.txt (one line of
// comma-separated ids per text, encoded by js-tiktoken with K3's pattern
// and special matching off / on).
"use strict";
const fs = require("fs");
const path = require("path");
const npm = path.join(__dirname, "..", "npm", "node_modules");
const { Tiktoken } = require(path.join(npm, "js-tiktoken", "dist", "lite.cjs"));

const [encName, outDir, countStr, seedStr, flag] = process.argv.slice(2);
const ranksSrc = require(path.join(npm, "js-tiktoken", "dist", "ranks", encName + ".cjs"));
const COUNT = Number(countStr || 3000);
let seed = Number(seedStr || 1) >>> 0;

// K3's pat_str in JavaScript ("u" flag, as js-tiktoken compiles it). The
// same three rewrites as the PCRE2 form (chat.md §1.4): [X&&[^\p{Han}]] as a
// negative lookahead, \p{Han} as Script=Han, \s as the explicit White_Space
// set; and (?i:'s|...) spelled out with Unicode simple case folding (s also
// matches U+017F), since Node 20 has no inline modifiers.
const WS = "\\t\\n\\x0B\\f\\r\\x20\\x85\\xA0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000";
const UP = "(?:(?!\\p{sc=Han})[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}])";
const LO = "(?:(?!\\p{sc=Han})[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}])";
const CONTR = "(?:'[sS\\u017F]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?";
const K3_PAT = [
  "\\p{sc=Han}+",
  "[^\\r\\n\\p{L}\\p{N}]?" + UP + "*" + LO + "+" + CONTR,
  "[^\\r\\n\\p{L}\\p{N}]?" + UP + "+" + LO + "*" + CONTR,
  "\\p{N}{1,3}",
  " ?[^" + WS + "\\p{L}\\p{N}]+[\\r\\n]*",
  "[" + WS + "]*[\\r\\n]+",
  "[" + WS + "]+(?![^" + WS + "])",
  "[" + WS + "]+",
].join("|");

const NAMED = [
  [0, "[BOS]", true], [1, "[EOS]", true], [2, "<|end_of_msg|>", true],
  [3, "<|open|>", false], [4, "<|close|>", false], [5, "<|sep|>", false],
  [6, "[start_header_id]", true], [7, "[end_header_id]", true], [9, "[EOT]", true],
  [18, "<|media_begin|>", true], [19, "<|media_content|>", true], [20, "<|media_end|>", true],
  [21, "<|media_pad|>", true], [65, "<osagent_mode>", true], [254, "[UNK]", true],
  [255, "[PAD]", true],
];

function rng() { // mulberry32: the same strings on every machine
  seed = (seed + 0x6d2b79f5) >>> 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (a) => a[Math.floor(rng() * a.length)];
const int = (n) => Math.floor(rng() * n);

// ---- the vocabulary --------------------------------------------------
const base = new Tiktoken(ranksSrc);
const numBase = base.textMap.size;
fs.mkdirSync(outDir, { recursive: true });
let order = [...Array(numBase).keys()];
if (flag === "--shuffle")
  for (let i = order.length - 1; i > 0; i--) { const j = int(i + 1); [order[i], order[j]] = [order[j], order[i]]; }
const lines = order.map((r) => Buffer.from(base.textMap.get(r)).toString("base64") + " " + r);
fs.writeFileSync(path.join(outDir, "tiktoken.model"), lines.join("\n") + "\n");

const specials = {};
for (let off = 0; off < 256; off++) specials["<|reserved_token_" + (numBase + off) + "|>"] = numBase + off;
const decoder = {};
for (const [off, text, special] of NAMED) {
  delete specials["<|reserved_token_" + (numBase + off) + "|>"];
  specials[text] = numBase + off;
  decoder[String(numBase + off)] = { content: text, lstrip: false, normalized: false, rstrip: false, single_word: false, special };
}
fs.writeFileSync(path.join(outDir, "tokenizer_config.json"),
  JSON.stringify({ tokenizer_class: "TikTokenTokenizer", added_tokens_decoder: decoder }, null, 2) + "\n");

// ---- the strings -----------------------------------------------------
const ALPHA = [..."abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
  ..."!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~", "'", "'s", "'S", "'\u017F", "'ll", "'RE", "'d", "'t", "'ve", "'M",
  ..."你好世界中文字漢語", ..."한국어입니다", ..."ひらがなカタカナー", "\u3006", "\u3005", "\u3007",
  // Script=Common but Script_Extensions=Han: a bare \p{Han} in PCRE2 >= 10.40 would take them
  "\u3001", "\u3002", "\u300C", "\u300D", "\u30FB", "\u3006\u5207", "\u4E2D\u3001\u6587",
  "\u0301", "\u0308", "e\u0301", "\u0915\u094D", ..."Привет мир", ..."Γειά σου", ..."مرحبا", ..."שלום",
  ..."नमस्ते", ..."สวัสดี", "ß", "İ", "ǅ", "ʰ", "Ⅻ", "½", "²", "٣", "߀",
  "🚀", "👍🏽", "👨\u200D👩\u200D👧", "🇯🇵", "❤️", "🫠", "©", "™", "€", "\uFFFD", "\u200B", "\uFEFF",
  " ", " ", " ", "  ", "\t", "\n", "\r\n", "\r", "\u00A0", "\u2028", "\u2029", "\u3000", "\u0085",
  "\u000B", "\u000C", "\u001C", "\u001F", "\u180E", "\u2009", "\u202F", "\u205F", "\u1680", "\u0000"];
const WORDS = ["the", "The", "HELLO", "world", "don't", "I'm", "we'LL", "naïve", "Straße", "café",
  "東京", "北京市", "你好、世界。", "「東京」", "〆切", "日本語", "ありがとう", "서울", "Москва", "Ελλάδα", "القاهرة", "ירושלים",
  "हिन्दी", "ภาษาไทย", "Việt", "Ünïcödé", "CamelCaseWord", "snake_case_name", "HTTPServer",
  "x86_64", "3.14159", "1234567890", "2026-12-02", "$100", "100%", "e-mail", "<think>", "</think>",
  "<|im_end|>", "🚀launch", "👍", "...", "!!!", "?!", "--", "->", "=>", "::", "&&", "||"];
const CODE = [
  "int main(void) {\n    return 0;\n}\n",
  "def f(x):\n    if x > 0:\n        return x ** 2\n    return -x\n",
  "for (let i = 0; i < n; i++) {\n\tsum += a[i];\n}\n",
  "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;\n",
  "#include <stdio.h>\n#define MAX(a,b) ((a)>(b)?(a):(b))\n",
  "{\"key\": [1, 2.5, -3e10, true, null], \"nested\": {\"a\": \"b\"}}\n",
  "    \n\n  x = y  # comment   \n\t\t\n",
  "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }\r\n",
];
const SPECIAL_BITS = ["<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>", "[BOS]", "[EOS]", "[PAD]",
  "<|reserved_token_" + (numBase + 8) + "|>", "<|media_pad|>", "<osagent_mode>", "<|ope", "<|", "|>",
  "[BOS", "<|open|", "<<|sep|>>", "[[EOT]]"];

function randomChars(n) { let s = ""; for (let i = 0; i < n; i++) s += pick(ALPHA); return s; }
function sentence(n) {
  let s = "";
  for (let i = 0; i < n; i++) s += (i ? pick([" ", " ", " ", ", ", ". ", "\n", "  ", "\t", ""]) : "") + pick(WORDS);
  return s;
}
function digits() {
  let s = "";
  const parts = 1 + int(4);
  for (let i = 0; i < parts; i++) s += (i ? pick([" ", ".", ",", "", "-", "\n"]) : "") + String(int(1e9)).repeat(1 + int(3));
  return s;
}
function spaces() {
  let s = pick(["", "x", "word", "."]);
  const parts = 1 + int(6);
  for (let i = 0; i < parts; i++) s += pick([" ", "\t", "\n", "\r\n", "\u00A0", "\u3000", "\u2028", "\u000B"]).repeat(1 + int(12)) + pick(["", "a", "Word", "1", "!", "中"]);
  return s;
}
function withSpecials() {
  let s = "";
  const parts = 1 + int(6);
  for (let i = 0; i < parts; i++) s += pick([pick(SPECIAL_BITS), sentence(1 + int(3)), randomChars(1 + int(5))]);
  return s;
}
function makeString(i) {
  switch (i % 7) {
    case 0: return randomChars(1 + int(40));
    case 1: return sentence(1 + int(25));
    case 2: return pick(CODE) + (rng() < 0.5 ? pick(CODE) : "");
    case 3: return digits();
    case 4: return spaces();
    case 5: return withSpecials();
    default: return randomChars(1 + int(200));
  }
}
const FIXED = ["Hello world", "你好世界", "I'm here. He'LL go", "emoji 🚀🚀 test!!!\n",
  "mixed中文English123中文", "  leading and trailing  \n\n  x", "sunny <|open|>x<|sep|>",
  "Hello!", ".hidden", "1234567890", " ", "\n", "a", "'s", "'ſ", "〆切", "x\u180Ey", ""];
const strings = FIXED.concat(Array.from({ length: COUNT }, (_, i) => makeString(i)))
  .map((s) => s.replace(/\u0000/g, "\u0001")); // NUL separates the records

// ---- expected encodings ----------------------------------------------
const enc = new Tiktoken({ pat_str: K3_PAT, special_tokens: specials, bpe_ranks: ranksSrc.bpe_ranks });
const plain = [], special = [];
for (const s of strings) {
  plain.push(enc.encode(s, [], []).join(","));
  special.push(enc.encode(s, "all", []).join(","));
}
fs.writeFileSync(path.join(outDir, "strings.bin"), Buffer.concat(strings.map((s) => Buffer.from(s + "\u0000", "utf8"))));
fs.writeFileSync(path.join(outDir, "expect_plain.txt"), plain.join("\n") + "\n");
fs.writeFileSync(path.join(outDir, "expect_special.txt"), special.join("\n") + "\n");
console.log(encName + ": " + numBase + " ranks, " + strings.length + " strings");

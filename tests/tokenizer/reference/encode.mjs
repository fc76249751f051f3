// The reference side of kiln's tokenizer test: encodes each file named in a
// JSON list with transformers.js's tokenizer (the npm package
// @lenml/tokenizers) and prints, per file, the ids and the decoded text.
//   node encode.mjs TOKENIZER_DIR LIST.json
// Files are read as bytes and decoded as UTF-8 by the WHATWG decoder (an
// ill-formed sequence becomes U+FFFD), as a browser or Node.js reads text.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { TokenizerLoader } from "@lenml/tokenizers";

const [dir, list] = process.argv.slice(2);
const tokenizer = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8")),
  tokenizerConfig: JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8")),
});
const decoder = new TextDecoder("utf-8");
const results = JSON.parse(readFileSync(list, "utf8")).map((file) => {
  const text = decoder.decode(readFileSync(file));
  const ids = tokenizer.encode(text, { add_special_tokens: false });
  // decode() refuses an empty list: the empty text decodes to itself.
  const decoded = ids.length ? tokenizer.decode(ids, { skip_special_tokens: false }) : "";
  return { ids, decoded };
});
process.stdout.write(JSON.stringify(results));

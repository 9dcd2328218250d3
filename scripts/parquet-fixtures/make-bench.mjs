// A snappy parquet file of about SIZE_MB of text for bench/parquet.sh,
// written by parquet-wasm (arrow-rs) like the test fixtures: fineweb-edu's
// columns, documents of 1-4 KB assembled from the corpus's sentences with a
// fixed seed, row groups of 10,000 rows, dictionary with PLAIN fallback.
import fs from 'node:fs';
import * as arrow from 'apache-arrow';
import * as pw from 'parquet-wasm/node';

const [corpusPath, outPath, sizeMb] = process.argv.slice(2);
const sentences = fs.readFileSync(corpusPath, 'utf8').split(/(?<=[.!?])\s+/).filter((s) => s.length > 0);
let seed = 12345;
const rand = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
const target = Number(sizeMb) * 1e6;
const docs = [];
let bytes = 0;
while (bytes < target) {
  const want = 1000 + rand() * 3000;
  let doc = '';
  while (doc.length < want) doc += sentences[Math.floor(rand() * sentences.length)] + ' ';
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
const props = new pw.WriterPropertiesBuilder().setCompression(pw.Compression.SNAPPY).setMaxRowGroupSize(10000).build();
fs.writeFileSync(outPath, pw.writeParquet(pw.Table.fromIPCStream(arrow.tableToIPC(table, 'stream')), props));
console.log(`wrote ${n} documents, ${(bytes / 1e6).toFixed(1)} MB of text, to ${outPath}`);

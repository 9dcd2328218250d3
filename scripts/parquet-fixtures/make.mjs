// Writes the parquet test fixtures of tests/data/parquet from corpus.jsonl
// with two independent writers from the npm registry:
//   parquet-wasm (the Rust arrow-rs `parquet` crate compiled to WebAssembly)
//   hyparquet-writer (a JavaScript writer)
// Every file but the fallback-* ones holds the corpus's documents, in order,
// in a column `text` (nulls, where a file has them, are extra rows). Run through
// scripts/make-parquet-fixtures.sh, which installs the pinned packages.
import fs from 'node:fs';
import path from 'node:path';
import * as arrow from 'apache-arrow';
import * as pw from 'parquet-wasm/node';
import { parquetWriteBuffer } from 'hyparquet-writer';

const [corpusPath, outDir] = process.argv.slice(2);
const docs = fs.readFileSync(corpusPath, 'utf8').split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l).text);

// fineweb-edu's columns beside `text`: the reader must skip them.
function table(texts) {
  const n = texts.length;
  return arrow.tableFromArrays({
    id: Array.from({ length: n }, (_, i) => `<urn:uuid:${String(i).padStart(8, '0')}>`),
    text: texts,
    url: Array.from({ length: n }, (_, i) => `https://example.org/${i}`),
    score: Float64Array.from({ length: n }, (_, i) => 2.5 + (i % 7) / 10),
    token_count: BigInt64Array.from({ length: n }, (_, i) => BigInt(i * 3 + 1)),
  });
}

// With a null after every 4th document (an OPTIONAL column with definition levels).
function withNulls(texts) {
  const out = [];
  texts.forEach((t, i) => { out.push(t); if (i % 4 === 3) out.push(null); });
  return out;
}

// Without a dictionary, arrow-rs's v2 writer encodes strings DELTA_BYTE_ARRAY
// unless told PLAIN (`encoding`); the delta-* files ask for the delta encodings.
function writeWasm(name, texts, { compression, version, dictionary, rowGroup = 16, encoding, textOnly = false }) {
  let b = new pw.WriterPropertiesBuilder()
    .setCompression(compression)
    .setWriterVersion(version)
    .setDictionaryEnabled(dictionary)
    .setMaxRowGroupSize(rowGroup)
    .setCreatedBy('parquet-wasm (arrow-rs) fixture');
  if (!dictionary) b = encoding === undefined ? b.setEncoding(pw.Encoding.PLAIN) : b.setColumnEncoding('text', encoding);
  else if (encoding !== undefined) b = b.setColumnEncoding('text', encoding);  // the fallback's encoding
  const ipc = arrow.tableToIPC(textOnly ? arrow.tableFromArrays({ text: texts }) : table(texts), 'stream');
  const bytes = pw.writeParquet(pw.Table.fromIPCStream(ipc), b.build());
  fs.writeFileSync(path.join(outDir, name), bytes);
}

const C = pw.Compression, V = pw.WriterVersion;
fs.mkdirSync(path.join(outDir, 'folder'), { recursive: true });
writeWasm('plain-uncompressed-v1.parquet', docs, { compression: C.UNCOMPRESSED, version: V.V1, dictionary: false });
writeWasm('dict-snappy-v1.parquet', docs, { compression: C.SNAPPY, version: V.V1, dictionary: true });
writeWasm('dict-zstd-v2.parquet', docs, { compression: C.ZSTD, version: V.V2, dictionary: true });
writeWasm('plain-gzip-v2.parquet', docs, { compression: C.GZIP, version: V.V2, dictionary: false });
// A chunk that starts dictionary-encoded and falls back to PLAIN pages
// part-way through: 30,000 distinct documents overflow arrow-rs's default
// 1 MB dictionary page limit (parquet-wasm does not pass smaller limits on).
// Document i is `document ${i} ` followed by 'lorem ipsum ' repeated i % 10 times.
const many = Array.from({ length: 30000 }, (_, i) => `document ${i} ` + 'lorem ipsum '.repeat(i % 10));
// (arrow-rs's v2 writer falls back to DELTA_BYTE_ARRAY unless told PLAIN.)
writeWasm('fallback-zstd-v1.parquet', many, { compression: C.ZSTD, version: V.V1, dictionary: true, rowGroup: 100000, textOnly: true });
writeWasm('fallback-zstd-v2.parquet', many, { compression: C.ZSTD, version: V.V2, dictionary: true, rowGroup: 100000, textOnly: true, encoding: pw.Encoding.PLAIN });
writeWasm('nulls-snappy-v1.parquet', withNulls(docs), { compression: C.SNAPPY, version: V.V1, dictionary: true });
writeWasm('nulls-gzip-v2.parquet', withNulls(docs), { compression: C.GZIP, version: V.V2, dictionary: false });
// One distinct value: dictionary indices of bit width 0.
writeWasm('one-value-snappy-v1.parquet', Array(9).fill('the same document'), { compression: C.SNAPPY, version: V.V1, dictionary: true });
// The delta encodings arrow-rs and parquet-mr's v2 writers use for strings
// without a dictionary (arrow-rs's default there).
writeWasm('delta-byte-array-zstd-v2.parquet', withNulls(docs), { compression: C.ZSTD, version: V.V2, dictionary: false, encoding: pw.Encoding.DELTA_BYTE_ARRAY });
writeWasm('delta-length-snappy-v1.parquet', docs, { compression: C.SNAPPY, version: V.V1, dictionary: false, encoding: pw.Encoding.DELTA_LENGTH_BYTE_ARRAY });
// Codecs the reader does not support: a clear error, not a crash.
writeWasm('brotli.parquet', docs.slice(0, 5), { compression: C.BROTLI, version: V.V1, dictionary: false });
// A folder read as its *.parquet files in name order.
const half = Math.ceil(docs.length / 2);
writeWasm('folder/part-00000.parquet', docs.slice(0, half), { compression: C.SNAPPY, version: V.V1, dictionary: true });
writeWasm('folder/part-00001.parquet', docs.slice(half), { compression: C.ZSTD, version: V.V2, dictionary: false });
fs.writeFileSync(path.join(outDir, 'folder', '_SUCCESS'), '');

// A list column named `text`: nested, refused by name.
{
  const t = arrow.tableFromArrays({ id: ['a', 'b'] });
  const list = arrow.vectorFromArray([['x', 'y'], ['z']], new arrow.List(new arrow.Field('item', new arrow.Utf8(), true)));
  const nested = new arrow.Table({ id: t.getChild('id'), text: list });
  const bytes = pw.writeParquet(pw.Table.fromIPCStream(arrow.tableToIPC(nested, 'stream')),
    new pw.WriterPropertiesBuilder().setCompression(C.UNCOMPRESSED).build());
  fs.writeFileSync(path.join(outDir, 'nested-list.parquet'), bytes);
}

// The second writer: hyparquet-writer, SNAPPY, its own dictionary choice, 3 row groups.
{
  const n = docs.length;
  const bytes = parquetWriteBuffer({
    columnData: [
      { name: 'id', data: Array.from({ length: n }, (_, i) => `doc-${i}`), type: 'STRING' },
      { name: 'text', data: docs, type: 'STRING', nullable: false },
      { name: 'score', data: Float64Array.from({ length: n }, (_, i) => i / 10), type: 'DOUBLE' },
    ],
    rowGroupSize: 16,
    pageSize: 2048,
    createdBy: 'hyparquet-writer fixture',
  });
  fs.writeFileSync(path.join(outDir, 'hyparquet-snappy.parquet'), new Uint8Array(bytes));
  const nulls = withNulls(docs);
  const bytes2 = parquetWriteBuffer({
    columnData: [{ name: 'text', data: nulls, type: 'STRING', nullable: true }],
    codec: 'UNCOMPRESSED',
    rowGroupSize: 1000,
    createdBy: 'hyparquet-writer fixture',
  });
  fs.writeFileSync(path.join(outDir, 'hyparquet-nulls-uncompressed.parquet'), new Uint8Array(bytes2));
}
console.log(`wrote fixtures for ${docs.length} documents to ${outDir}`);

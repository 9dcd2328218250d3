#ifndef PROTOCOL_BACKENDS_NATIVE_TRAINING_DATA_H_
#define PROTOCOL_BACKENDS_NATIVE_TRAINING_DATA_H_

// Training data: read documents (text files, jsonl `text` fields, a parquet
// text column (parquet.h), a directory of them, or dolly-15k records),
// tokenize, pack into fixed-length sequences, shuffle with a seed and hold
// out a part for the evaluation loss. No libtorch.
//
// Dolly prompt template (loss on the response tokens and the closing EOS only):
//
//   ### Instruction:
//   {instruction}
//
//   ### Context:            <- this block only when context is not empty
//   {context}
//
//   ### Response:
//   {response}

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/native/model/tokenizer.h"
#include "runner/base/status.h"

namespace protocol {
namespace native {

// A tokenized document. loss_mask[i] == 1 when tokens[i] is a prediction
// target that counts in the loss (prompt tokens of an instruction record: 0).
struct Document {
  std::vector<int> tokens;
  std::vector<uint8_t> loss_mask;
};

// seq_len + 1 tokens: inputs are tokens[0..seq_len), targets tokens[1..seq_len].
// mask[i] (size seq_len) says whether target tokens[i+1] counts in the loss.
struct Sequence {
  std::vector<int> tokens;
  std::vector<uint8_t> mask;
};

struct DollyRecord {
  std::string instruction, context, response, category;
};

// A plan dataset as the native backends read it (DatasetSpec, path resolved).
struct DatasetSource {
  std::string path, format;
  std::string column;  // parquet: the text column; "" = kParquetDefaultColumn
};

// The formats data_load reads, for messages: "text, jsonl, parquet or dolly".
extern const char* const kNativeDatasetFormats;
bool data_format_supported(const std::string& format);

// Raw texts, one document at a time, in order, without holding the dataset:
// format "text": each file is one document; "jsonl": each line's "text"
// string is one; "parquet": each non-null value of the column. `path` is a
// file or a directory (its *.txt / *.jsonl / *.parquet files, sorted by
// name). Stops (Ok) when on_text returns false. Errors name the file (and
// line for jsonl, row group and page for parquet).
Status data_for_each_text(const DatasetSource& source, const std::function<bool(std::string_view)>& on_text);
// All of them.
Result<std::vector<std::string>> data_read_texts(const std::string& path, const std::string& format);
// databricks-dolly-15k jsonl: instruction, context, response (strings; category optional).
Result<std::vector<DollyRecord>> data_read_dolly(const std::string& path);
// The prompt part of the template above, ending with "### Response:\n".
std::string dolly_prompt(const DollyRecord& record);

// BOS + text + EOS, every target counted.
std::vector<Document> data_tokenize_texts(const std::vector<std::string>& texts, const Tokenizer& tok);
// BOS + prompt (mask 0) + response + EOS (mask 1).
std::vector<Document> data_tokenize_dolly(const std::vector<DollyRecord>& records, const Tokenizer& tok);
struct DocumentsRead {
  std::vector<Document> docs;
  int64_t tokens = 0;       // in docs
  bool whole_dataset = true;  // false: reading stopped at the token budget
};
// Reads and tokenizes a plan dataset: format "text" | "jsonl" | "parquet" |
// "dolly"; "tokens" is kInvalidArgument (not read natively). token_budget > 0:
// stops after the document that brings the tokens read to the budget, so a
// case reads the start of a large corpus, not all of it.
Result<DocumentsRead> data_load(const DatasetSource& source, const Tokenizer& tok, int64_t token_budget = 0);

// Concatenates the documents into one stream and cuts it into sequences of
// seq_len+1 tokens with stride seq_len (the last token of one is the first of
// the next). A final partial sequence is padded with `pad_id`, its padding masked.
std::vector<Sequence> data_pack(const std::vector<Document>& docs, int64_t seq_len, int pad_id);

// Fisher–Yates with mt19937_64: the same order for the same seed on every platform.
void data_shuffle(std::vector<Sequence>& seqs, uint64_t seed);

// round(eval_fraction·n), at least 1 when n >= 2 and eval_fraction > 0, at most n - 1.
int64_t data_held_out(int64_t n, double eval_fraction);

struct DataSplit {
  std::vector<Sequence> train;
  std::vector<Sequence> eval;
};
// Shuffles with `seed`, then holds out data_held_out(n) sequences for evaluation.
DataSplit data_split(std::vector<Sequence> seqs, double eval_fraction, uint64_t seed);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_TRAINING_DATA_H_

#include "backends/native/training/data.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "backends/native/training/parquet.h"
#include "runner/base/json.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {
namespace fs = std::filesystem;
namespace {

Result<std::string> ReadFile(const std::string& path) {
  auto text = ReadFileText(path);
  if (!text.ok()) return Status::NotFound(fmt::format("{}: cannot open the dataset file", path));
  return text;
}

// The files a dataset path stands for: itself, or a directory's files with `ext`.
Result<std::vector<std::string>> DatasetFiles(const std::string& path, const std::vector<std::string>& exts) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return std::vector<std::string>{path};
  if (!fs::is_directory(path, ec)) return Status::NotFound(fmt::format("{}: no such dataset file or directory", path));
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    if (!entry.is_regular_file()) continue;
    for (const auto& ext : exts)
      if (entry.path().extension() == ext) files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  if (files.empty())
    return Status::NotFound(fmt::format("{}: the directory holds no {} files", path, Join(exts, " / ")));
  return files;
}

// Calls on_object(json, line_number) for each non-blank jsonl line, reading
// the file line by line. It stops at the first error on_object returns, or
// when `*more` (optional) turns false.
template <typename F>
Status ForEachJsonLine(const std::string& file, F on_object, const bool* more = nullptr) {
  std::ifstream lines(file, std::ios::binary);
  if (!lines) return Status::NotFound(fmt::format("{}: cannot open the dataset file", file));
  std::string line;
  int number = 0;
  while ((!more || *more) && std::getline(lines, line)) {
    ++number;
    if (Trim(line).empty()) continue;
    Json j;
    try {
      j = Json::parse(line);
    } catch (const std::exception& e) {
      return Status::InvalidArgument(fmt::format("{}:{}: not valid JSON: {}", file, number, e.what()));
    }
    if (!j.is_object()) return Status::InvalidArgument(fmt::format("{}:{}: expected a JSON object", file, number));
    Status s = on_object(j, number);
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

void Append(Document& doc, const std::vector<int>& ids, uint8_t mask) {
  doc.tokens.insert(doc.tokens.end(), ids.begin(), ids.end());
  doc.loss_mask.insert(doc.loss_mask.end(), ids.size(), mask);
}

}  // namespace

const char* const kNativeDatasetFormats = "text, jsonl, parquet or dolly";

bool data_format_supported(const std::string& format) {
  return format == "text" || format == "jsonl" || format == "parquet" || format == "dolly";
}

Status data_for_each_text(const DatasetSource& source, const std::function<bool(std::string_view)>& on_text) {
  const std::string& path = source.path;
  if (source.format == "parquet") {
    auto reader = ParquetTextReader::Open(path, source.column);
    if (!reader.ok()) return reader.status();
    return reader->ForEach(on_text);
  }
  if (source.format != "text" && source.format != "jsonl")
    return Status::InvalidArgument(
        fmt::format("{}: data_for_each_text reads 'text', 'jsonl' or 'parquet', not '{}'", path, source.format));
  auto files = DatasetFiles(path, source.format == "text" ? std::vector<std::string>{".txt"}
                                                          : std::vector<std::string>{".jsonl"});
  if (!files.ok()) return files.status();
  for (const std::string& file : *files) {
    if (source.format == "text") {
      auto content = ReadFile(file);
      if (!content.ok()) return content.status();
      if (!on_text(*content)) return Status::Ok();
      continue;
    }
    bool more = true;
    Status s = ForEachJsonLine(
        file,
        [&](const Json& j, int line) {
          if (!j.contains("text") || !j["text"].is_string())
            return Status::InvalidArgument(fmt::format("{}:{}: no \"text\" string field", file, line));
          more = on_text(j["text"].get_ref<const std::string&>());
          return Status::Ok();
        },
        &more);
    if (!s.ok()) return s;
    if (!more) return Status::Ok();
  }
  return Status::Ok();
}

Result<std::vector<std::string>> data_read_texts(const std::string& path, const std::string& format) {
  std::vector<std::string> texts;
  Status s = data_for_each_text({path, format, ""}, [&](std::string_view text) {
    texts.emplace_back(text);
    return true;
  });
  if (!s.ok()) return s;
  return texts;
}

Result<std::vector<DollyRecord>> data_read_dolly(const std::string& path) {
  auto files = DatasetFiles(path, {".jsonl"});
  if (!files.ok()) return files.status();
  std::vector<DollyRecord> records;
  for (const std::string& file : *files) {
    Status s = ForEachJsonLine(file, [&](const Json& j, int line) {
      DollyRecord r;
      const std::pair<const char*, std::string*> fields[] = {
          {"instruction", &r.instruction}, {"context", &r.context}, {"response", &r.response}};
      for (const auto& [key, out] : fields) {
        if (!j.contains(key) || !j[key].is_string())
          return Status::InvalidArgument(fmt::format("{}:{}: dolly record has no \"{}\" string field", file, line, key));
        *out = j[key].get<std::string>();
      }
      if (j.contains("category") && j["category"].is_string()) r.category = j["category"].get<std::string>();
      records.push_back(std::move(r));
      return Status::Ok();
    });
    if (!s.ok()) return s;
  }
  return records;
}

std::string dolly_prompt(const DollyRecord& r) {
  std::string prompt = "### Instruction:\n" + r.instruction + "\n\n";
  if (!Trim(r.context).empty()) prompt += "### Context:\n" + r.context + "\n\n";
  return prompt + "### Response:\n";
}

std::vector<Document> data_tokenize_texts(const std::vector<std::string>& texts, const Tokenizer& tok) {
  std::vector<Document> docs;
  for (const std::string& text : texts) {
    Document d;
    if (tok.bos_id() >= 0) Append(d, {tok.bos_id()}, 1);
    Append(d, tok.Encode(text), 1);
    if (tok.eos_id() >= 0) Append(d, {tok.eos_id()}, 1);
    docs.push_back(std::move(d));
  }
  return docs;
}

std::vector<Document> data_tokenize_dolly(const std::vector<DollyRecord>& records, const Tokenizer& tok) {
  std::vector<Document> docs;
  for (const DollyRecord& r : records) {
    Document d;
    if (tok.bos_id() >= 0) Append(d, {tok.bos_id()}, 0);
    Append(d, tok.Encode(dolly_prompt(r)), 0);
    Append(d, tok.Encode(r.response), 1);
    if (tok.eos_id() >= 0) Append(d, {tok.eos_id()}, 1);
    docs.push_back(std::move(d));
  }
  return docs;
}

Result<DocumentsRead> data_load(const DatasetSource& source, const Tokenizer& tok, int64_t token_budget) {
  DocumentsRead read;
  auto keep = [&](std::vector<Document> one) {
    for (Document& d : one) {
      read.tokens += static_cast<int64_t>(d.tokens.size());
      read.docs.push_back(std::move(d));
    }
    if (token_budget > 0 && read.tokens >= token_budget) read.whole_dataset = false;
    return read.whole_dataset;
  };
  Status s;
  if (source.format == "dolly") {
    auto records = data_read_dolly(source.path);
    if (!records.ok()) return records.status();
    for (const DollyRecord& r : *records)
      if (!keep(data_tokenize_dolly({r}, tok))) break;
  } else if (data_format_supported(source.format)) {
    s = data_for_each_text(source, [&](std::string_view text) { return keep(data_tokenize_texts({std::string(text)}, tok)); });
  } else {
    s = Status::InvalidArgument(fmt::format("{}: dataset format '{}' is not supported by the native backend (use {})",
                                            source.path, source.format, kNativeDatasetFormats));
  }
  if (!s.ok()) return s;
  return read;
}

std::vector<Sequence> data_pack(const std::vector<Document>& docs, int64_t seq_len, int pad_id) {
  std::vector<int> stream;
  std::vector<uint8_t> mask;
  for (const Document& d : docs) {
    stream.insert(stream.end(), d.tokens.begin(), d.tokens.end());
    mask.insert(mask.end(), d.loss_mask.begin(), d.loss_mask.end());
  }
  std::vector<Sequence> out;
  const size_t n = static_cast<size_t>(seq_len);
  for (size_t start = 0; start + 1 < stream.size(); start += n) {
    Sequence s;
    for (size_t i = 0; i <= n; ++i) {
      const size_t at = start + i;
      s.tokens.push_back(at < stream.size() ? stream[at] : pad_id);
      if (i > 0) s.mask.push_back(at < stream.size() ? mask[at] : 0);  // target tokens[i]
    }
    out.push_back(std::move(s));
  }
  return out;
}

void data_shuffle(std::vector<Sequence>& seqs, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (size_t i = seqs.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(rng() % i);  // modulo bias is irrelevant here
    std::swap(seqs[i - 1], seqs[j]);
  }
}

int64_t data_held_out(int64_t n, double eval_fraction) {
  int64_t held = std::llround(eval_fraction * static_cast<double>(n));
  if (eval_fraction > 0 && n >= 2) held = std::max<int64_t>(held, 1);
  return std::min(held, n > 0 ? n - 1 : 0);
}

DataSplit data_split(std::vector<Sequence> seqs, double eval_fraction, uint64_t seed) {
  data_shuffle(seqs, seed);
  const size_t n_eval = static_cast<size_t>(data_held_out(static_cast<int64_t>(seqs.size()), eval_fraction));
  DataSplit split;
  split.eval.assign(seqs.end() - static_cast<std::ptrdiff_t>(n_eval), seqs.end());
  seqs.resize(seqs.size() - n_eval);
  split.train = std::move(seqs);
  return split;
}

}  // namespace native
}  // namespace protocol

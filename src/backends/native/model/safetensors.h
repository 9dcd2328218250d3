#ifndef PROTOCOL_BACKENDS_NATIVE_MODEL_SAFETENSORS_H_
#define PROTOCOL_BACKENDS_NATIVE_MODEL_SAFETENSORS_H_

// Hugging Face safetensors files and model directories.
//
// File format (https://huggingface.co/docs/safetensors): an 8-byte little-endian
// header length N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin,
// end)}, "__metadata__": {...}}, then the raw little-endian tensor bytes, offsets
// relative to the end of the header. Supported dtypes: F32, BF16, F16.
//
// A model directory holds config.json, tokenizer.model, and the weights as
// model.safetensors or as shards listed in model.safetensors.index.json
// ({"weight_map": {tensor name: shard file}}).
//
// Reading maps each file into memory (mmap) and copies one tensor at a time into
// the model's dtype and device; no shard is read into a buffer whole.
// Every error names the file, and the tensor when there is one.

#include <ATen/ATen.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/native/model/model.h"
#include "runner/base/status.h"

namespace protocol {
namespace native {

struct SafetensorsEntry {
  std::string dtype;           // "F32" | "BF16" | "F16"
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0; // byte offsets into the data section
};

// A safetensors file, mapped read-only. Open validates the whole header:
// every entry's dtype, its byte count against its shape, and that its data
// lies inside the file (a truncated file is an error here, not a crash later).
class SafetensorsFile {
 public:
  static Result<std::shared_ptr<SafetensorsFile>> Open(const std::string& path);
  ~SafetensorsFile();
  const std::string& path() const { return path_; }
  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  // A CPU tensor viewing the mapped bytes (kept mapped while the tensor lives).
  // kNotFound "<file>: tensor 'x' is not in this file".
  Result<at::Tensor> View(const std::string& name) const;
  // Drops the resident pages of tensor `name` from this process (they are
  // read again from the file if viewed again), so that reading a large file
  // tensor by tensor does not leave all of it counted in the process's RSS.
  void DropPages(const std::string& name) const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  std::map<std::string, SafetensorsEntry> entries_;
  const char* map_ = nullptr;
  size_t size_ = 0;
  size_t data_start_ = 0;
  std::weak_ptr<SafetensorsFile> self_;
};

// Writes a safetensors file one tensor at a time, so that a caller never needs
// more than one of them at once (FSDP saves unit by unit): Create writes the
// header (every name, dtype and shape), each Write appends the next tensor's
// bytes in the header's order, Close checks that all were written.
class SafetensorsWriter {
 public:
  struct Entry {
    std::string name;
    at::ScalarType dtype;  // F32, BF16 or F16
    std::vector<int64_t> shape;
  };
  // Errors: a dtype that cannot be saved, a file that cannot be created.
  static Result<std::unique_ptr<SafetensorsWriter>> Create(const std::string& path, const std::vector<Entry>& entries);
  // kInvalidArgument when t's dtype or shape is not the next entry's, or every entry is written.
  Status Write(const at::Tensor& t);
  // kInvalidArgument when entries were not written; kIoError when writing failed.
  Status Close();

 private:
  SafetensorsWriter() = default;
  std::string path_;
  std::vector<Entry> entries_;
  size_t next_ = 0;
  std::ofstream out_;
  int error_ = 0;  // errno of the first write that failed (a full disk)
};

// Writes `tensors` (contiguous CPU copies are made as needed) in the given order.
Status safetensors_save(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors);

// Saves config.json and the weights in their current dtype: one
// model.safetensors, or shards of at most max_shard_bytes each plus
// model.safetensors.index.json when max_shard_bytes > 0 and the weights exceed it.
// Creates `dir` if needed.
Status model_save(Model& model, const std::string& dir, uint64_t max_shard_bytes = 0);

// The weights of a model directory (model.safetensors, or the shards its
// index lists), read one tensor at a time; each tensor's file pages are
// dropped after it is copied. Open errors: no weights in dir (kNotFound), a
// bad index.
class WeightsReader {
 public:
  static Result<WeightsReader> Open(const std::string& dir);
  // Copies tensor p.name into *p.tensor (allocated; converted to its dtype and
  // device). Errors: a missing tensor, a shape differing from p.shape.
  Status Read(const NamedParameter& p);

 private:
  std::string source_;                                         // names the weights in messages
  std::map<std::string, std::string> where_;                   // tensor name -> file (sharded)
  std::map<std::string, std::shared_ptr<SafetensorsFile>> open_;  // path -> mapped file
};

// The part of model_save before the weights, for callers that write them
// with a SafetensorsWriter (FSDP, unit by unit): creates dir, writes its
// config.json, removes a stale shard index, and returns the path of the one
// weights file to write (dir/model.safetensors).
Result<std::string> model_save_begin(const ModelConfig& config, const std::string& dir);

// Copies every parameter of `model` (already created with its config, dtype
// and device) from dir's model.safetensors or its sharded index. Errors: no
// weights in dir (kNotFound), a missing tensor, a shape differing from the config.
Status model_load_weights(Model& model, const std::string& dir);

// A whole model from an HF directory: config.json, then its weights, in
// `options` (dtype, device). Errors from either step.
Result<Model> model_load_dir(const std::string& dir, const at::TensorOptions& options);

// True when dir holds model.safetensors or model.safetensors.index.json.
bool model_dir_has_weights(const std::string& dir);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_MODEL_SAFETENSORS_H_

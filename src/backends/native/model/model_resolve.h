#ifndef PROTOCOL_BACKENDS_NATIVE_MODEL_MODEL_RESOLVE_H_
#define PROTOCOL_BACKENDS_NATIVE_MODEL_MODEL_RESOLVE_H_

// The one rule for which model a native case runs, shared by the one-process
// backend, the rank workers and `protocol validate`:
//
//   dimensions  <path>/config.json when it exists, else the preset
//   vocabulary  config.json's vocab_size; a preset (which has no vocabulary of
//               its own) takes the tokenizer's size, so every id the model can
//               generate is a piece the tokenizer can decode
//   tokenizer   <path>/tokenizer.model; one with more pieces than the model's
//               vocabulary is refused (its ids would index past the embedding)

#include <memory>
#include <optional>
#include <string>

#include "backends/native/model/model_config.h"
#include "backends/native/model/tokenizer.h"
#include "runner/base/status.h"

namespace protocol {
namespace native {

struct ResolvedModel {
  ModelConfig config;
  std::string config_source;   // "config.json in <path>" | "preset tiny, vocabulary 512 from <path>/tokenizer.model"
  std::string tokenizer_path;  // <path>/tokenizer.model
  std::unique_ptr<Tokenizer> tokenizer;
};

// `path` is the model's directory, already resolved against the plan's
// directory. Errors name the model and the file.
Result<ResolvedModel> ResolveModel(const std::string& name, const std::string& preset, const std::string& path);

// The dimensions alone, for estimates and checks where the files may be
// absent: config.json or the preset, with the vocabulary rule applied when
// <path>/tokenizer.model can be read (else a preset keeps its own vocabulary);
// nullopt when neither gives a usable config. `problem` (optional) receives
// the refusal of a tokenizer larger than the model's vocabulary.
std::optional<ModelConfig> ModelDimensions(const std::string& name, const std::string& preset,
                                           const std::string& path, std::string* problem = nullptr);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_MODEL_MODEL_RESOLVE_H_

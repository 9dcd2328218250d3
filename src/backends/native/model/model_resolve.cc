#include "backends/native/model/model_resolve.h"

#include <filesystem>
#include <system_error>

#include "runner/base/text.h"

namespace protocol {
namespace native {
namespace fs = std::filesystem;

namespace {

bool HasConfigJson(const std::string& path) {
  std::error_code ec;
  return !path.empty() && fs::is_regular_file(fs::path(path) / "config.json", ec);
}

// config.json, else the preset, with where it came from.
Result<ModelConfig> DimensionsOf(const std::string& name, const std::string& preset, const std::string& path,
                                 std::string* source) {
  if (HasConfigJson(path)) {
    *source = "config.json in " + path;
    return ReadHfConfig(path);
  }
  if (!preset.empty()) {
    *source = "preset " + preset;
    return PresetConfig(preset);
  }
  return Status::InvalidArgument(
      fmt::format("model '{}' has neither a preset nor a config.json in its path '{}'", name, path));
}

// The vocabulary rule of the header: a preset takes the tokenizer's size; a
// config.json's vocabulary must hold every piece.
Status FitVocabulary(const std::string& name, const std::string& path, const std::string& tokenizer_path,
                     int64_t pieces, ModelConfig* config, std::string* source) {
  if (!HasConfigJson(path)) {
    config->vocab_size = pieces;
    *source += fmt::format(", vocabulary {} from {}", pieces, tokenizer_path);
    return Status::Ok();
  }
  if (pieces <= config->vocab_size) return Status::Ok();
  return Status::InvalidArgument(fmt::format(
      "model '{}': {} has {} pieces, more than the model's vocab_size {} (config.json in {}): its ids would "
      "index past the embedding; use the tokenizer the model was trained with",
      name, tokenizer_path, pieces, config->vocab_size, path));
}

}  // namespace

Result<ResolvedModel> ResolveModel(const std::string& name, const std::string& preset, const std::string& path) {
  ResolvedModel m;
  Result<ModelConfig> config = DimensionsOf(name, preset, path, &m.config_source);
  if (!config.ok()) return config.status();
  m.config = *config;
  if (path.empty())
    return Status::InvalidArgument(fmt::format(
        "model '{}' has no path: the native backends need <path>/tokenizer.model to turn text into tokens", name));
  m.tokenizer_path = (fs::path(path) / "tokenizer.model").string();
  auto tok = LoadSentencePieceTokenizer(m.tokenizer_path);
  if (!tok.ok()) return tok.status();
  m.tokenizer = std::move(*tok);
  Status fits = FitVocabulary(name, path, m.tokenizer_path, m.tokenizer->vocab_size(), &m.config, &m.config_source);
  if (!fits.ok()) return fits;
  return m;
}

std::optional<ModelConfig> ModelDimensions(const std::string& name, const std::string& preset,
                                           const std::string& path, std::string* problem) {
  std::string source;
  Result<ModelConfig> config = DimensionsOf(name, preset, path, &source);
  if (!config.ok() || !config->Validate().empty()) return std::nullopt;
  std::error_code ec;
  const std::string tokenizer_path = path.empty() ? "" : (fs::path(path) / "tokenizer.model").string();
  if (!tokenizer_path.empty() && fs::is_regular_file(tokenizer_path, ec)) {
    auto tok = LoadSentencePieceTokenizer(tokenizer_path);
    if (tok.ok()) {
      Status fits = FitVocabulary(name, path, tokenizer_path, (*tok)->vocab_size(), &*config, &source);
      if (!fits.ok() && problem) *problem = fits.message();
    }
  }
  return *config;
}

}  // namespace native
}  // namespace protocol

#ifndef PROTOCOL_BACKENDS_NATIVE_MODEL_TOKENIZER_H_
#define PROTOCOL_BACKENDS_NATIVE_MODEL_TOKENIZER_H_

// Text <-> token ids. The real tokenizer is SentencePiece: Llama-2's
// tokenizer.model (a protobuf ModelProto), read and applied by tokenizer.cc.
//
// Why not libsentencepiece: Debian's libsentencepiece.so.0 carries its own
// protobuf-lite 3.14 and exports those symbols; in one process with libtorch
// (system libprotobuf 3.21) the start-up initialisers bind to the wrong copy and
// the program crashes before main, or aborts on protobuf's version check. So
// tokenizer.cc decodes the model file itself (pieces, scores, types, model type,
// normalizer flags) and implements SentencePiece's BPE and unigram encoders;
// tests check its ids against the spm_encode program token for token.
//
// Normalisation: "identity" (Llama-2's rule) is exact. For other rules
// (nmt_nfkc, the spm_train default) only whitespace handling is applied (tabs
// and newlines become spaces, runs collapse), no NFKC: exact for ASCII text.

#include <memory>
#include <string>
#include <vector>

#include "runner/base/status.h"

namespace protocol {
namespace native {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Token ids of `text`, without BOS/EOS.
  virtual std::vector<int> Encode(const std::string& text) const = 0;
  virtual std::string Decode(const std::vector<int>& ids) const = 0;
  virtual int bos_id() const = 0;  // -1 when the vocabulary has none
  virtual int eos_id() const = 0;  // -1 when the vocabulary has none
  virtual int vocab_size() const = 0;
};

// Loads a SentencePiece model file (BPE or unigram). Errors: kNotFound "<path>: no tokenizer
// model here (a tokenizer.model is needed to ...)" when the file is absent;
// kInvalidArgument "<path>: not a SentencePiece model: ..." when unreadable,
// "<path>: SentencePiece model type N is not supported (BPE and unigram are)".
Result<std::unique_ptr<Tokenizer>> LoadSentencePieceTokenizer(const std::string& path);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_MODEL_TOKENIZER_H_

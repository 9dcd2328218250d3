#include "backends/native/model/tokenizer.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <unordered_map>

#include "runner/base/text.h"

namespace protocol {
namespace native {
namespace {

// ---- protobuf wire format (just what sentencepiece_model.proto needs) ------

class WireReader {
 public:
  WireReader(const char* data, size_t size) : p_(data), end_(data + size) {}
  bool done() const { return p_ >= end_; }
  // Reads a field key; false on malformed input.
  bool Key(uint32_t* field, uint32_t* wire) {
    uint64_t key;
    if (!Varint(&key)) return false;
    *field = static_cast<uint32_t>(key >> 3);
    *wire = static_cast<uint32_t>(key & 7);
    return true;
  }
  bool Varint(uint64_t* out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64 && p_ < end_; shift += 7) {
      const uint8_t b = static_cast<uint8_t>(*p_++);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        *out = v;
        return true;
      }
    }
    return false;
  }
  bool Bytes(std::string_view* out) {
    uint64_t n;
    if (!Varint(&n) || n > static_cast<uint64_t>(end_ - p_)) return false;
    *out = std::string_view(p_, static_cast<size_t>(n));
    p_ += n;
    return true;
  }
  bool Fixed32(uint32_t* out) {
    if (end_ - p_ < 4) return false;
    std::memcpy(out, p_, 4);
    p_ += 4;
    return true;
  }
  bool Skip(uint32_t wire) {
    uint64_t v;
    std::string_view s;
    uint32_t f;
    switch (wire) {
      case 0: return Varint(&v);
      case 1: if (end_ - p_ < 8) return false; p_ += 8; return true;
      case 2: return Bytes(&s);
      case 5: return Fixed32(&f);
      default: return false;
    }
  }

 private:
  const char* p_;
  const char* end_;
};

// sentencepiece_model.proto: SentencePiece.Type
enum PieceType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };
enum ModelType { kUnigram = 1, kBpe = 2 };

struct Piece {
  std::string text;
  float score = 0;
  int type = kNormal;
};

const std::string kSpace = "\xe2\x96\x81";  // U+2581 "▁", SentencePiece's visible space

size_t Utf8Length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xe) return 3;
  if ((lead >> 3) == 0x1e) return 4;
  return 1;  // invalid byte: a symbol of its own
}

class SentencePieceTokenizer : public Tokenizer {
 public:
  std::vector<Piece> pieces;
  int model_type = kUnigram;
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
  std::string normalizer_name;
  std::unordered_map<std::string, int> ids;  // encodable pieces (normal, user-defined, unknown)
  std::unordered_map<std::string, int> byte_ids;  // "<0x41>" pieces by byte value text
  int unk = 0, bos = -1, eos = -1;
  float min_score = 0;
  size_t max_piece_bytes = 1;
  mutable std::unordered_map<std::string, std::vector<int>> cache_;  // word -> ids (not thread-safe)

  void Index() {
    for (size_t i = 0; i < pieces.size(); ++i) {
      const Piece& p = pieces[i];
      const int id = static_cast<int>(i);
      if (p.type == kNormal || p.type == kUserDefined) ids.emplace(p.text, id);
      if (p.type == kNormal) min_score = std::min(min_score, p.score);
      if (p.type == kUnknown) unk = id;
      if (p.type == kByte) byte_ids.emplace(p.text, id);
      if (p.type == kControl && p.text == "<s>") bos = id;
      if (p.type == kControl && p.text == "</s>") eos = id;
      max_piece_bytes = std::max(max_piece_bytes, p.text.size());
    }
  }

  // Whitespace handling of the normalizer, then " " -> "▁" and the dummy prefix.
  std::string Normalize(const std::string& text) const {
    std::string s = text;
    if (normalizer_name != "identity")  // nmt_nfkc maps ASCII whitespace controls to a space
      for (char& ch : s)
        if (ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f') ch = ' ';
    if (remove_extra_whitespaces) {
      std::string out;
      bool space = true;  // drops leading spaces
      for (char ch : s) {
        if (ch == ' ') {
          if (!space) out.push_back(' ');
          space = true;
        } else {
          out.push_back(ch);
          space = false;
        }
      }
      if (!out.empty() && out.back() == ' ') out.pop_back();
      s = out;
    }
    if (s.empty()) return s;
    if (add_dummy_prefix) s = " " + s;
    if (!escape_whitespaces) return s;
    std::string out;
    for (char ch : s) out += ch == ' ' ? kSpace : std::string(1, ch);
    return out;
  }

  // Appends the id of `symbol`, or its bytes' <0xXX> pieces, or unk.
  void Emit(const std::string& symbol, std::vector<int>* out) const {
    auto it = ids.find(symbol);
    if (it != ids.end()) {
      out->push_back(it->second);
      return;
    }
    if (!byte_ids.empty()) {
      for (unsigned char b : symbol) {
        auto bt = byte_ids.find(fmt::format("<0x{:02X}>", b));
        out->push_back(bt != byte_ids.end() ? bt->second : unk);
      }
      return;
    }
    out->push_back(unk);
  }

  // BPE (sentencepiece bpe_model.cc): start from characters; repeatedly merge
  // the adjacent pair whose concatenation is a piece with the highest score
  // (leftmost on ties) until no pair is a piece.
  std::vector<int> EncodeBpe(const std::string& s) const {
    std::vector<std::string> symbols;
    for (size_t i = 0; i < s.size();) {
      const size_t n = std::min(Utf8Length(static_cast<unsigned char>(s[i])), s.size() - i);
      symbols.push_back(s.substr(i, n));
      i += n;
    }
    for (;;) {
      int best = -1;
      float best_score = -std::numeric_limits<float>::infinity();
      for (size_t i = 0; i + 1 < symbols.size(); ++i) {
        auto it = ids.find(symbols[i] + symbols[i + 1]);
        if (it == ids.end()) continue;
        const float score = pieces[static_cast<size_t>(it->second)].score;
        if (score > best_score) {
          best_score = score;
          best = static_cast<int>(i);
        }
      }
      if (best < 0) break;
      symbols[static_cast<size_t>(best)] += symbols[static_cast<size_t>(best) + 1];
      symbols.erase(symbols.begin() + best + 1);
    }
    std::vector<int> out;
    for (const std::string& sym : symbols) Emit(sym, &out);
    return out;
  }

  // Unigram (sentencepiece unigram_model.cc): Viterbi over the lattice of
  // pieces, maximising the sum of piece scores; a character no piece covers is
  // unknown with score min_score − 10.
  std::vector<int> EncodeUnigram(const std::string& s) const {
    const size_t n = s.size();
    const double kUnkPenalty = 10.0;
    std::vector<double> best(n + 1, -std::numeric_limits<double>::infinity());
    std::vector<size_t> from(n + 1, 0);
    std::vector<int> via(n + 1, -1);
    best[0] = 0;
    for (size_t i = 0; i < n; ++i) {
      if (best[i] == -std::numeric_limits<double>::infinity()) continue;
      const size_t ch = std::min(Utf8Length(static_cast<unsigned char>(s[i])), n - i);
      bool covered = false;
      for (size_t len = 1; len <= std::min(max_piece_bytes, n - i); ++len) {
        auto it = ids.find(s.substr(i, len));
        if (it == ids.end()) continue;
        const Piece& p = pieces[static_cast<size_t>(it->second)];
        const double score = best[i] + (p.type == kUserDefined ? 0.0 : p.score);
        if (len >= ch) covered = covered || len == ch;
        if (score > best[i + len]) {
          best[i + len] = score;
          from[i + len] = i;
          via[i + len] = it->second;
        }
      }
      if (!covered && best[i] + min_score - kUnkPenalty > best[i + ch]) {
        best[i + ch] = best[i] + min_score - kUnkPenalty;
        from[i + ch] = i;
        via[i + ch] = -1;  // unknown
      }
    }
    std::vector<std::pair<size_t, size_t>> spans;  // (start, end) backwards
    std::vector<int> chosen;
    for (size_t end = n; end > 0; end = from[end]) {
      spans.push_back({from[end], end});
      chosen.push_back(via[end]);
    }
    std::vector<int> out;
    for (size_t k = spans.size(); k-- > 0;) {
      if (chosen[k] >= 0) out.push_back(chosen[k]);
      else Emit(s.substr(spans[k].first, spans[k].second - spans[k].first), &out);
    }
    return out;
  }

  // Pieces never span the start of a new word (a "▁" that follows a non-"▁"
  // character; SentencePiece trains with split_by_whitespace), so each such word
  // is encoded on its own — linear in the text — and remembered.
  std::vector<int> Encode(const std::string& text) const override {
    const std::string s = Normalize(text);
    std::vector<int> out;
    auto space_at = [&](size_t at) { return s.compare(at, kSpace.size(), kSpace) == 0; };
    size_t start = 0;
    for (size_t i = 1; i <= s.size(); ++i) {
      const bool boundary =
          i == s.size() || (i >= kSpace.size() && space_at(i) && !space_at(i - kSpace.size()));
      if (!boundary) continue;
      const std::string word = s.substr(start, i - start);
      auto cached = cache_.find(word);
      if (cached == cache_.end()) {
        if (cache_.size() > 200000) cache_.clear();  // bound memory on huge corpora
        cached = cache_.emplace(word, model_type == kBpe ? EncodeBpe(word) : EncodeUnigram(word)).first;
      }
      out.insert(out.end(), cached->second.begin(), cached->second.end());
      start = i;
    }
    return out;
  }

  // As SentencePieceProcessor::Decode: a run of consecutive <0xNN> byte
  // pieces becomes those bytes, in which every well-formed UTF-8 character is
  // kept and every other byte becomes U+FFFD (one per byte, as SentencePiece
  // does); other pieces give their text with "▁" as a space, the first one
  // without its leading "▁" (the dummy prefix). Control and unused pieces
  // give nothing, unknown ones " ⁇ ". The result is valid UTF-8.
  std::string Decode(const std::vector<int>& id_list) const override {
    std::string text, bytes;
    auto flush_bytes = [&] {
      for (size_t i = 0; i < bytes.size();) {
        uint32_t cp = 0;
        const size_t n = DecodeUtf8(bytes, i, &cp);
        if (n == 0) {
          text += "\xef\xbf\xbd";  // U+FFFD
          ++i;
        } else {
          text.append(bytes, i, n);
          i += n;
        }
      }
      bytes.clear();
    };
    bool is_bos_ws = true, bos_ws_seen = false;
    for (int id : id_list) {
      if (id < 0 || static_cast<size_t>(id) >= pieces.size()) continue;
      const Piece& p = pieces[static_cast<size_t>(id)];
      if (p.type == kByte) {
        bytes.push_back(static_cast<char>(std::stoi(p.text.substr(3, 2), nullptr, 16)));
        continue;
      }
      flush_bytes();
      if (bos_ws_seen || !text.empty()) is_bos_ws = false;
      bos_ws_seen = false;
      if (p.type == kControl || p.type == kUnused) continue;
      if (p.type == kUnknown) {
        text += " \xe2\x81\x87 ";  // " ⁇ ", as spm_decode writes it
        continue;
      }
      std::string_view piece = p.text;
      if (is_bos_ws && (add_dummy_prefix || remove_extra_whitespaces) && piece.substr(0, kSpace.size()) == kSpace) {
        piece.remove_prefix(kSpace.size());
        bos_ws_seen = !remove_extra_whitespaces;
      }
      for (size_t i = 0; i < piece.size();) {
        if (piece.substr(i, kSpace.size()) == kSpace) {
          text.push_back(' ');
          i += kSpace.size();
        } else {
          text.push_back(piece[i++]);
        }
      }
    }
    flush_bytes();
    return text;
  }
  int bos_id() const override { return bos; }
  int eos_id() const override { return eos; }
  int vocab_size() const override { return static_cast<int>(pieces.size()); }
};

bool ParsePiece(std::string_view bytes, Piece* piece) {
  WireReader r(bytes.data(), bytes.size());
  while (!r.done()) {
    uint32_t field, wire;
    if (!r.Key(&field, &wire)) return false;
    std::string_view s;
    uint32_t f32;
    uint64_t v;
    if (field == 1 && wire == 2) {
      if (!r.Bytes(&s)) return false;
      piece->text = std::string(s);
    } else if (field == 2 && wire == 5) {
      if (!r.Fixed32(&f32)) return false;
      std::memcpy(&piece->score, &f32, 4);
    } else if (field == 3 && wire == 0) {
      if (!r.Varint(&v)) return false;
      piece->type = static_cast<int>(v);
    } else if (!r.Skip(wire)) {
      return false;
    }
  }
  return true;
}

// TrainerSpec field 3 model_type; NormalizerSpec fields 1 name, 3
// add_dummy_prefix, 4 remove_extra_whitespaces, 5 escape_whitespaces.
bool ParseSpec(std::string_view bytes, bool trainer, SentencePieceTokenizer* tok) {
  WireReader r(bytes.data(), bytes.size());
  while (!r.done()) {
    uint32_t field, wire;
    if (!r.Key(&field, &wire)) return false;
    uint64_t v;
    std::string_view s;
    if (wire == 0 && (trainer ? field == 3 : (field >= 3 && field <= 5))) {
      if (!r.Varint(&v)) return false;
      if (trainer) tok->model_type = static_cast<int>(v);
      else if (field == 3) tok->add_dummy_prefix = v != 0;
      else if (field == 4) tok->remove_extra_whitespaces = v != 0;
      else tok->escape_whitespaces = v != 0;
    } else if (!trainer && field == 1 && wire == 2) {
      if (!r.Bytes(&s)) return false;
      tok->normalizer_name = std::string(s);
    } else if (!r.Skip(wire)) {
      return false;
    }
  }
  return true;
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> LoadSentencePieceTokenizer(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return Status::NotFound(fmt::format(
        "{}: no tokenizer model here (a SentencePiece tokenizer.model is needed to turn text into tokens; "
        "put one in the model's directory)", path));
  const std::string data = ReadFileText(path).value_or("");  // unreadable: "" fails as a model below
  auto tok = std::make_unique<SentencePieceTokenizer>();
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(fmt::format("{}: not a SentencePiece model: {}", path, why));
  };
  // ModelProto: 1 pieces (repeated), 2 trainer_spec, 3 normalizer_spec.
  WireReader r(data.data(), data.size());
  while (!r.done()) {
    uint32_t field, wire;
    if (!r.Key(&field, &wire)) return bad("malformed protobuf");
    std::string_view body;
    if (wire == 2 && field >= 1 && field <= 3) {
      if (!r.Bytes(&body)) return bad("malformed protobuf");
      if (field == 1) {
        Piece p;
        if (!ParsePiece(body, &p)) return bad("malformed piece");
        tok->pieces.push_back(std::move(p));
      } else if (!ParseSpec(body, field == 2, tok.get())) {
        return bad("malformed spec");
      }
    } else if (!r.Skip(wire)) {
      return bad("malformed protobuf");
    }
  }
  if (tok->pieces.empty()) return bad("no pieces");
  if (tok->model_type != kBpe && tok->model_type != kUnigram)
    return Status::InvalidArgument(fmt::format(
        "{}: SentencePiece model type {} is not supported (BPE and unigram are)", path, tok->model_type));
  tok->Index();
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

}  // namespace native
}  // namespace protocol

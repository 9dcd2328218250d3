#include "backends/native/training/training_data.h"

#include <algorithm>

#include "runner/base/text.h"

namespace protocol {
namespace native {

int64_t SequencesForSteps(int64_t steps, int64_t batch_size) {
  if (steps <= 0) return 0;
  const int64_t train = steps * std::max<int64_t>(batch_size, 1);
  int64_t n = std::max<int64_t>(train, 2);  // at least one sequence held out for eval_loss
  while (n - data_held_out(n, kEvalFraction) < train) ++n;
  return n;
}

std::string TrainingData::ReadNote() const {
  if (whole_dataset) return fmt::format("the whole dataset ({} documents, {} tokens)", documents_read, tokens_read);
  return fmt::format("the first {} documents of the dataset ({} tokens), what {} steps need", documents_read,
                     tokens_read, steps);
}

Result<TrainingData> LoadTrainingData(const TrainingDataRequest& r, const Tokenizer& tokenizer) {
  const int64_t sequences = SequencesForSteps(r.steps, r.batch_size);
  const int64_t budget = sequences > 0 ? sequences * r.seq_len + 1 : 0;
  auto read = data_load(r.dataset, tokenizer, budget);
  if (!read.ok()) return read.status();
  std::vector<Document>& docs = read->docs;
  if (r.count_every_token)
    for (Document& d : docs) std::fill(d.loss_mask.begin(), d.loss_mask.end(), 1);
  const int pad = tokenizer.eos_id() >= 0 ? tokenizer.eos_id() : 0;
  TrainingData data;
  data.documents_read = static_cast<int64_t>(docs.size());
  data.tokens_read = read->tokens;
  data.whole_dataset = read->whole_dataset;
  std::vector<Sequence> packed = data_pack(docs, r.seq_len, pad);
  if (!read->whole_dataset && static_cast<int64_t>(packed.size()) > sequences) packed.resize(static_cast<size_t>(sequences));
  data.split = data_split(std::move(packed), kEvalFraction, static_cast<uint64_t>(r.seed));
  if (data.split.train.empty())
    return Status::InvalidArgument(fmt::format("{}: the dataset has no tokens", r.dataset.path));
  data.steps_per_epoch = (static_cast<int64_t>(data.split.train.size()) + r.batch_size - 1) / r.batch_size;
  data.steps = r.steps > 0 ? r.steps : r.epochs * data.steps_per_epoch;
  return data;
}

EpochStream::EpochStream(const std::vector<Sequence>& train, int groups, int group, uint64_t seed) : seed_(seed) {
  for (size_t i = static_cast<size_t>(group); i < train.size(); i += static_cast<size_t>(groups)) order_.push_back(train[i]);
}

std::vector<const Sequence*> EpochStream::Next(int64_t n) {
  std::vector<const Sequence*> out;
  for (int64_t i = 0; i < n; ++i) {
    if (cursor_ == order_.size()) {  // next epoch: a new seeded order
      cursor_ = 0;
      data_shuffle(order_, seed_ + ++epoch_);
    }
    out.push_back(&order_[cursor_++]);
  }
  return out;
}

}  // namespace native
}  // namespace protocol

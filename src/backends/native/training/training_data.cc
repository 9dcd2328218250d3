#include "backends/native/training/training_data.h"

#include <algorithm>

#include "runner/base/text.h"

namespace protocol {
namespace native {

Result<TrainingData> LoadTrainingData(const TrainingDataRequest& r, const Tokenizer& tokenizer) {
  auto docs = data_load(r.path, r.format, tokenizer);
  if (!docs.ok()) return docs.status();
  if (r.count_every_token)
    for (Document& d : *docs) std::fill(d.loss_mask.begin(), d.loss_mask.end(), 1);
  const int pad = tokenizer.eos_id() >= 0 ? tokenizer.eos_id() : 0;
  TrainingData data;
  data.split = data_split(data_pack(*docs, r.seq_len, pad), kEvalFraction, static_cast<uint64_t>(r.seed));
  if (data.split.train.empty()) return Status::InvalidArgument(fmt::format("{}: the dataset has no tokens", r.path));
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

#ifndef PROTOCOL_BACKENDS_NATIVE_TRAINING_TRAINING_DATA_H_
#define PROTOCOL_BACKENDS_NATIVE_TRAINING_TRAINING_DATA_H_

// A training case's data, the same for the one-process backend and every
// rank: the dataset read and tokenized (data.h), packed into sequences of
// seq_len + 1 tokens, split with kEvalFraction held out for eval_loss, and
// the number of steps from the case's length; then each group's epoch stream
// over its share of the training split. No libtorch.
//
// A length in steps reads only the start of the dataset it needs: the
// smallest number n of sequences whose training part (n minus the held-out
// share) is steps × batch_size, i.e. n·seq_len + 1 tokens, from the first
// documents in file order; the n sequences are then shuffled and split as
// they would be for the whole dataset. A corpus smaller than that is read
// whole and repeated in epochs. A length in epochs reads the whole dataset.

#include <cstdint>
#include <string>
#include <vector>

#include "backends/native/training/data.h"
#include "backends/native/model/tokenizer.h"
#include "runner/base/status.h"

namespace protocol {
namespace native {

// Share of the packed sequences held out for eval_loss.
inline constexpr double kEvalFraction = 0.05;

struct TrainingDataRequest {
  DatasetSource dataset;  // the plan dataset (data_load)
  // QLoRA continued pretraining: the causal-LM loss counts every token (an
  // instruction dataset's prompt tokens too; text and jsonl count every token already).
  bool count_every_token = false;
  int64_t seq_len = 0, batch_size = 1;
  int64_t seed = 0;
  // The length: `steps` when > 0, else `epochs` × steps per epoch.
  int64_t steps = 0, epochs = 0;
};

struct TrainingData {
  DataSplit split;
  int64_t steps_per_epoch = 0;  // ceil(train sequences / batch_size)
  int64_t steps = 0;
  int64_t documents_read = 0, tokens_read = 0;
  bool whole_dataset = true;  // false: only the start the steps need was read
  // "the whole dataset (1,234 documents)" or "the first 1,234 documents (2,048,017 tokens) the
  // 1000 steps need": what a case's log and method say it trained on.
  std::string ReadNote() const;
};

// The sequences a length in steps reads (see above): the smallest n >= 2 with
// n - data_held_out(n) >= steps × batch_size. 0 when steps is 0 (read everything).
int64_t SequencesForSteps(int64_t steps, int64_t batch_size);

// Errors: those of data_load; kInvalidArgument "PATH: the dataset has no tokens"
// when no training sequence remains. Padding is the tokenizer's EOS (0 without one).
Result<TrainingData> LoadTrainingData(const TrainingDataRequest& request, const Tokenizer& tokenizer);

// A group's own stream of sequences: its shard of the training split (every
// groups-th sequence, from the group's index), in order, then reshuffled with
// seed + epoch (data_shuffle) at each epoch's end. One process: groups 1, group 0.
class EpochStream {
 public:
  EpochStream(const std::vector<Sequence>& train, int groups, int group, uint64_t seed);
  bool empty() const { return order_.empty(); }
  size_t size() const { return order_.size(); }
  // The next n sequences: pointers into the stream's order, valid until the
  // next call. A call that crosses an epoch's end reshuffles that order, also
  // under the pointers it took before the end. REQUIRES !empty().
  std::vector<const Sequence*> Next(int64_t n);

 private:
  std::vector<Sequence> order_;
  size_t cursor_ = 0;
  uint64_t epoch_ = 0;
  uint64_t seed_;
};

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_TRAINING_TRAINING_DATA_H_

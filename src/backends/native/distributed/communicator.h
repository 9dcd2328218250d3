#ifndef PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_COMMUNICATOR_H_
#define PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_COMMUNICATOR_H_

// A process group (torch_compat.h's CommGroup) that counts the bytes this rank
// sends through it: every collective adds what compat returns for the
// operation it issued (the ring-algorithm volume, torch_compat.h):
//   all-gather of a shard of s bytes over W ranks   (W−1)·s
//   reduce-scatter of n bytes                       (W−1)/W·n  (an all-reduce's 2(W−1)/W·n
//                                                   where Gloo has no reduce-scatter)
//   all-reduce of n bytes                           2·(W−1)/W·n
// Barriers send no counted bytes. Whoever issues collectives (FSDP units, the
// evaluation, the merges) is handed the communicator instead of a byte counter.
// Every rank of the group calls the same collectives in the same order.

#include <cstdint>
#include <memory>

#include "backends/native/platform/torch_compat.h"

namespace protocol {
namespace native {

class Communicator {
 public:
  explicit Communicator(std::shared_ptr<compat::CommGroup> group);

  int size() const;
  // out (size·shard.numel(), contiguous) = concatenation of every rank's shard.
  void AllGather(at::Tensor& out, const at::Tensor& shard);
  // shard_out = this rank's 1/size slice of the element-wise SUM of every rank's `full`.
  void ReduceScatterSum(at::Tensor& shard_out, at::Tensor& full);
  // In place: tensor = SUM over ranks.
  void AllReduceSum(at::Tensor& tensor);
  // In place: tensor = rank `root`'s tensor.
  void Broadcast(at::Tensor& tensor, int root);
  void Barrier();

  // Bytes this rank has sent through the group so far.
  int64_t bytes_sent() const { return bytes_sent_; }
  // Seconds this rank has spent in the group's collectives (compat::CommWaitSeconds).
  double WaitSeconds() const;
  compat::CommGroup& group() { return *group_; }

 private:
  std::shared_ptr<compat::CommGroup> group_;
  int64_t bytes_sent_ = 0;
};

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_COMMUNICATOR_H_

#ifndef PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_COMMUNICATOR_H_
#define PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_COMMUNICATOR_H_

// A process group (torch_compat.h's CommGroup) that counts the bytes this rank
// sends through it: every collective adds what compat returns for the
// operation it issued (the ring-algorithm volume, torch_compat.h):
//   all-gather of a shard of s bytes over W ranks   (W−1)·s
//   reduce-scatter of n bytes                       (W−1)/W·n  (an all-reduce's 2(W−1)/W·n
//                                                   on Gloo, where it is an all-reduce)
//   all-reduce of n bytes                           2·(W−1)/W·n
// Barriers send no counted bytes. Whoever issues collectives (FSDP units, the
// evaluation, the merges) is handed the communicator instead of a byte counter.
// Every rank of the group calls the same collectives in the same order.
//
// A solo communicator (Solo()) is the group of one process: no store, no
// socket; its collectives are local copies (or nothing) and send no bytes.
// One process is a mesh of one rank whose collectives do nothing, as FSDP2
// with world_size 1 and llm.c with num_processes 1 run.
//
// Bytes between nodes: in the ring model every rank sends all of its bytes to
// the next rank of the ring (group rank + 1 mod W). So a rank's bytes cross
// from one node to another exactly when that next rank is on another node; a
// communicator told the node of every member counts them apart
// (bytes_between_nodes). For 2 nodes of S ranks each in one ring, 2 of the
// 2·S ranks send across: the link carries 2/W of the ring's bytes.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/native/platform/torch_compat.h"

namespace protocol {
namespace native {

class Communicator {
 public:
  // `member_nodes`: the node of each rank of the group, in group-rank order
  // (empty: one node, nothing crosses).
  explicit Communicator(std::shared_ptr<compat::CommGroup> group, std::vector<std::string> member_nodes = {});
  // The group of this process alone (see above).
  static std::shared_ptr<Communicator> Solo();

  int size() const;
  int rank() const;
  // out (size·shard.numel(), contiguous) = concatenation of every rank's shard.
  void AllGather(at::Tensor& out, const at::Tensor& shard);
  // shard_out = this rank's 1/size slice of the element-wise SUM of every rank's `full`.
  void ReduceScatterSum(at::Tensor& shard_out, at::Tensor& full);
  // In place: tensor = SUM over ranks.
  void AllReduceSum(at::Tensor& tensor);
  // The same three, issued and not waited for (torch_compat.h's PendingCollective:
  // the caller waits before it reads the result). Bytes are counted at the issue.
  compat::PendingCollective AllGatherAsync(at::Tensor& out, const at::Tensor& shard);
  compat::PendingCollective ReduceScatterSumAsync(at::Tensor& shard_out, at::Tensor& full);
  compat::PendingCollective AllReduceSumAsync(at::Tensor& tensor);
  // In place: tensor = rank `root`'s tensor.
  void Broadcast(at::Tensor& tensor, int root);
  void Barrier();

  // Bytes this rank has sent through the group so far.
  int64_t bytes_sent() const { return bytes_sent_; }
  // Of those, the bytes sent to a rank on another node (see above).
  int64_t bytes_between_nodes() const { return bytes_between_nodes_; }
  // Seconds this rank was stalled waiting for the group's collectives, and
  // seconds they were in flight (compat::CommExposedSeconds / CommInFlightSeconds).
  double ExposedSeconds();
  double InFlightSeconds();
  // REQUIRES: not Solo().
  compat::CommGroup& group() { return *group_; }

 private:
  compat::PendingCollective Count(compat::PendingCollective p);

  std::shared_ptr<compat::CommGroup> group_;  // null: Solo()
  bool next_on_other_node_ = false;  // the ring's next rank runs on another node
  int64_t bytes_sent_ = 0;
  int64_t bytes_between_nodes_ = 0;
};

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_COMMUNICATOR_H_

#include "backends/native/distributed/communicator.h"

#include <utility>

namespace protocol {
namespace native {

Communicator::Communicator(std::shared_ptr<compat::CommGroup> group, std::vector<std::string> member_nodes)
    : group_(std::move(group)) {
  const size_t n = member_nodes.size(), r = static_cast<size_t>(rank());
  if (n > 1 && r < n) next_on_other_node_ = member_nodes[(r + 1) % n] != member_nodes[r];
}

std::shared_ptr<Communicator> Communicator::Solo() { return std::make_shared<Communicator>(nullptr); }

int Communicator::size() const { return group_ ? compat::CommGroupSize(*group_) : 1; }
int Communicator::rank() const { return group_ ? compat::CommGroupRank(*group_) : 0; }

compat::PendingCollective Communicator::Count(compat::PendingCollective p) {
  bytes_sent_ += p.bytes();
  if (next_on_other_node_) bytes_between_nodes_ += p.bytes();
  return p;
}

compat::PendingCollective Communicator::AllGatherAsync(at::Tensor& out, const at::Tensor& shard) {
  if (!group_) {  // the concatenation of one shard
    if (!out.is_same(shard)) out.view(-1).copy_(shard.reshape(-1));
    return {};
  }
  return Count(compat::AllGatherFlatAsync(*group_, out, shard));
}

compat::PendingCollective Communicator::ReduceScatterSumAsync(at::Tensor& shard_out, at::Tensor& full) {
  if (!group_) {  // the sum of one tensor, all of it the one slice
    if (!shard_out.is_same(full)) shard_out.view(-1).copy_(full.reshape(-1));
    return {};
  }
  return Count(compat::ReduceScatterSumAsync(*group_, shard_out, full));
}

compat::PendingCollective Communicator::AllReduceSumAsync(at::Tensor& tensor) {
  if (!group_) return {};  // the sum of one tensor is itself
  return Count(compat::AllReduceSumAsync(*group_, tensor));
}

void Communicator::AllGather(at::Tensor& out, const at::Tensor& shard) { AllGatherAsync(out, shard).Wait(); }

void Communicator::ReduceScatterSum(at::Tensor& shard_out, at::Tensor& full) {
  ReduceScatterSumAsync(shard_out, full).Wait();
}

void Communicator::AllReduceSum(at::Tensor& tensor) { AllReduceSumAsync(tensor).Wait(); }

void Communicator::Broadcast(at::Tensor& tensor, int root) {
  if (!group_) return;
  const int64_t sent = compat::Broadcast(*group_, tensor, root);
  bytes_sent_ += sent;
  if (next_on_other_node_) bytes_between_nodes_ += sent;
}

void Communicator::Barrier() {
  if (group_) compat::Barrier(*group_);
}

double Communicator::ExposedSeconds() { return group_ ? compat::CommExposedSeconds(*group_) : 0; }
double Communicator::InFlightSeconds() { return group_ ? compat::CommInFlightSeconds(*group_) : 0; }

}  // namespace native
}  // namespace protocol

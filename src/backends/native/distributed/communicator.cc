#include "backends/native/distributed/communicator.h"

#include <utility>

namespace protocol {
namespace native {

Communicator::Communicator(std::shared_ptr<compat::CommGroup> group, std::vector<std::string> member_nodes)
    : group_(std::move(group)) {
  const size_t n = member_nodes.size(), r = static_cast<size_t>(rank());
  if (n > 1 && r < n) next_on_other_node_ = member_nodes[(r + 1) % n] != member_nodes[r];
}

int Communicator::size() const { return compat::CommGroupSize(*group_); }
int Communicator::rank() const { return compat::CommGroupRank(*group_); }

compat::PendingCollective Communicator::Count(compat::PendingCollective p) {
  bytes_sent_ += p.bytes();
  if (next_on_other_node_) bytes_between_nodes_ += p.bytes();
  return p;
}

compat::PendingCollective Communicator::AllGatherAsync(at::Tensor& out, const at::Tensor& shard) {
  return Count(compat::AllGatherFlatAsync(*group_, out, shard));
}

compat::PendingCollective Communicator::ReduceScatterSumAsync(at::Tensor& shard_out, at::Tensor& full) {
  return Count(compat::ReduceScatterSumAsync(*group_, shard_out, full));
}

compat::PendingCollective Communicator::AllReduceSumAsync(at::Tensor& tensor) {
  return Count(compat::AllReduceSumAsync(*group_, tensor));
}

void Communicator::AllGather(at::Tensor& out, const at::Tensor& shard) { AllGatherAsync(out, shard).Wait(); }

void Communicator::ReduceScatterSum(at::Tensor& shard_out, at::Tensor& full) {
  ReduceScatterSumAsync(shard_out, full).Wait();
}

void Communicator::AllReduceSum(at::Tensor& tensor) { AllReduceSumAsync(tensor).Wait(); }

void Communicator::Broadcast(at::Tensor& tensor, int root) {
  const int64_t sent = compat::Broadcast(*group_, tensor, root);
  bytes_sent_ += sent;
  if (next_on_other_node_) bytes_between_nodes_ += sent;
}

void Communicator::Barrier() { compat::Barrier(*group_); }

double Communicator::ExposedSeconds() { return compat::CommExposedSeconds(*group_); }
double Communicator::InFlightSeconds() { return compat::CommInFlightSeconds(*group_); }

}  // namespace native
}  // namespace protocol

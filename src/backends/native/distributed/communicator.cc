#include "backends/native/distributed/communicator.h"

#include <utility>

namespace protocol {
namespace native {

Communicator::Communicator(std::shared_ptr<compat::CommGroup> group) : group_(std::move(group)) {}

int Communicator::size() const { return compat::CommGroupSize(*group_); }

void Communicator::AllGather(at::Tensor& out, const at::Tensor& shard) {
  bytes_sent_ += compat::AllGatherFlat(*group_, out, shard);
}

void Communicator::ReduceScatterSum(at::Tensor& shard_out, at::Tensor& full) {
  bytes_sent_ += compat::ReduceScatterSum(*group_, shard_out, full);
}

void Communicator::AllReduceSum(at::Tensor& tensor) { bytes_sent_ += compat::AllReduceSum(*group_, tensor); }

void Communicator::Broadcast(at::Tensor& tensor, int root) { bytes_sent_ += compat::Broadcast(*group_, tensor, root); }

void Communicator::Barrier() { compat::Barrier(*group_); }

double Communicator::WaitSeconds() const { return compat::CommWaitSeconds(*group_); }

}  // namespace native
}  // namespace protocol

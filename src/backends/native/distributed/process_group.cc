#include "backends/native/distributed/process_group.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include "runner/base/text.h"

namespace protocol {
namespace native {
namespace {

Result<int> IntVar(const char* name, bool required, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) {
    if (required) return Status::InvalidArgument(fmt::format("the worker needs {} in its environment", name));
    return fallback;
  }
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < 0 || x > (1 << 30))
    return Status::InvalidArgument(fmt::format("{}='{}' is not a non-negative integer", name, v));
  return static_cast<int>(x);
}

}  // namespace

Result<DistEnv> DistEnvFromEnvironment() {
  DistEnv e;
  auto rank = IntVar("RANK", true, 0);
  if (!rank.ok()) return rank.status();
  auto world = IntVar("WORLD_SIZE", true, 1);
  if (!world.ok()) return world.status();
  auto local = IntVar("LOCAL_RANK", false, 0);
  if (!local.ok()) return local.status();
  auto port = IntVar("MASTER_PORT", true, 0);
  if (!port.ok()) return port.status();
  e.rank = *rank;
  e.world = *world;
  e.local_rank = *local;
  e.master_port = *port;
  if (e.world < 1 || e.rank >= e.world)
    return Status::InvalidArgument(fmt::format("RANK {} is not below WORLD_SIZE {}", e.rank, e.world));
  if (const char* a = std::getenv("MASTER_ADDR"); a && *a) e.master_addr = a;
  if (const char* n = std::getenv("PROTOCOL_NODE"); n && *n) e.node = n;
  return e;
}

namespace {

// The nodes of `ranks` (world ranks), in that order.
std::vector<std::string> NodesOf(const GroupsRequest& r, const std::vector<int>& ranks) {
  std::vector<std::string> out;
  for (int rank : ranks) out.push_back(r.rank_nodes.at(static_cast<size_t>(rank)));
  return out;
}

std::vector<int> Range(int first, int count, int stride) {
  std::vector<int> out;
  for (int i = 0; i < count; ++i) out.push_back(first + i * stride);
  return out;
}

}  // namespace

namespace {

// Rank 0 serves the store (on the announced port when master_port is 0); the others join it.
std::shared_ptr<compat::CommStore> ConnectStore(const DistEnv& env, const PortExchange& exchange, double timeout_seconds) {
  const auto ms = static_cast<int64_t>(timeout_seconds * 1000);
  if (env.rank == 0) {
    auto store = compat::CommStoreListen(env.master_addr, env.master_port, env.world, ms);
    if (env.master_port == 0 && exchange.announce) exchange.announce(compat::CommStorePort(*store));
    return store;
  }
  int port = env.master_port;
  if (port == 0) {
    if (!exchange.await) throw std::runtime_error("MASTER_PORT=0 but this rank has no way to learn rank 0's port");
    auto announced = exchange.await(timeout_seconds);
    if (!announced.ok()) throw std::runtime_error(announced.status().message());
    port = *announced;
  }
  return compat::CommStoreJoin(env.master_addr, port, env.world, ms);
}

}  // namespace

ProcessGroups ConnectGroups(const DistEnv& env, const GroupsRequest& request, const PortExchange& exchange) {
  ProcessGroups g;
  const int K = request.group_size;
  g.rank = env.rank;
  g.world = env.world;
  g.groups = request.groups;
  g.group_size = K;
  g.group = env.rank / K;
  g.group_rank = env.rank % K;
  const auto ms = static_cast<int64_t>(request.timeout_seconds * 1000);
  const bool cuda = request.cuda;
  auto store = ConnectStore(env, exchange, request.timeout_seconds);
  auto connect = [&](const std::string& prefix, int rank, const std::vector<int>& members) {
    return std::make_shared<Communicator>(compat::CommGroupCreate(compat::CommStorePrefix(store, prefix), rank,
                                                                  static_cast<int>(members.size()), cuda, ms),
                                          NodesOf(request, members));
  };
  g.world_comm = connect("world/", env.rank, Range(0, env.world, 1));
  // Only the members of a subgroup meet under its prefix.
  g.group_comm = connect(fmt::format("group{}/", g.group), g.group_rank, Range(g.group * K, K, 1));
  g.cross_comm = connect(fmt::format("cross{}/", g.group_rank), g.group, Range(g.group_rank, g.groups, K));
  g.shard_comm = g.group_comm;
  // The group's mesh (sharding.h): S ranks per copy, R copies; this rank
  // holds slice s of copy n. One copy: the shard group is the group.
  const auto first = request.rank_nodes.begin() + static_cast<std::ptrdiff_t>(g.group) * K;
  const Mesh mesh = MeshFor(request.sharding, {first, first + K});
  const int S = mesh.shard, R = mesh.replicas, n = g.group_rank / S, s = g.group_rank % S;
  g.replicas = R;
  if (R > 1) {
    g.shard_comm = connect(fmt::format("shard{}.{}/", g.group, n), s, Range(g.group * K + n * S, S, 1));
    g.replica_comm = connect(fmt::format("replica{}.{}/", g.group, s), n, Range(g.group * K + s, R, S));
  }
  return g;
}

ProcessGroups SoloGroups() {
  ProcessGroups g;
  g.world_comm = Communicator::Solo();
  g.group_comm = g.cross_comm = g.shard_comm = g.world_comm;
  return g;
}

std::vector<Communicator*> ProcessGroups::All() const {
  std::vector<Communicator*> out;
  for (const auto& comm : {world_comm, group_comm, cross_comm, shard_comm, replica_comm})
    if (comm && std::find(out.begin(), out.end(), comm.get()) == out.end()) out.push_back(comm.get());
  return out;
}

int64_t ProcessGroups::bytes_within() const {
  int64_t n = 0;
  for (Communicator* c : All())
    if (c == group_comm.get() || c == shard_comm.get() || c == replica_comm.get()) n += c->bytes_sent();
  return n;
}

int64_t ProcessGroups::bytes_between() const { return cross_comm ? cross_comm->bytes_sent() : 0; }

int64_t ProcessGroups::bytes_between_nodes() const {
  int64_t n = 0;
  for (Communicator* c : All()) n += c->bytes_between_nodes();
  return n;
}

double ProcessGroups::ExposedSeconds() const {
  double total = 0;
  for (Communicator* c : All()) total += c->ExposedSeconds();
  return total;
}

double ProcessGroups::InFlightSeconds() const {
  double total = 0;
  for (Communicator* c : All()) total += c->InFlightSeconds();
  return total;
}

}  // namespace native
}  // namespace protocol

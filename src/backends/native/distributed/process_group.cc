#include "backends/native/distributed/process_group.h"

#include <cstdlib>

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

ProcessGroups ConnectGroups(const DistEnv& env, int groups, int group_size, bool cuda, double timeout_seconds) {
  ProcessGroups g;
  g.rank = env.rank;
  g.world = env.world;
  g.groups = groups;
  g.group_size = group_size;
  g.group = env.rank / group_size;
  g.group_rank = env.rank % group_size;
  const auto ms = static_cast<int64_t>(timeout_seconds * 1000);
  auto store = compat::CommStoreConnect(env.master_addr, env.master_port, env.rank == 0, env.world, ms);
  g.world_comm = std::make_shared<Communicator>(
      compat::CommGroupCreate(compat::CommStorePrefix(store, "world/"), env.rank, env.world, cuda, ms));
  // Only the members of a subgroup meet under its prefix.
  g.group_comm = std::make_shared<Communicator>(compat::CommGroupCreate(
      compat::CommStorePrefix(store, fmt::format("group{}/", g.group)), g.group_rank, group_size, cuda, ms));
  g.cross_comm = std::make_shared<Communicator>(compat::CommGroupCreate(
      compat::CommStorePrefix(store, fmt::format("cross{}/", g.group_rank)), g.group, groups, cuda, ms));
  return g;
}

int64_t ProcessGroups::bytes_within() const { return group_comm ? group_comm->bytes_sent() : 0; }
int64_t ProcessGroups::bytes_between() const { return cross_comm ? cross_comm->bytes_sent() : 0; }

double ProcessGroups::WaitSeconds() const {
  double total = 0;
  for (const auto& comm : {world_comm, group_comm, cross_comm})
    if (comm) total += comm->WaitSeconds();
  return total;
}

}  // namespace native
}  // namespace protocol

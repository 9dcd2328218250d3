// ResolveRunSpec: the one way a run is named on the command line
// (ID | latest | latest:PLAN), and its one style of error.

#include <doctest/doctest.h>

#include <memory>
#include <string>

#include "runner/store/run_spec.h"
#include "runner/store/store.h"

using namespace protocol;

namespace {

std::unique_ptr<Store> Runs(const std::vector<std::pair<std::string, std::string>>& kind_and_plan) {
  auto store = OpenStore(":memory:");
  REQUIRE(store.ok());
  for (const auto& [kind, plan] : kind_and_plan) {
    RunRecord r;
    r.kind = kind;
    r.plan_name = plan;
    REQUIRE((*store)->CreateRun(r).ok());
  }
  return std::move(store).value();
}

std::string Error(Store& store, const std::string& spec) {
  auto id = ResolveRunSpec(store, spec);
  REQUIRE_FALSE(id.ok());
  return id.status().message();
}

}  // namespace

TEST_CASE("run spec: an id, latest (imports are not runs) and latest:PLAN") {
  auto store = Runs({{"run", "nightly"}, {"run", "weekly"}, {"run", "nightly"}, {"import", "published"}});
  CHECK(*ResolveRunSpec(*store, "2") == 2);
  CHECK(*ResolveRunSpec(*store, "4") == 4);  // an import is named by its id
  CHECK(*ResolveRunSpec(*store, "latest") == 3);
  CHECK(*ResolveRunSpec(*store, "latest:nightly") == 3);
  CHECK(*ResolveRunSpec(*store, "latest:weekly") == 2);
}

TEST_CASE("run spec: an unknown run is not found, saying what the database holds") {
  auto store = Runs({{"run", "nightly"}, {"run", "weekly"}, {"import", "published"}});
  CHECK(ResolveRunSpec(*store, "99").status().code() == Status::Code::kNotFound);
  CHECK(Error(*store, "99") == "unknown run '99': the database has runs 1 to 3");
  CHECK(Error(*store, "latest:monthly") == "unknown run 'latest:monthly': no run of plan 'monthly' (plans run: nightly, weekly)");
  CHECK(ResolveRunSpec(*store, "latest:monthly").status().code() == Status::Code::kNotFound);

  auto one = Runs({{"run", "p"}});
  CHECK(Error(*one, "2") == "unknown run '2': the database has run 1 only");

  auto empty = Runs({});
  CHECK(Error(*empty, "1") == "unknown run '1': the database has no runs yet");
  CHECK(Error(*empty, "latest") ==
        "unknown run 'latest': the database has no runs of a plan yet (run one first: protocol run PLAN)");
  auto imports_only = Runs({{"import", "published"}});
  CHECK(Error(*imports_only, "latest") ==
        "unknown run 'latest': the database has no runs of a plan yet (run one first: protocol run PLAN)");
}

TEST_CASE("run spec: text that is no run spec is bad input") {
  auto store = Runs({{"run", "p"}});
  for (const char* bad : {"x", "", "0", "-1", "1.5", "+1", "latest:", "newest", "7x"}) {
    INFO(bad);
    CHECK(ResolveRunSpec(*store, bad).status().code() == Status::Code::kInvalidArgument);
    CHECK(Error(*store, bad) == std::string("'") + bad + "' is not a run: write an id, 'latest' or 'latest:PLAN'");
  }
}

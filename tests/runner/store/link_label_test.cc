// The measured link against its network's label (src/runner/store/link_label.h):
// the 2× rule either way, the texts `run`, `show` and the report use, and the
// line `protocol show` prints.

#include <doctest/doctest.h>

#include "runner/store/export.h"
#include "runner/exec/backend.h"
#include "runner/store/link_label.h"
#include "runner/store/store.h"
#include "store_fixtures.h"

using namespace protocol;

namespace {

// A case's link: `busbw` bytes/s measured (and 85 µs), its network '10G' at 1e10 bit/s.
CaseLink TenG(double busbw) {
  return LinkOfCase({MeasuredFigure(metric::kLinkBusBandwidth, busbw, "bytes/s"),
                     MeasuredFigure(metric::kLinkLatency, 85e-6, "s")},
                    {{fact::kNetwork, "10G"}, {fact::kNetworkRate, "1e+10"}});
}

}  // namespace

TEST_CASE("link label: a case's link is read from its figures and facts") {
  const CaseLink link = TenG(1.17e9);
  CHECK(link.measured());
  CHECK(*link.busbw_bytes_per_second == 1.17e9);
  CHECK(*link.latency_seconds == 85e-6);
  CHECK(link.network == "10G");
  CHECK(*link.nominal_bits_per_second == 1e10);
  CHECK(*link.MeasuredOverNominal() == doctest::Approx(0.936));
  // Nothing measured, or no rate that reads as a positive number: no ratio, no flag.
  const CaseLink unmeasured = LinkOfCase({}, {{fact::kNetwork, "10G"}, {fact::kNetworkRate, "1e+10"}});
  CHECK_FALSE(unmeasured.measured());
  CHECK_FALSE(unmeasured.MeasuredOverNominal());
  CHECK_FALSE(unmeasured.OffLabel());
  for (const char* rate : {"", "fast", "0", "-1e9", "1e10 bits"}) {
    CAPTURE(rate);
    const CaseLink bad =
        LinkOfCase({MeasuredFigure(metric::kLinkBusBandwidth, 1e8, "bytes/s")}, {{fact::kNetworkRate, rate}});
    CHECK_FALSE(bad.nominal_bits_per_second);
    CHECK_FALSE(bad.OffLabel());
  }
  // A figure at another length (a report_as length) is not the case's own.
  Measurement other = MeasuredFigure(metric::kLinkBusBandwidth, 1e8, "bytes/s");
  other.length_unit = "steps";
  other.length_count = 1000;
  CHECK_FALSE(LinkOfCase({other}, {}).measured());
}

TEST_CASE("link label: more than 2x away from the nominal rate either way is flagged, within 2x is not") {
  CHECK(metric::kLinkLabelFactor == 2.0);
  // 1e10 bit/s nominal is 1.25e9 bytes/s.
  CHECK_FALSE(TenG(1.25e9).OffLabel());   // 1x
  CHECK_FALSE(TenG(0.625e9).OffLabel());  // exactly 2x slower: within
  CHECK_FALSE(TenG(2.5e9).OffLabel());    // exactly 2x faster: within
  CHECK_FALSE(TenG(0.7e9).OffLabel());    // 1.8x slower
  CHECK(TenG(0.6e9).OffLabel());          // 2.08x slower
  CHECK(TenG(2.6e9).OffLabel());          // 2.08x faster
  CHECK(TenG(1e8).OffLabel());            // 12.5x slower: a 10G label over a 1 Gbit link
  CHECK(TenG(12.5e9).OffLabel());         // 10x faster: a 10G label over InfiniBand
}

TEST_CASE("link label: the texts of the measured link, beside its label, and run's warning") {
  CHECK(GbitText(9.36e9) == "9.4 Gbit/s");
  CHECK(GbitText(0.8e9) == "0.8 Gbit/s");
  CHECK(GbitText(1e10) == "10 Gbit/s");
  CHECK(GbitText(4e11) == "400 Gbit/s");
  CHECK(LinkText(TenG(1.17e9)) == "1.17 GB/s bus bandwidth (9.4 Gbit/s), latency 85 µs");
  CHECK(LinkText(LinkOfCase({MeasuredFigure(metric::kLinkBusBandwidth, 5e8, "bytes/s")}, {})) ==
        "500 MB/s bus bandwidth (4 Gbit/s)");
  CHECK(LinkText(LinkOfCase({}, {})) == "");
  CHECK(LinkBesideLabel(TenG(1.17e9)) ==
        "1.17 GB/s bus bandwidth (9.4 Gbit/s), latency 85 µs; its network '10G' is nominally 10 Gbit/s");
  CHECK(LinkBesideLabel(TenG(1e8)) ==
        "100 MB/s bus bandwidth (0.8 Gbit/s), latency 85 µs; its network '10G' is nominally 10 Gbit/s; "
        "link ≠ label: 12.5x slower");
  CHECK(LinkLabelWarning(TenG(1e8)) ==
        "link measured 0.8 Gbit/s bus bandwidth, its network '10G' is nominally 10 Gbit/s (12.5x slower)");
  CHECK(LinkLabelWarning(TenG(12.5e9)) ==
        "link measured 100 Gbit/s bus bandwidth, its network '10G' is nominally 10 Gbit/s (10x faster)");
  CHECK(LinkLabelWarning(TenG(1.17e9)) == "");
}

TEST_CASE("link label: protocol show prints a multi-node case's measured link beside its label") {
  auto store = std::move(OpenStore(":memory:")).value();
  const int64_t id = testing::CreateQuickstartRun(*store);
  CaseRecord c = testing::TwoNodeTinyPretrain(id, "r.1", "fsdp");
  c.network = "10G";
  CaseResult ok;
  ok.facts = {{fact::kNetwork, "10G"}, {fact::kNetworkRate, "1e+10"}};
  ok.measurements = {MeasuredFigure(metric::kWallSeconds, 3.25, "s"),
                     MeasuredFigure(metric::kLinkBusBandwidth, 1e8, "bytes/s"),
                     MeasuredFigure(metric::kLinkLatency, 85e-6, "s")};
  REQUIRE(store->FinishCase(*store->BeginCase(c), ok).ok());
  // A case that measured nothing (one node, or training.link_probe: false): no line.
  c.case_id = "r.2";
  CaseResult off;
  off.facts = {{fact::kLinkProbe, "off (training.link_probe: false)"}};
  off.measurements = {MeasuredFigure(metric::kWallSeconds, 1.5, "s")};
  REQUIRE(store->FinishCase(*store->BeginCase(c), off).ok());
  auto text = RenderRunDetails(*store, id, false);
  REQUIRE(text.ok());
  INFO(*text);
  const size_t at = text->find("\n    link  ");
  REQUIRE(at != std::string::npos);
  const std::string line = text->substr(at + 1, text->find('\n', at + 1) - at - 1);
  CHECK(line.find("  100 MB/s bus bandwidth (0.8 Gbit/s), latency 85 µs; its network '10G' is nominally 10 Gbit/s; "
                  "link ≠ label: 12.5x slower") != std::string::npos);
  CHECK(text->find("\n    link  ") == text->rfind("\n    link  "));
  CHECK(text->find("off (training.link_probe: false)") != std::string::npos);
}

// A multi-node cell's link (docs/report.md, "Cells"): the link its case
// measured before the first step is shown beside the network label in the
// cell's tooltip and in the verdict's bytes column; more than 2x away from
// the label's nominal rate either way, the cell is marked ≠ and its verdict
// row carries the caveat `link ≠ label`.

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "report/report_data.h"
#include "report/tables/cells.h"
#include "report_fixtures.h"

namespace protocol {
namespace {

using namespace report_test;

// fsdp and share on 2 nodes over "10G" (fsdp 600 s, share 300 s), each with
// its bytes between nodes; the link each measured: `fsdp_busbw` and
// `share_busbw` bytes/s (0: none measured).
ReportData TwoNodes(double fsdp_busbw, double share_busbw) {
  ReportCaseInput fsdp = TrainCase("f2", "m", "pretrain", "fsdp", 2, "10G", "steps", 100, 600);
  fsdp.measurements.push_back(M(metric::kBytesBetweenNodes, 300.0 * 1024 * 1024, Provenance::kMeasured, "bytes"));
  ReportCaseInput share = TrainCase("s2", "m", "pretrain", "share", 2, "10G", "steps", 100, 300);
  share.measurements.push_back(M(metric::kBytesBetweenNodes, 150.0 * 1024 * 1024, Provenance::kMeasured, "bytes"));
  if (fsdp_busbw > 0) fsdp = WithLink(fsdp, fsdp_busbw);
  if (share_busbw > 0) share = WithLink(share, share_busbw);
  return Compute({RunWith(MakeRun(1), {fsdp, share})});
}

bool HasCaveat(const VerdictLine& v, const std::string& tag) {
  return std::find(v.caveats.begin(), v.caveats.end(), tag) != v.caveats.end();
}

}  // namespace

TEST_CASE("report link: a link more than 2x off its label marks the cell, its tooltip and its verdict row") {
  // fsdp measured 1.17 GB/s (9.4 Gbit/s) on its 10G label; share 100 MB/s (0.8 Gbit/s): 12.5x slower.
  ReportData data = TwoNodes(1.17e9, 1e8);
  const ModelReport& m = data.models.at(0);
  const ReportTable* t = FindTable(m, "training");
  REQUIRE(t);
  REQUIRE(t->rows.size() == 1);
  const ReportCell& fsdp = t->rows[0].cells[0];
  const ReportCell& share = t->rows[0].cells[1];
  // Every multi-node cell that measured its link says it beside the label; the one off it is marked.
  CHECK(fsdp.text == "10.0");
  CHECK_FALSE(fsdp.link_off_label);
  CHECK(fsdp.origin == "run 1, case f2 (measured: 10.0 min); link: 1.17 GB/s bus bandwidth (9.4 Gbit/s), latency "
                       "85 µs; its network '10G' is nominally 10 Gbit/s");
  CHECK(share.text == std::string("5.0 ") + kLinkOffLabelMark);
  CHECK(share.link_off_label);
  CHECK(share.origin == "run 1, case s2 (measured: 5.0 min); link: 100 MB/s bus bandwidth (0.8 Gbit/s), latency 85 "
                        "µs; its network '10G' is nominally 10 Gbit/s; link ≠ label: 12.5x slower");
  // The verdict row: the measured rate beside each label in the bytes column, and the caveat with its legend.
  REQUIRE(m.verdict.size() == 1);
  const VerdictLine& v = m.verdict[0];
  CHECK(v.bytes_between_nodes ==
        "150.00 MiB (10G, measured 0.8 Gbit/s: link ≠ label) vs 300.00 MiB (10G, measured 9.4 Gbit/s)");
  CHECK(HasCaveat(v, "link ≠ label"));
  CHECK(v.conclusion.find("a side's link measured more than 2× away from its network's label, so the label does "
                          "not say what it ran on") != std::string::npos);
  const bool in_legend = std::any_of(m.verdict_legend.begin(), m.verdict_legend.end(), [](const LegendEntry& e) {
    return e.tag == "link ≠ label" && e.meaning.find("marked ≠ in the tables") != std::string::npos;
  });
  CHECK(in_legend);
}

TEST_CASE("report link: a link within 2x of its label, faster or slower, is shown and not tagged") {
  for (double busbw : {0.7e9, 2.5e9}) {  // 5.6 Gbit/s (1.8x slower), 20 Gbit/s (exactly 2x faster)
    CAPTURE(busbw);
    ReportData data = TwoNodes(1.17e9, busbw);
    const ModelReport& m = data.models.at(0);
    const ReportCell& share = FindTable(m, "training")->rows[0].cells[1];
    CHECK(share.text == "5.0");
    CHECK_FALSE(share.link_off_label);
    CHECK(share.origin.find("; link: ") != std::string::npos);
    CHECK(share.origin.find("link ≠ label") == std::string::npos);
    REQUIRE(m.verdict.size() == 1);
    CHECK_FALSE(HasCaveat(m.verdict[0], "link ≠ label"));
    CHECK(m.verdict[0].bytes_between_nodes.find("link ≠ label") == std::string::npos);
  }
  // 10x faster than the label (InfiniBand under a 10G label) is off it too.
  ReportData fast = TwoNodes(1.17e9, 12.5e9);
  CHECK(FindTable(fast.models.at(0), "training")->rows[0].cells[1].link_off_label);
}

TEST_CASE("report link: cells whose cases measured no link read as before") {
  ReportData data = TwoNodes(0, 0);
  const ModelReport& m = data.models.at(0);
  const ReportCell& share = FindTable(m, "training")->rows[0].cells[1];
  CHECK(share.text == "5.0");
  CHECK(share.origin == "run 1, case s2 (measured: 5.0 min)");
  REQUIRE(m.verdict.size() == 1);
  CHECK(m.verdict[0].bytes_between_nodes == "150.00 MiB vs 300.00 MiB");
  // One side measured: only its rate is shown.
  ReportData one = TwoNodes(1.17e9, 0);
  CHECK(one.models.at(0).verdict.at(0).bytes_between_nodes == "150.00 MiB vs 300.00 MiB (10G, measured 9.4 Gbit/s)");
}

}  // namespace protocol

#ifndef PROTOCOL_RUNNER_STORE_LINK_LABEL_H_
#define PROTOCOL_RUNNER_STORE_LINK_LABEL_H_

// A multi-node case's link as its ranks measured it before the first step
// (metric::kLinkBusBandwidth, metric::kLinkLatency: the all-reduce bus
// bandwidth as nccl-tests defines it, docs/distributed.md) against what its
// network label promises (fact::kNetwork, fact::kNetworkRate). A measured bus
// bandwidth, in bits per second, more than metric::kLinkLabelFactor away from
// the nominal rate either way means the label does not say what the case ran
// on: `protocol run` warns, `protocol show` says so and the report tags the
// cell "link ≠ label". One definition for the three.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runner/store/records.h"

namespace protocol {

struct CaseLink {
  std::optional<double> busbw_bytes_per_second;   // measured; absent when not
  std::optional<double> latency_seconds;          // measured; absent when not
  std::string network;                            // the label, "10G"; "" when none is stored
  std::optional<double> nominal_bits_per_second;  // the label's rate; absent when none is stored

  bool measured() const { return busbw_bytes_per_second.has_value(); }
  // Measured bits per second over the nominal rate; nullopt without both (or a nominal 0).
  std::optional<double> MeasuredOverNominal() const;
  // Whether both are known and differ by more than metric::kLinkLabelFactor
  // either way (a ratio of exactly the factor is within).
  bool OffLabel() const;
};

// The link of one case from its figures (at the case's own length) and facts.
// A nominal rate that does not read as a positive number is taken as absent.
CaseLink LinkOfCase(const std::vector<Measurement>& measurements,
                    const std::vector<std::pair<std::string, std::string>>& facts);

// "9.4 Gbit/s", "0.8 Gbit/s", "10 Gbit/s", "400 Gbit/s": bits per second in
// Gbit/s, two significant digits (whole numbers from 10 on).
std::string GbitText(double bits_per_second);

// What was measured: "1.17 GB/s bus bandwidth (9.4 Gbit/s), latency 85 µs";
// the latency part left out when it was not stored; "" when nothing was measured.
std::string LinkText(const CaseLink& link);

// The measured link beside its label, for a tooltip or `show`: "1.17 GB/s bus
// bandwidth (9.4 Gbit/s), latency 85 µs; its network '10G' is nominally 10
// Gbit/s", ending "; link ≠ label: 12.5x slower" when OffLabel(). Without a
// label or its rate, LinkText alone; "" when nothing was measured.
std::string LinkBesideLabel(const CaseLink& link);

// `protocol run`'s warning for a case whose link is off its label: "link
// measured 0.8 Gbit/s bus bandwidth, its network '10G' is nominally 10
// Gbit/s (12.5x slower)". "" when !OffLabel().
std::string LinkLabelWarning(const CaseLink& link);

// "12.5x slower", "3.1x faster": the measured rate against the nominal one.
// REQUIRES: MeasuredOverNominal().
std::string LinkLabelRatioText(const CaseLink& link);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_STORE_LINK_LABEL_H_

#ifndef PROTOCOL_REPORT_FORMATS_NUMBERS_H_
#define PROTOCOL_REPORT_FORMATS_NUMBERS_H_

// Number formats of every report output (docs/report.md, "Formats of
// numbers"). CSV and JSON values keep full precision; these are the texts.
// One rule:
//   * a figure (a measured, extrapolated or imported value, or one derived
//     from them) has its quantity's decimals, below; when its magnitude is
//     below 1 it gets as many more as keep 3 significant digits (at most 12),
//     so that a small measured figure never reads 0.0;
//   * a ratio (efficiency coefficient, scaling efficiency) has 2 decimals,
//     never more; its percentage is ratio × 100 as an integer;
//   * every rounding is half away from zero (3.125 → 3.13, 0.25 → 0.3).

#include <string>

namespace protocol {

// A figure with `decimals` decimals, by the rule above: "12.1", "0.0123".
std::string FormatDecimals(double v, int decimals);

std::string FormatMinutes(double minutes);       // "12.1"
std::string FormatSeconds(double seconds);       // "12.1"
std::string FormatSecondsPerToken(double s);     // "0.0525"
std::string FormatTokensPerSecond(double t);     // "19.05"
std::string FormatLoss(double loss);             // "2.9500"
std::string FormatGiB(double bytes);             // bytes / 2^30: "1.50"
// Human units, binary: "512 B", "1.50 KiB", "3.25 MiB", "1.00 GiB" (GiB and up stay GiB).
std::string FormatBinaryBytes(double bytes);
std::string FormatOne(double v);                 // "350.5"
std::string FormatTwo(double v);                 // "3.50"
std::string FormatMfu(double fraction);          // fraction × 100: "42.0"
std::string FormatCount(double v);               // "3"
std::string FormatRequestSeconds(double s);      // one request's time: "1.234"
// A relative difference in percent, signed: "+5.08 %", "-0.866 %", "0.0 %".
std::string FormatSignedPercent(double percent);
std::string FormatRatio(double ratio);           // "3.21"
std::string FormatPercent(double ratio);         // "321" (ratio × 100, rounded)

}  // namespace protocol

#endif  // PROTOCOL_REPORT_FORMATS_NUMBERS_H_

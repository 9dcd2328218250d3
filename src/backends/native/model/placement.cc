#include "backends/native/model/placement.h"

#include <algorithm>

namespace protocol {
namespace native {

LayerPlacement place_layers_balanced(const std::vector<int64_t>& layer_bytes, int devices, int64_t embed_bytes,
                                     int64_t head_bytes) {
  LayerPlacement p;
  const int L = static_cast<int>(layer_bytes.size());
  const int D = std::max(1, std::min(devices, std::max(1, L)));
  p.devices = D;
  p.embed_device = 0;
  p.head_device = D - 1;
  // The line of bytes, in long double so that a 70B model's 10^11 bytes times D stay exact enough.
  long double total = static_cast<long double>(embed_bytes) + static_cast<long double>(head_bytes);
  for (int64_t b : layer_bytes) total += static_cast<long double>(b);
  long double before = static_cast<long double>(embed_bytes);
  p.layer_device.resize(static_cast<size_t>(L));
  for (int i = 0; i < L; ++i) {
    const long double b = static_cast<long double>(layer_bytes[static_cast<size_t>(i)]);
    const long double mid = before + b / 2;
    int d = total > 0 ? static_cast<int>(mid * D / total) : static_cast<int>(static_cast<long double>(i) * D / L);
    d = std::min(D - 1, std::max(0, d));
    p.layer_device[static_cast<size_t>(i)] = d;
    before += b;
  }
  // Non-decreasing: the midpoints increase along the model.
  p.device_bytes.assign(static_cast<size_t>(D), 0);
  p.device_layers.assign(static_cast<size_t>(D), 0);
  p.device_bytes[0] += embed_bytes;
  p.device_bytes[static_cast<size_t>(D - 1)] += head_bytes;
  for (int i = 0; i < L; ++i) {
    const size_t d = static_cast<size_t>(p.layer_device[static_cast<size_t>(i)]);
    p.device_bytes[d] += layer_bytes[static_cast<size_t>(i)];
    ++p.device_layers[d];
  }
  return p;
}

}  // namespace native
}  // namespace protocol

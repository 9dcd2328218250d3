// Balanced layer placement (placement.h): whole layers, in order, about equal
// bytes per device, the embedding on the first device and the head on the last.
#include <doctest/doctest.h>

#include <cstddef>

#include "backends/native/model/placement.h"

namespace protocol {
namespace native {

TEST_CASE("placement: 80 equal layers on 8 devices are 10 each") {
  LayerPlacement p = place_layers_balanced(std::vector<int64_t>(80, 100), 8);
  CHECK(p.devices == 8);
  CHECK(p.device_layers == std::vector<int>(8, 10));
  CHECK(p.device_bytes == std::vector<int64_t>(8, 1000));
  for (int i = 0; i < 80; ++i) CHECK(p.layer_device[static_cast<std::size_t>(i)] == i / 10);
  CHECK(p.embed_device == 0);
  CHECK(p.head_device == 7);
  // Llama-2-70B's shape in bf16: 80 layers of 1,711,276,032 bytes, embedding 524,288,000,
  // head 524,304,384: still 10 layers per device.
  LayerPlacement big = place_layers_balanced(std::vector<int64_t>(80, 1711276032), 8, 524288000, 524304384);
  CHECK(big.device_layers == std::vector<int>(8, 10));
  CHECK(big.device_bytes[0] == 10 * int64_t{1711276032} + 524288000);
  CHECK(big.device_bytes[7] == 10 * int64_t{1711276032} + 524304384);
}

TEST_CASE("placement: unequal layer sizes follow the bytes, not the count") {
  // Bytes 1,1,1,1,4,4 (total 12) on 3 devices: shares [0,4) [4,8) [8,12); midpoints
  // 0.5, 1.5, 2.5, 3.5 | 6 | 10.
  LayerPlacement p = place_layers_balanced({1, 1, 1, 1, 4, 4}, 3);
  CHECK(p.layer_device == std::vector<int>{0, 0, 0, 0, 1, 2});
  CHECK(p.device_bytes == std::vector<int64_t>{4, 4, 4});
  CHECK(p.device_layers == std::vector<int>{4, 1, 1});
  // The embedding and the head take their place on the line: E = 3 moves the first
  // layers' midpoints to 3.5.. of a total 18, shares of 6.
  LayerPlacement q = place_layers_balanced({1, 1, 1, 1, 4, 4}, 3, 3, 3);
  CHECK(q.layer_device == std::vector<int>{0, 0, 0, 1, 1, 2});
  CHECK(q.device_bytes == std::vector<int64_t>{6, 5, 7});
  // Layers stay in order and no device exceeds S/D' + the largest layer.
  const std::vector<int64_t> sizes = {5, 1, 9, 2, 2, 7, 3, 3, 8, 1, 1, 6};
  for (int d = 1; d <= 12; ++d) {
    CAPTURE(d);
    LayerPlacement r = place_layers_balanced(sizes, d, 4, 4);
    int64_t total = 8;
    for (int64_t s : sizes) total += s;
    for (std::size_t i = 1; i < sizes.size(); ++i) CHECK(r.layer_device[i] >= r.layer_device[i - 1]);
    for (int64_t b : r.device_bytes) CHECK(b * d <= total + 9 * d);
  }
}

TEST_CASE("placement: more devices than layers use one device per layer; one device takes all") {
  LayerPlacement p = place_layers_balanced({10, 10, 10}, 8, 1, 1);
  CHECK(p.devices == 3);
  CHECK(p.layer_device == std::vector<int>{0, 1, 2});
  CHECK(p.head_device == 2);
  CHECK(p.device_bytes == std::vector<int64_t>{11, 10, 11});
  LayerPlacement one = place_layers_balanced({10, 20, 30}, 1, 5, 6);
  CHECK(one.devices == 1);
  CHECK(one.layer_device == std::vector<int>{0, 0, 0});
  CHECK(one.device_bytes == std::vector<int64_t>{71});
  CHECK(one.head_device == 0);
}

}  // namespace native
}  // namespace protocol

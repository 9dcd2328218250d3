#ifndef PROTOCOL_BACKENDS_NATIVE_MODEL_PLACEMENT_H_
#define PROTOCOL_BACKENDS_NATIVE_MODEL_PLACEMENT_H_

// Balanced placement of a model's decoder layers over the devices of one
// process ("model spread over all GPUs"), the rule of accelerate's
// infer_auto_device_map with a balanced max_memory: no layer is split, the
// layers stay in order (device indices never decrease along the model), every
// device gets about the same bytes, the embedding sits on the first device and
// the final norm + lm_head on the last one used.
//
// The rule (pure arithmetic, no libtorch, so `protocol validate` can print the
// placement and the memory estimate of a plan):
//
//   D' = min(D, L) devices are used (more devices than layers: the last
//        D − L devices get nothing).
//   The model is a line of bytes: the embedding E, then layer 0 .. L−1 of
//   b_0 .. b_{L−1} bytes, then the head H; total S = E + Σb + H.
//   Layer i sits on the device whose equal share of that line holds the
//   layer's midpoint:
//        m_i = E + b_0 + … + b_{i−1} + b_i / 2
//        device(i) = min(D' − 1, floor(m_i · D' / S))
//
// Bound: a device holds at most S/D' + max_i b_i bytes (its share of
// the line plus half a layer at each end). Equal layers spread evenly (80 on
// 8 devices with E = H: 10 each); a layer much larger than the others may
// leave a device between two others without a layer (it then holds nothing).

#include <cstdint>
#include <vector>

namespace protocol {
namespace native {

struct LayerPlacement {
  int devices = 1;                // D' (devices used)
  std::vector<int> layer_device;  // per decoder layer, 0 .. D'−1, non-decreasing
  int embed_device = 0;           // always 0
  int head_device = 0;            // D' − 1
  // Bytes on each used device (embedding and head included), from the sizes given.
  std::vector<int64_t> device_bytes;
  // Decoder layers on each used device.
  std::vector<int> device_layers;
};

// REQUIRES: devices >= 1, layer_bytes non-empty, every size >= 0.
// embed_bytes / head_bytes: what the first / last device holds besides layers.
LayerPlacement place_layers_balanced(const std::vector<int64_t>& layer_bytes, int devices, int64_t embed_bytes = 0,
                                     int64_t head_bytes = 0);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_MODEL_PLACEMENT_H_

#ifndef PROTOCOL_BACKENDS_NATIVE_CASE_HELD_MODEL_H_
#define PROTOCOL_BACKENDS_NATIVE_CASE_HELD_MODEL_H_

// The model a training case holds, behind one small interface, so that one
// loop (case_training.h) trains every kind the same way:
//
//   kind      held where                            trained               built when
//   whole     the model and AdamW in this process   every parameter       a mesh of one rank
//   sharded   FSDP's float32 slices (fsdp_sharded.h) this rank's slices   more than one rank
//   qlora     a frozen 4-bit base under LoRA        the adapters          a 4-bit model: whole
//             adapters (quantized_model.h, or the                         (one rank) or sharded
//             sharded base of fsdp_qlora.h)
//
// One rank holds the model whole, as FSDP2 with world_size 1 computes
// unsharded: same arithmetic, no flat copies.

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/native/case/case_setup.h"
#include "backends/native/distributed/process_group.h"
#include "backends/native/launch/worker_case.h"
#include "backends/native/quant/lora.h"
#include "backends/native/training/train.h"
#include "runner/base/status.h"

namespace protocol {
namespace native {

class HeldModel {
 public:
  virtual ~HeldModel() = default;
  // Logits (B,T,V) in the compute dtype for tokens (B,T); in grad mode the
  // layers training.checkpoint_every names are recomputed in backward.
  virtual at::Tensor Forward(const at::Tensor& tokens) = 0;
  // Whether the next backward completes the step's gradients (sharded: its
  // last micro-batch reduces them over the group). Whole: nothing to do.
  virtual void SetGradientSync(bool on) = 0;
  // After the step's backward passes: clip to training's grad_clip and take
  // an AdamW step at `lr`. Returns the global gradient norm before clipping,
  // a float64 scalar tensor on the device (nothing is read back).
  virtual at::Tensor Update(double lr) = 0;
  // What a merge of the groups averages (outer_step.h): this rank's float32
  // parameter slices, or the trained adapters.
  virtual std::vector<at::Tensor> MergedTensors() = 0;
  // Saves the whole model as model_save does (sharded: a collective of the
  // group; the rank with `writer` writes). Not for a qlora model (its
  // adapters are what is saved).
  virtual Status SaveModel(const std::string& dir, bool writer) = 0;
  // The adapters the forward adds from now on (a merged stack, qlora only).
  virtual void UseAdapters(std::shared_ptr<LoraAdapters> lora) = 0;

  // qlora: the adapters being trained; null otherwise.
  const std::shared_ptr<LoraAdapters>& adapters() const { return lora_; }
  // What the process holds, for its memory figures' method text.
  const std::string& memory_text() const { return memory_text_; }

 protected:
  std::shared_ptr<LoraAdapters> lora_;
  std::string memory_text_;
};

// Builds the case's model for this process of the mesh `g`, with the case's
// weights (case_weights.h: the path's, or a seeded random start), and adds to
// `setup` the note of what ran (declared random weights, the QLoRA method).
// `log`: one line per step of the build (where the weights came from, the
// 4-bit bytes). Every rank of the mesh calls it (a sharded build issues
// collectives). Errors: no weights to load, a file that cannot be read, a
// hybrid layout that does not fit.
Result<std::unique_ptr<HeldModel>> HoldModel(const WorkerCase& wc, CaseSetup& setup, ProcessGroups& g,
                                             const TrainOptions& options,
                                             const std::function<void(const std::string&)>& log);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_CASE_HELD_MODEL_H_

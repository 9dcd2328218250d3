#include "backends/native/lora.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "backends/native/safetensors.h"
#include "runner/base/json.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {
namespace {
namespace fs = std::filesystem;

constexpr Projection kAll[kProjectionCount] = {Projection::kQ,    Projection::kK,  Projection::kV,   Projection::kO,
                                               Projection::kGate, Projection::kUp, Projection::kDown};

// "self_attn.q_proj" -> "q_proj" (PEFT's target_modules names).
std::string module_leaf(Projection p) {
  const std::string full = projection_module(p);
  return full.substr(full.find('.') + 1);
}

}  // namespace

std::array<int64_t, 2> projection_shape(const ModelConfig& c, Projection p) {
  const int64_t C = c.dim, F = c.hidden_dim, Q = c.n_heads * c.HeadDim(), KV = c.n_kv_heads * c.HeadDim();
  switch (p) {
    case Projection::kQ: return {Q, C};
    case Projection::kK: return {KV, C};
    case Projection::kV: return {KV, C};
    case Projection::kO: return {C, Q};
    case Projection::kGate: return {F, C};
    case Projection::kUp: return {F, C};
    case Projection::kDown: break;
  }
  return {C, F};
}

LoraAdapters lora_create(const ModelConfig& config, int64_t rank, double alpha, uint64_t seed,
                         const at::Device& device) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::NoGradGuard no_grad;
  LoraAdapters lora;
  lora.rank = rank;
  lora.alpha = alpha;
  lora.layers.resize(static_cast<size_t>(config.n_layers));
  for (auto& layer : lora.layers) {
    for (Projection p : kAll) {
      const auto [out, in] = projection_shape(config, p);
      const double bound = 1.0 / std::sqrt(static_cast<double>(in));  // kaiming_uniform_(a=√5)
      LoraAdapter& ad = layer[static_cast<size_t>(p)];
      ad.a = at::empty({rank, in}, at::kFloat).uniform_(-bound, bound, gen).to(device);
      ad.b = at::zeros({out, rank}, at::TensorOptions().dtype(at::kFloat).device(device));
    }
  }
  return lora;
}

at::Tensor lora_forward(const LoraAdapters& lora, size_t layer, Projection p, const at::Tensor& x) {
  const LoraAdapter& ad = lora.layers[layer][static_cast<size_t>(p)];
  at::Tensor y = at::linear(at::linear(x.to(ad.a.scalar_type()), ad.a), ad.b) * lora.scale();
  return y.to(x.scalar_type());
}

std::vector<NamedParameter> lora_parameters(LoraAdapters& lora) {
  std::vector<NamedParameter> out;
  for (size_t i = 0; i < lora.layers.size(); ++i) {
    for (Projection p : kAll) {
      LoraAdapter& ad = lora.layers[i][static_cast<size_t>(p)];
      const std::string prefix =
          "base_model.model.model.layers." + std::to_string(i) + "." + projection_module(p) + ".";
      out.push_back({prefix + "lora_A.weight", &ad.a, ad.a.sizes().vec()});
      out.push_back({prefix + "lora_B.weight", &ad.b, ad.b.sizes().vec()});
    }
  }
  return out;
}

std::vector<at::Tensor> lora_trainable(LoraAdapters& lora) {
  std::vector<at::Tensor> out;
  for (NamedParameter& p : lora_parameters(lora)) {
    p.tensor->requires_grad_(true);
    out.push_back(*p.tensor);
  }
  return out;
}

int64_t lora_parameter_count(const ModelConfig& config, int64_t rank) {
  int64_t per_layer = 0;
  for (Projection p : kAll) {
    const auto [out, in] = projection_shape(config, p);
    per_layer += rank * (in + out);
  }
  return config.n_layers * per_layer;
}

Status lora_save(LoraAdapters& lora, const std::string& dir, const std::string& base_model) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IoError(fmt::format("{}: cannot create directory: {}", dir, ec.message()));
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (NamedParameter& p : lora_parameters(lora))
    tensors.emplace_back(p.name, p.tensor->detach().to(at::kCPU, at::kFloat));
  Status s = safetensors_save((fs::path(dir) / "adapter_model.safetensors").string(), tensors);
  if (!s.ok()) return s;
  Json targets = Json::array();
  for (Projection p : kAll) targets.push_back(module_leaf(p));
  Json config;
  config["peft_type"] = "LORA";
  config["task_type"] = "CAUSAL_LM";
  config["base_model_name_or_path"] = base_model;
  config["r"] = lora.rank;
  config["lora_alpha"] = lora.alpha;
  config["lora_dropout"] = 0.0;
  config["bias"] = "none";
  config["target_modules"] = targets;
  config["inference_mode"] = true;
  const std::string path = (fs::path(dir) / "adapter_config.json").string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << config.dump(2) << '\n';
  out.close();
  if (!out) return Status::IoError(fmt::format("{}: cannot write", path));
  return Status::Ok();
}

}  // namespace native
}  // namespace protocol

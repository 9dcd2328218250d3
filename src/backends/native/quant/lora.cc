#include "backends/native/quant/lora.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cerrno>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <c10/core/GradMode.h>

#include "backends/native/model/safetensors.h"
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
  c10::NoGradGuard no_grad;
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
  // The adapters are cast to x's dtype (no copy when they are in it already), as
  // autocast runs float32 weights in a bf16 step: x is neither widened nor
  // copied, and autograd keeps x itself (shared with the base projection's
  // input) and x·Aᵀ, not a float32 copy of x. The casts' backward returns the
  // gradients to the float32 adapters.
  const at::ScalarType dtype = x.scalar_type();
  // Scaled in place: the product's backward does not need it, and the step keeps one output, not two.
  return at::linear(at::linear(x, ad.a.to(dtype)), ad.b.to(dtype)).mul_(lora.scale());
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

at::Tensor lora_flatten(LoraAdapters& lora) {
  c10::NoGradGuard no_grad;
  std::vector<at::Tensor> parts;
  for (const NamedParameter& p : lora_parameters(lora)) parts.push_back(p.tensor->detach().reshape({-1}).to(at::kFloat));
  return at::cat(parts);
}

LoraAdapters lora_unflatten(LoraAdapters& like, const at::Tensor& flat) {
  c10::NoGradGuard no_grad;
  LoraAdapters out;
  out.rank = like.rank;
  out.alpha = like.alpha;
  out.layers.resize(like.layers.size());
  int64_t offset = 0;
  for (size_t i = 0; i < like.layers.size(); ++i) {
    for (size_t p = 0; p < like.layers[i].size(); ++p) {
      for (auto field : {&LoraAdapter::a, &LoraAdapter::b}) {
        const at::Tensor& shape_of = like.layers[i][p].*field;
        out.layers[i][p].*field = flat.narrow(0, offset, shape_of.numel()).view(shape_of.sizes()).to(at::kFloat).clone();
        offset += shape_of.numel();
      }
    }
  }
  return out;
}

std::vector<at::Tensor> lora_trainable(LoraAdapters& lora, bool freeze_a) {
  std::vector<at::Tensor> out;
  for (auto& layer : lora.layers) {
    for (LoraAdapter& ad : layer) {
      ad.a.requires_grad_(!freeze_a);
      ad.b.requires_grad_(true);
      if (!freeze_a) out.push_back(ad.a);
      out.push_back(ad.b);
    }
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

int64_t lora_adapter_bytes(const ModelConfig& config, int64_t rank) {
  return static_cast<int64_t>(sizeof(float)) * lora_parameter_count(config, rank);
}

int64_t lora_b_bytes(const ModelConfig& config, int64_t rank) {
  int64_t outs = 0;
  for (Projection p : kAll) outs += projection_shape(config, p)[0];
  return static_cast<int64_t>(sizeof(float)) * config.n_layers * rank * outs;
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
  if (!out) return Status::IoError(CannotWrite(path, errno));
  return Status::Ok();
}

}  // namespace native
}  // namespace protocol

namespace protocol {
namespace native {
namespace {

// The stored value of `key` in a parsed adapter_config.json, or null.
const Json* Key(const Json& config, const char* key) {
  auto it = config.find(key);
  return it == config.end() ? nullptr : &*it;
}

Status SameShape(const std::vector<const LoraAdapters*>& groups) {
  if (groups.empty()) return Status::InvalidArgument("no adapters to merge");
  const LoraAdapters& first = *groups[0];
  for (size_t g = 1; g < groups.size(); ++g) {
    const LoraAdapters& other = *groups[g];
    if (other.rank != first.rank || other.alpha != first.alpha || other.layers.size() != first.layers.size())
      return Status::InvalidArgument(
          fmt::format("adapters of group {} (rank {}, alpha {}, {} layers) differ from group 0's (rank {}, alpha {}, {} layers)",
                      g, other.rank, other.alpha, other.layers.size(), first.rank, first.alpha, first.layers.size()));
  }
  return Status::Ok();
}

}  // namespace

Result<LoraAdapters> lora_load(const std::string& dir, const ModelConfig& config, const at::Device& device) {
  const std::string config_path = (fs::path(dir) / "adapter_config.json").string();
  auto text = ReadFileText(config_path);
  if (!text.ok()) {
    const std::string msg = fmt::format("{}: cannot read the adapter config: {}", config_path, text.status().message());
    return text.status().code() == Status::Code::kNotFound ? Status::NotFound(msg) : Status::IoError(msg);
  }
  Json json;
  try {
    json = Json::parse(*text);
  } catch (const std::exception& e) {
    return Status::Corruption(fmt::format("{}: not JSON: {}", config_path, e.what()));
  }
  if (!json.is_object()) return Status::Corruption(fmt::format("{}: not a JSON object", config_path));
  const Json* type = Key(json, "peft_type");
  if (type == nullptr || !type->is_string() || type->get<std::string>() != "LORA")
    return Status::InvalidArgument(fmt::format("{}: peft_type is not \"LORA\"", config_path));
  const Json* r = Key(json, "r");
  const Json* alpha = Key(json, "lora_alpha");
  if (r == nullptr || !r->is_number_integer() || r->get<int64_t>() < 1)
    return Status::InvalidArgument(fmt::format("{}: r must be an integer >= 1", config_path));
  if (alpha == nullptr || !alpha->is_number() || alpha->get<double>() <= 0)
    return Status::InvalidArgument(fmt::format("{}: lora_alpha must be a number > 0", config_path));
  if (const Json* rs = Key(json, "use_rslora"); rs != nullptr && rs->is_boolean() && rs->get<bool>())
    return Status::InvalidArgument(
        fmt::format("{}: use_rslora (scale alpha/sqrt(r)) is not supported: adapters here scale by alpha/r", config_path));
  const Json* targets = Key(json, "target_modules");
  for (Projection p : kAll) {
    bool found = false;
    if (targets != nullptr && targets->is_array())
      for (const Json& t : *targets) found = found || (t.is_string() && t.get<std::string>() == module_leaf(p));
    if (!found)
      return Status::InvalidArgument(
          fmt::format("{}: target_modules lacks '{}': adapters on all seven projections are needed", config_path, module_leaf(p)));
  }

  const std::string weights_path = (fs::path(dir) / "adapter_model.safetensors").string();
  auto file = SafetensorsFile::Open(weights_path);
  if (!file.ok()) return file.status();
  LoraAdapters lora;
  lora.rank = r->get<int64_t>();
  lora.alpha = alpha->get<double>();
  lora.layers.resize(static_cast<size_t>(config.n_layers));
  std::vector<NamedParameter> params = lora_parameters(lora);
  size_t i = 0;
  for (size_t layer = 0; layer < lora.layers.size(); ++layer) {
    for (Projection p : kAll) {
      const auto [out, in] = projection_shape(config, p);
      for (const std::vector<int64_t>& shape : {std::vector<int64_t>{lora.rank, in}, std::vector<int64_t>{out, lora.rank}}) {
        NamedParameter& np = params[i++];
        auto view = (*file)->View(np.name);
        if (!view.ok()) return view.status();
        if (view->sizes().vec() != shape)
          return Status::InvalidArgument(fmt::format("{}: tensor '{}' has shape {}, expected {} (r {} for this model)",
                                                     weights_path, np.name, ShapeText(view->sizes().vec()),
                                                     ShapeText(shape), lora.rank));
        *np.tensor = view->to(device, at::kFloat, /*non_blocking=*/false, /*copy=*/true);
      }
    }
  }
  if ((*file)->entries().size() != params.size()) {
    std::set<std::string> known;
    for (const NamedParameter& np : params) known.insert(np.name);
    for (const auto& [name, entry] : (*file)->entries())
      if (known.count(name) == 0)
        return Status::InvalidArgument(fmt::format(
            "{}: tensor '{}' is not a LoRA adapter of the seven projections of a {}-layer model", weights_path, name,
            config.n_layers));
  }
  return lora;
}

at::Tensor lora_delta(const LoraAdapters& lora, size_t layer, Projection p) {
  c10::NoGradGuard no_grad;
  const LoraAdapter& ad = lora.layers[layer][static_cast<size_t>(p)];
  return at::matmul(ad.b.to(at::kFloat), ad.a.to(at::kFloat)) * lora.scale();
}

Result<LoraAdapters> lora_merge_stack(const std::vector<const LoraAdapters*>& groups) {
  if (Status s = SameShape(groups); !s.ok()) return s;
  c10::NoGradGuard no_grad;
  const int64_t G = static_cast<int64_t>(groups.size());
  LoraAdapters merged;
  merged.rank = G * groups[0]->rank;
  merged.alpha = groups[0]->alpha;  // alpha* = alpha: (alpha/(G·r))·Σ_g B_g·A_g = mean_g (alpha/r)·B_g·A_g
  merged.layers.resize(groups[0]->layers.size());
  for (size_t layer = 0; layer < merged.layers.size(); ++layer) {
    for (size_t p = 0; p < static_cast<size_t>(kProjectionCount); ++p) {
      std::vector<at::Tensor> as, bs;
      for (const LoraAdapters* g : groups) {
        as.push_back(g->layers[layer][p].a.detach());
        bs.push_back(g->layers[layer][p].b.detach());
      }
      merged.layers[layer][p].a = at::cat(as, 0);  // (G·r, in)
      merged.layers[layer][p].b = at::cat(bs, 1);  // (out, G·r)
    }
  }
  return merged;
}

Result<LoraAdapters> lora_average_b(const std::vector<const LoraAdapters*>& groups) {
  if (Status s = SameShape(groups); !s.ok()) return s;
  c10::NoGradGuard no_grad;
  LoraAdapters merged;
  merged.rank = groups[0]->rank;
  merged.alpha = groups[0]->alpha;
  merged.layers.resize(groups[0]->layers.size());
  for (size_t layer = 0; layer < merged.layers.size(); ++layer) {
    for (size_t p = 0; p < static_cast<size_t>(kProjectionCount); ++p) {
      const at::Tensor& a = groups[0]->layers[layer][p].a;
      std::vector<at::Tensor> bs;
      for (size_t g = 0; g < groups.size(); ++g) {
        if (!at::equal(groups[g]->layers[layer][p].a, a))
          return Status::InvalidArgument(fmt::format(
              "group {}'s lora_A of layer {} {} differs from group 0's: averaging B is exact only with A frozen at a "
              "shared start",
              g, layer, projection_module(static_cast<Projection>(p))));
        bs.push_back(groups[g]->layers[layer][p].b.detach());
      }
      merged.layers[layer][p].a = a.detach().clone();
      merged.layers[layer][p].b = at::stack(bs, 0).mean(0);
    }
  }
  return merged;
}

}  // namespace native
}  // namespace protocol

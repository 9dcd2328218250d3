#include "backends/native/worker_case.h"

#include <fstream>

#include "runner/base/json.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {

std::string EncodeWorkerCase(const WorkerCase& c) {
  Json j;
  j["version"] = 1;
  j["role"] = c.role;
  j["case_id"] = c.case_id;
  j["plan_file"] = c.plan_file;
  j["workload"] = WorkloadName(c.workload);
  j["model"] = {{"name", c.model_name},
                {"preset", c.model_preset},
                {"path", c.model_path},
                {"quantization", c.quantization},
                {"double_quant", c.double_quant},
                {"init_random", c.init_random}};
  j["dataset"] = {{"format", c.dataset_format}, {"path", c.dataset_path}};
  const TrainingSettings& t = c.training;
  j["training"] = {{"batch_size", t.batch_size},       {"seq_len", t.seq_len},
                   {"grad_accum", t.grad_accum},       {"learning_rate", t.learning_rate},
                   {"seed", t.seed},                   {"device", t.device},
                   {"ranks_per_node", t.ranks_per_node}, {"collective_timeout", t.collective_timeout},
                   {"sync_every", t.sync_every},       {"outer_lr", t.outer_lr},
                   {"outer_momentum", t.outer_momentum}, {"checkpoint_every", t.checkpoint_every},
                   {"lora_rank", t.lora_rank},               {"lora_alpha", t.lora_alpha},
                   {"lora_freeze_a", t.lora_freeze_a}};
  j["steps"] = c.steps;
  j["epochs"] = c.epochs;
  j["warmup_steps"] = c.warmup_steps;
  j["inference"] = {{"prompt", c.inference.prompt},
                    {"max_new_tokens", c.inference.max_new_tokens},
                    {"ignore_eos", c.inference.ignore_eos}};
  j["output_dir"] = c.output_dir;
  j["groups"] = c.groups;
  j["group_size"] = c.group_size;
  j["rank_nodes"] = c.rank_nodes;
  j["plan_text"] = c.plan_text;
  return j.dump(2);
}

Result<WorkerCase> DecodeWorkerCase(const std::string& text) {
  try {
    Json j = Json::parse(text);
    if (j.value("version", 0) != 1) return Status::InvalidArgument("case file: unknown version (expected 1)");
    WorkerCase c;
    c.role = j.at("role").get<std::string>();
    c.case_id = j.at("case_id").get<std::string>();
    c.plan_file = j.value("plan_file", "");
    c.plan_text = j.value("plan_text", "");
    auto w = ParseWorkload(j.at("workload").get<std::string>());
    if (!w) return Status::InvalidArgument("case file: unknown workload");
    c.workload = *w;
    c.model_name = j.at("model").at("name").get<std::string>();
    c.model_preset = j.at("model").at("preset").get<std::string>();
    c.model_path = j.at("model").at("path").get<std::string>();
    c.quantization = j.at("model").value("quantization", "");
    c.double_quant = j.at("model").value("double_quant", false);
    c.init_random = j.at("model").value("init_random", false);
    c.dataset_format = j.at("dataset").at("format").get<std::string>();
    c.dataset_path = j.at("dataset").at("path").get<std::string>();
    const Json& t = j.at("training");
    c.training.batch_size = t.at("batch_size").get<int64_t>();
    c.training.seq_len = t.at("seq_len").get<int64_t>();
    c.training.grad_accum = t.at("grad_accum").get<int64_t>();
    c.training.learning_rate = t.at("learning_rate").get<double>();
    c.training.seed = t.at("seed").get<int64_t>();
    c.training.device = t.at("device").get<std::string>();
    c.training.ranks_per_node = t.at("ranks_per_node").get<int>();
    c.training.collective_timeout = t.at("collective_timeout").get<double>();
    c.training.sync_every = t.at("sync_every").get<int64_t>();
    c.training.outer_lr = t.at("outer_lr").get<double>();
    c.training.outer_momentum = t.at("outer_momentum").get<double>();
    c.training.checkpoint_every = t.at("checkpoint_every").get<int64_t>();
    c.training.lora_rank = t.at("lora_rank").get<int64_t>();
    c.training.lora_alpha = t.at("lora_alpha").get<double>();
    c.training.lora_freeze_a = t.at("lora_freeze_a").get<bool>();
    c.steps = j.at("steps").get<int64_t>();
    c.epochs = j.at("epochs").get<int64_t>();
    c.warmup_steps = j.at("warmup_steps").get<int>();
    c.inference.prompt = j.at("inference").at("prompt").get<std::string>();
    c.inference.max_new_tokens = j.at("inference").at("max_new_tokens").get<std::vector<int>>();
    c.inference.ignore_eos = j.at("inference").at("ignore_eos").get<bool>();
    c.output_dir = j.at("output_dir").get<std::string>();
    c.groups = j.at("groups").get<int>();
    c.group_size = j.at("group_size").get<int>();
    c.rank_nodes = j.at("rank_nodes").get<std::vector<std::string>>();
    if (c.groups < 1 || c.group_size < 1 || static_cast<int>(c.rank_nodes.size()) != c.world())
      return Status::InvalidArgument("case file: groups, group_size and rank_nodes disagree");
    return c;
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("case file: ") + e.what());
  }
}

Status WriteWorkerCase(const std::string& path, const WorkerCase& c) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) return Status::IoError(fmt::format("{}: cannot write the case file", path));
  out << EncodeWorkerCase(c);
  out.close();
  if (!out) return Status::IoError(fmt::format("{}: cannot write the case file", path));
  return Status::Ok();
}

Result<WorkerCase> ReadWorkerCase(const std::string& path) {
  auto text = ReadFileText(path);
  if (!text.ok()) return Status::NotFound(fmt::format("{}: cannot read the case file", path));
  auto c = DecodeWorkerCase(text.value());
  if (!c.ok()) return Status::InvalidArgument(fmt::format("{}: {}", path, c.status().message()));
  return c;
}

}  // namespace native
}  // namespace protocol

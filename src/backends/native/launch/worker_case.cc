#include "backends/native/launch/worker_case.h"

#include <cerrno>
#include <fstream>
#include <stdexcept>
#include <type_traits>

#include "runner/base/json.h"
#include "runner/base/text.h"
#include "runner/plan/training_fields.h"

namespace protocol {
namespace native {
namespace {

// An enum as its name; read back by FromName (which throws on an unknown one,
// as Json's own getters do on a wrong type).
template <typename E>
E FromName(const Json& j, const char* what) {
  auto v = ParseName<E>(j.get<std::string>());
  if (!v) throw std::invalid_argument(fmt::format("unknown {} '{}'", what, j.get<std::string>()));
  return *v;
}

// The training settings, one key per row of training_fields.h.
Json EncodeTraining(const TrainingSettings& t) {
  Json j = Json::object();
  for (const TrainingField& field : TrainingFields())
    VisitField(field, t, [&](const auto& value) {
      if constexpr (kIsVocabularySetting<std::decay_t<decltype(value)>>) j[field.name] = NameOf(value);
      else j[field.name] = value;
    });
  return j;
}

TrainingSettings DecodeTraining(const Json& j) {
  TrainingSettings t;
  for (const TrainingField& field : TrainingFields())
    VisitField(field, t, [&](auto& value) {
      using T = std::decay_t<decltype(value)>;
      if constexpr (kIsVocabularySetting<T>) value = FromName<T>(j.at(field.name), field.name);
      else value = j.at(field.name).get<T>();
    });
  return t;
}

}  // namespace

std::string EncodeWorkerCase(const WorkerCase& c) {
  Json j;
  j["version"] = 1;
  j["role"] = NameOf(c.role);
  j["case_id"] = c.case_id;
  j["plan_file"] = c.plan_file;
  j["workload"] = WorkloadName(c.workload);
  j["model"] = {{"name", c.model_name},
                {"preset", c.model_preset},
                {"path", c.model_path},
                {"quantization", NameOf(c.quantization)},
                {"double_quant", c.double_quant},
                {"init_random", c.init_random}};
  j["dataset"] = {{"format", c.dataset_format}, {"path", c.dataset_path}, {"column", c.dataset_column}};
  j["training"] = EncodeTraining(c.training);
  j["steps"] = c.steps;
  j["epochs"] = c.epochs;
  j["warmup_steps"] = c.warmup_steps;
  j["inference"] = {{"prompt", c.inference.prompt},
                    {"max_new_tokens", c.inference.max_new_tokens},
                    {"ignore_eos", c.inference.ignore_eos},
                    {"decode_step", NameOf(c.inference.decode_step)}};
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
    c.role = FromName<NativeRole>(j.at("role"), "role");
    c.case_id = j.at("case_id").get<std::string>();
    c.plan_file = j.value("plan_file", "");
    c.plan_text = j.value("plan_text", "");
    c.workload = FromName<Workload>(j.at("workload"), "workload");
    c.model_name = j.at("model").at("name").get<std::string>();
    c.model_preset = j.at("model").at("preset").get<std::string>();
    c.model_path = j.at("model").at("path").get<std::string>();
    c.quantization = FromName<Quantization>(j.at("model").at("quantization"), "quantization");
    c.double_quant = j.at("model").value("double_quant", false);
    c.init_random = j.at("model").value("init_random", false);
    c.dataset_format = j.at("dataset").at("format").get<std::string>();
    c.dataset_path = j.at("dataset").at("path").get<std::string>();
    c.dataset_column = j.at("dataset").value("column", std::string());
    c.training = DecodeTraining(j.at("training"));
    c.steps = j.at("steps").get<int64_t>();
    c.epochs = j.at("epochs").get<int64_t>();
    c.warmup_steps = j.at("warmup_steps").get<int>();
    c.inference.prompt = j.at("inference").at("prompt").get<std::string>();
    c.inference.max_new_tokens = j.at("inference").at("max_new_tokens").get<std::vector<int>>();
    c.inference.ignore_eos = j.at("inference").at("ignore_eos").get<bool>();
    c.inference.decode_step = FromName<DecodeStepChoice>(j.at("inference").at("decode_step"), "decode_step");
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
  if (!out) return Status::IoError(CannotWrite(path, errno) + " (the case file)");
  out << EncodeWorkerCase(c);
  out.close();
  if (!out) return Status::IoError(CannotWrite(path, errno) + " (the case file)");
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

#include "backends/native/launch/events.h"

#include "runner/base/json.h"

namespace protocol {
namespace native {

std::string EncodeEvent(const WorkerEvent& e) {
  Json j;
  switch (e.kind) {
    case WorkerEvent::Kind::kStep:
      j["event"] = "step";
      j["step"] = e.step.step;
      j["seconds"] = e.step.seconds;
      if (e.step.loss) j["loss"] = *e.step.loss;
      if (e.step.tokens) j["tokens"] = *e.step.tokens;
      break;
    case WorkerEvent::Kind::kRequest:
      j["event"] = "request";
      j["index"] = e.request.index;
      j["max_new_tokens"] = e.request.max_new_tokens;
      j["prompt_tokens"] = e.request.prompt_tokens;
      j["generated_tokens"] = e.request.generated_tokens;
      j["seconds"] = e.request.seconds;
      j["answer"] = e.request.answer;
      if (e.request.token_ids) j["token_ids"] = *e.request.token_ids;
      break;
    case WorkerEvent::Kind::kMeasurement:
      j["event"] = "measurement";
      j["name"] = e.measurement.name;
      if (e.rank) j["rank"] = *e.rank;
      if (e.measurement.value) j["value"] = *e.measurement.value;
      j["unit"] = e.measurement.unit;
      j["method"] = e.measurement.method;
      break;
    case WorkerEvent::Kind::kNote:
      j["event"] = "note";
      j["text"] = e.text;
      break;
    case WorkerEvent::Kind::kStatus:
      j["event"] = "status";
      j["text"] = e.text;
      break;
    case WorkerEvent::Kind::kBytes:
      j["event"] = "bytes";
      j["within"] = e.bytes_within;
      j["between"] = e.bytes_between;
      j["between_nodes"] = e.bytes_between_nodes;
      j["between_nodes_steps"] = e.bytes_between_nodes_steps;
      break;
    case WorkerEvent::Kind::kError:
      j["event"] = "error";
      j["text"] = e.text;
      break;
    case WorkerEvent::Kind::kHeartbeat:
      j["event"] = "heartbeat";
      break;
    case WorkerEvent::Kind::kEvalPoint:
      j["event"] = "eval";
      j["step"] = e.eval_point.step;
      j["tokens"] = e.eval_point.tokens;
      j["training_seconds"] = e.eval_point.training_seconds;
      j["loss"] = e.eval_point.loss;
      break;
    case WorkerEvent::Kind::kRendezvous:
      j["event"] = "rendezvous";
      j["port"] = e.port;
      break;
    case WorkerEvent::Kind::kSample:
      j["event"] = "sample";
      j["seconds"] = e.sample.seconds;
      j["node"] = e.sample.node;
      j["device"] = e.sample.device;
      j["quantity"] = e.sample.quantity;
      j["value"] = e.sample.value;
      break;
    case WorkerEvent::Kind::kFact:
      j["event"] = "fact";
      j["key"] = e.text;
      j["value"] = e.value;
      break;
  }
  // Invalid UTF-8 in an answer is replaced, never a throw.
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::optional<WorkerEvent> DecodeEvent(std::string_view line) {
  if (line.empty() || line.front() != '{') return std::nullopt;
  try {
    Json j = Json::parse(line);
    if (!j.is_object() || !j.contains("event") || !j["event"].is_string()) return std::nullopt;
    const std::string kind = j["event"].get<std::string>();
    WorkerEvent e;
    if (kind == "step") {
      e.kind = WorkerEvent::Kind::kStep;
      e.step.step = j.at("step").get<int64_t>();
      e.step.seconds = j.at("seconds").get<double>();
      if (j.contains("loss")) e.step.loss = j["loss"].get<double>();
      if (j.contains("tokens")) e.step.tokens = j["tokens"].get<int64_t>();
    } else if (kind == "request") {
      e.kind = WorkerEvent::Kind::kRequest;
      e.request.index = j.at("index").get<int>();
      e.request.max_new_tokens = j.at("max_new_tokens").get<int>();
      e.request.prompt_tokens = j.at("prompt_tokens").get<int>();
      e.request.generated_tokens = j.at("generated_tokens").get<int>();
      e.request.seconds = j.at("seconds").get<double>();
      e.request.answer = j.value("answer", "");
      if (j.contains("token_ids")) e.request.token_ids = j["token_ids"].get<std::vector<int>>();
    } else if (kind == "measurement") {
      e.kind = WorkerEvent::Kind::kMeasurement;
      e.measurement.name = j.at("name").get<std::string>();
      if (j.contains("rank")) e.rank = j["rank"].get<int>();
      if (j.contains("value") && j["value"].is_number()) e.measurement.value = j["value"].get<double>();
      e.measurement.unit = j.value("unit", "");
      e.measurement.method = j.value("method", "");
    } else if (kind == "note" || kind == "status" || kind == "error") {
      e.kind = kind == "note"     ? WorkerEvent::Kind::kNote
               : kind == "status" ? WorkerEvent::Kind::kStatus
                                  : WorkerEvent::Kind::kError;
      e.text = j.at("text").get<std::string>();
    } else if (kind == "heartbeat") {
      e.kind = WorkerEvent::Kind::kHeartbeat;
    } else if (kind == "fact") {
      e.kind = WorkerEvent::Kind::kFact;
      e.text = j.at("key").get<std::string>();
      e.value = j.at("value").get<std::string>();
    } else if (kind == "eval") {
      e.kind = WorkerEvent::Kind::kEvalPoint;
      e.eval_point.step = j.at("step").get<int64_t>();
      e.eval_point.tokens = j.at("tokens").get<int64_t>();
      e.eval_point.training_seconds = j.at("training_seconds").get<double>();
      e.eval_point.loss = j.at("loss").get<double>();
    } else if (kind == "sample") {
      e.kind = WorkerEvent::Kind::kSample;
      e.sample.seconds = j.at("seconds").get<double>();
      e.sample.node = j.at("node").get<std::string>();
      e.sample.device = j.at("device").get<std::string>();
      e.sample.quantity = j.at("quantity").get<std::string>();
      e.sample.value = j.at("value").get<double>();
    } else if (kind == "rendezvous") {
      e.kind = WorkerEvent::Kind::kRendezvous;
      e.port = j.at("port").get<int>();
    } else if (kind == "bytes") {
      e.kind = WorkerEvent::Kind::kBytes;
      e.bytes_within = j.at("within").get<int64_t>();
      e.bytes_between = j.at("between").get<int64_t>();
      e.bytes_between_nodes = j.value("between_nodes", int64_t{0});
      e.bytes_between_nodes_steps = j.value("between_nodes_steps", int64_t{0});
    } else {
      return std::nullopt;
    }
    return e;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace native
}  // namespace protocol

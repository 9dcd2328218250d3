#include "backends/native/model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <c10/core/GradMode.h>

#include "runner/base/json.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {
namespace fs = std::filesystem;
namespace {

// The dtype table: safetensors name, ATen type, bytes per element.
struct DtypeRow {
  const char* name;
  at::ScalarType type;
  uint64_t bytes;
};
const DtypeRow kDtypes[] = {
    {"F32", at::kFloat, 4},
    {"BF16", at::kBFloat16, 2},
    {"F16", at::kHalf, 2},
};
const DtypeRow* FindDtype(const std::string& name) {
  for (const auto& row : kDtypes)
    if (name == row.name) return &row;
  return nullptr;
}
const DtypeRow* FindDtype(at::ScalarType type) {
  for (const auto& row : kDtypes)
    if (type == row.type) return &row;
  return nullptr;
}

const char* kSingleFile = "model.safetensors";
const char* kIndexFile = "model.safetensors.index.json";

Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return Status::IoError(CannotWrite(path, errno));
  return Status::Ok();
}

}  // namespace

Result<std::shared_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::NotFound(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return Status::IoError(fmt::format("{}: cannot stat", path));
  }
  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ > 0) {
    void* map = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      ::close(fd);
      return Status::IoError(fmt::format("{}: cannot map: {}", path, std::strerror(errno)));
    }
    file->map_ = static_cast<const char*>(map);
  }
  ::close(fd);
  file->self_ = file;

  if (file->size_ < 8)
    return Status::Corruption(fmt::format("{}: truncated: {} bytes, shorter than the 8-byte header length", path, file->size_));
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<unsigned char>(file->map_[i]);
  if (header_len > file->size_ - 8)
    return Status::Corruption(fmt::format("{}: truncated: the header claims {} bytes but only {} follow",
                                          path, header_len, file->size_ - 8));
  file->data_start_ = 8 + static_cast<size_t>(header_len);
  const uint64_t data_size = file->size_ - file->data_start_;
  Json header;
  try {
    header = Json::parse(std::string(file->map_ + 8, static_cast<size_t>(header_len)));
  } catch (const std::exception& e) {
    return Status::Corruption(fmt::format("{}: bad header: {}", path, e.what()));
  }
  if (!header.is_object()) return Status::Corruption(fmt::format("{}: bad header: not a JSON object", path));
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const Json& e = it.value();
    const std::string where = fmt::format("{}: tensor '{}'", path, it.key());
    if (!e.is_object() || !e.contains("dtype") || !e["dtype"].is_string() || !e.contains("shape") ||
        !e["shape"].is_array() || !e.contains("data_offsets") || !e["data_offsets"].is_array() ||
        e["data_offsets"].size() != 2)
      return Status::Corruption(where + ": bad header entry (needs dtype, shape, data_offsets)");
    SafetensorsEntry entry;
    entry.dtype = e["dtype"].get<std::string>();
    const DtypeRow* row = FindDtype(entry.dtype);
    if (!row) return Status::InvalidArgument(fmt::format("{}: dtype '{}' is not supported (F32, BF16, F16)", where, entry.dtype));
    uint64_t numel = 1;
    for (const Json& d : e["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) return Status::Corruption(where + ": bad shape");
      entry.shape.push_back(d.get<int64_t>());
      numel *= static_cast<uint64_t>(d.get<int64_t>());
    }
    if (!e["data_offsets"][0].is_number_unsigned() || !e["data_offsets"][1].is_number_unsigned())
      return Status::Corruption(where + ": bad data_offsets");
    entry.begin = e["data_offsets"][0].get<uint64_t>();
    entry.end = e["data_offsets"][1].get<uint64_t>();
    if (entry.end < entry.begin || entry.end - entry.begin != numel * row->bytes)
      return Status::Corruption(fmt::format("{}: data_offsets [{}, {}) hold {} bytes, but shape {} of {} needs {}", where,
                                            entry.begin, entry.end, entry.end - entry.begin, ShapeText(entry.shape),
                                            entry.dtype, numel * row->bytes));
    if (entry.end > data_size)
      return Status::Corruption(fmt::format("{}: truncated: its data ends at byte {} but the file holds {} data bytes",
                                            where, entry.end, data_size));
    file->entries_[it.key()] = std::move(entry);
  }
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(const_cast<char*>(map_), size_);
}

Result<at::Tensor> SafetensorsFile::View(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) return Status::NotFound(fmt::format("{}: tensor '{}' is not in this file", path_, name));
  const SafetensorsEntry& e = it->second;
  std::shared_ptr<SafetensorsFile> keep = self_.lock();
  void* data = const_cast<char*>(map_ + data_start_ + e.begin);
  return at::from_blob(data, e.shape, [keep](void*) {}, at::TensorOptions().dtype(FindDtype(e.dtype)->type));
}

void SafetensorsFile::DropPages(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end() || map_ == nullptr) return;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(map_ + data_start_ + it->second.begin);
  const uintptr_t end = reinterpret_cast<uintptr_t>(map_ + data_start_ + it->second.end);
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;  // whole pages inside
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

Result<std::unique_ptr<SafetensorsWriter>> SafetensorsWriter::Create(const std::string& path,
                                                                     const std::vector<Entry>& entries) {
  Json header;
  header["__metadata__"] = Json{{"format", "pt"}};
  uint64_t offset = 0;
  for (const Entry& e : entries) {
    const DtypeRow* row = FindDtype(e.dtype);
    if (!row) return Status::InvalidArgument(fmt::format("{}: tensor '{}': dtype {} cannot be saved", path, e.name,
                                                         std::string(c10::toString(e.dtype))));
    uint64_t numel = 1;
    for (int64_t d : e.shape) numel *= static_cast<uint64_t>(d);
    const uint64_t bytes = numel * row->bytes;
    header[e.name] = Json{{"dtype", row->name}, {"shape", e.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  while ((text.size() + 8) % 8 != 0) text.push_back(' ');  // data starts 8-byte aligned
  std::unique_ptr<SafetensorsWriter> w(new SafetensorsWriter());
  w->path_ = path;
  w->entries_ = entries;
  w->out_.open(path, std::ios::binary | std::ios::trunc);
  if (!w->out_) return Status::IoError(CannotWrite(path, errno));
  uint64_t n = text.size();
  char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  w->out_.write(len, 8);
  w->out_.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!w->out_) w->error_ = errno;
  return w;
}

Status SafetensorsWriter::Write(const at::Tensor& t) {
  if (next_ >= entries_.size())
    return Status::InvalidArgument(fmt::format("{}: all {} tensors are already written", path_, entries_.size()));
  const Entry& e = entries_[next_];
  if (t.scalar_type() != e.dtype || t.sizes().vec() != e.shape)
    return Status::InvalidArgument(fmt::format("{}: tensor '{}': got {} {}, the header says {} {}", path_, e.name,
                                               std::string(c10::toString(t.scalar_type())), ShapeText(t.sizes().vec()),
                                               std::string(c10::toString(e.dtype)), ShapeText(e.shape)));
  at::Tensor c = t.detach().to(at::kCPU).contiguous();
  out_.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.numel() * c.element_size()));
  if (!out_ && error_ == 0) error_ = errno;
  ++next_;
  return Status::Ok();
}

Status SafetensorsWriter::Close() {
  if (next_ != entries_.size())
    return Status::InvalidArgument(fmt::format("{}: {} of {} tensors written", path_, next_, entries_.size()));
  out_.close();
  if (!out_) return Status::IoError(CannotWrite(path_, error_ != 0 ? error_ : errno));
  return Status::Ok();
}

Status safetensors_save(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  std::vector<SafetensorsWriter::Entry> entries;
  for (const auto& [name, tensor] : tensors) entries.push_back({name, tensor.scalar_type(), tensor.sizes().vec()});
  auto writer = SafetensorsWriter::Create(path, entries);
  if (!writer.ok()) return writer.status();
  for (const auto& entry : tensors)
    if (Status s = (*writer)->Write(entry.second); !s.ok()) return s;
  return (*writer)->Close();
}

Status model_save(Model& model, const std::string& dir, uint64_t max_shard_bytes) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IoError(fmt::format("{}: cannot create directory: {}", dir, ec.message()));
  Status s = WriteText((fs::path(dir) / "config.json").string(), model.config.ToHfJson());
  if (!s.ok()) return s;
  // Group the parameters into shards in order.
  std::vector<std::vector<std::pair<std::string, at::Tensor>>> shards(1);
  uint64_t shard_bytes = 0, total = 0;
  for (const NamedParameter& p : model_parameters(model)) {
    const uint64_t bytes = static_cast<uint64_t>(p.tensor->numel() * p.tensor->element_size());
    if (max_shard_bytes > 0 && shard_bytes > 0 && shard_bytes + bytes > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back({p.name, *p.tensor});
    shard_bytes += bytes;
    total += bytes;
  }
  if (shards.size() == 1) {
    fs::remove(fs::path(dir) / kIndexFile, ec);
    return safetensors_save((fs::path(dir) / kSingleFile).string(), shards[0]);
  }
  Json index;
  index["metadata"] = Json{{"total_size", total}};
  index["weight_map"] = Json::object();
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string name = fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
    s = safetensors_save((fs::path(dir) / name).string(), shards[i]);
    if (!s.ok()) return s;
    for (const auto& entry : shards[i]) index["weight_map"][entry.first] = name;
  }
  fs::remove(fs::path(dir) / kSingleFile, ec);
  return WriteText((fs::path(dir) / kIndexFile).string(), index.dump(2) + "\n");
}

Result<std::string> model_save_begin(const ModelConfig& config, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IoError(fmt::format("{}: cannot create directory: {}", dir, ec.message()));
  Status s = WriteText((fs::path(dir) / "config.json").string(), config.ToHfJson());
  if (!s.ok()) return s;
  fs::remove(fs::path(dir) / kIndexFile, ec);
  return (fs::path(dir) / kSingleFile).string();
}

bool model_dir_has_weights(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / kSingleFile, ec) || fs::is_regular_file(fs::path(dir) / kIndexFile, ec);
}

Result<WeightsReader> WeightsReader::Open(const std::string& dir) {
  WeightsReader r;
  const fs::path index_path = fs::path(dir) / kIndexFile;
  const fs::path single_path = fs::path(dir) / kSingleFile;
  std::error_code ec;
  if (fs::is_regular_file(index_path, ec)) {
    r.source_ = index_path.string();
    const std::string text = ReadFileText(index_path.string()).value_or("");
    Json index;
    try {
      index = Json::parse(text);
    } catch (const std::exception& e) {
      return Status::Corruption(fmt::format("{}: not valid JSON: {}", r.source_, e.what()));
    }
    if (!index.contains("weight_map") || !index["weight_map"].is_object())
      return Status::Corruption(fmt::format("{}: no \"weight_map\" object", r.source_));
    for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
      if (!it.value().is_string())
        return Status::Corruption(fmt::format("{}: weight_map['{}'] is not a file name", r.source_, it.key()));
      r.where_[it.key()] = (fs::path(dir) / it.value().get<std::string>()).string();
    }
  } else if (fs::is_regular_file(single_path, ec)) {
    r.source_ = single_path.string();
  } else {
    return Status::NotFound(fmt::format("{}: no weights here (neither {} nor {})", dir, kSingleFile, kIndexFile));
  }
  return r;
}

Status WeightsReader::Read(const NamedParameter& p) {
  std::string file = source_;
  if (!where_.empty()) {
    auto it = where_.find(p.name);
    if (it == where_.end()) return Status::NotFound(fmt::format("{}: tensor '{}' is missing", source_, p.name));
    file = it->second;
  }
  if (!open_.count(file)) {
    auto opened = SafetensorsFile::Open(file);
    if (!opened.ok()) return opened.status();
    open_[file] = *opened;
  }
  const SafetensorsFile& f = *open_[file];
  auto entry = f.entries().find(p.name);
  if (entry == f.entries().end()) return Status::NotFound(fmt::format("{}: tensor '{}' is missing", file, p.name));
  if (entry->second.shape != p.shape)
    return Status::InvalidArgument(fmt::format("{}: tensor '{}' has shape {}, the config expects {}", file, p.name,
                                               ShapeText(entry->second.shape), ShapeText(p.shape)));
  c10::NoGradGuard no_grad;
  p.tensor->copy_(*f.View(p.name));  // converted into the tensor's dtype/device, in place
  f.DropPages(p.name);
  return Status::Ok();
}

Status model_load_weights(Model& model, const std::string& dir) {
  auto reader = WeightsReader::Open(dir);
  if (!reader.ok()) return reader.status();
  for (NamedParameter& p : model_parameters(model))
    if (Status s = reader->Read(p); !s.ok()) return s;
  return Status::Ok();
}

Result<Model> model_load_dir(const std::string& dir, const at::TensorOptions& options) {
  auto config = ReadHfConfig(dir);
  if (!config.ok()) return config.status();
  Model model = model_create(*config, options);
  Status s = model_load_weights(model, dir);
  if (!s.ok()) return s;
  return model;
}

}  // namespace native
}  // namespace protocol

#include "mixt/helpers/safetensors.h"

#include <ATen/core/grad_mode.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "common/atomic_file.h"
#include "mixt/error.h"

namespace mixt {

namespace fs = std::filesystem;

// The format stores little-endian bytes; mixt copies memory as is.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

struct DtypeName {
  at::ScalarType type;
  const char* name;
};
constexpr DtypeName kDtypes[] = {
    {at::kDouble, "F64"}, {at::kFloat, "F32"}, {at::kHalf, "F16"}, {at::kBFloat16, "BF16"},
    {at::kLong, "I64"},   {at::kInt, "I32"},   {at::kShort, "I16"}, {at::kChar, "I8"},
    {at::kByte, "U8"},    {at::kBool, "BOOL"},
};

const char* dtype_name(at::ScalarType type) {
  for (const auto& d : kDtypes) {
    if (d.type == type) return d.name;
  }
  return nullptr;
}

Error bad_file(const fs::path& file, const std::string& what) {
  return Error(ErrorKind::recipe, "not a valid safetensors file: " + what, SourceLocation{file.string()}, {},
               "write it with safetensors.torch.save_file or `mixt export --format safetensors`");
}

// Files larger than this in the header are certainly not safetensors (the reference
// implementation caps the header at 100 MB).
constexpr std::uint64_t kMaxHeader = 100'000'000;

}  // namespace

void save_safetensors(const fs::path& file, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<at::Tensor> contiguous;
  contiguous.reserve(tensors.size());
  std::set<std::string> seen;
  std::uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (!seen.insert(name).second) throw runtime_error("save_safetensors: duplicate tensor name '" + name + "'");
    const char* dtype = dtype_name(tensor.scalar_type());
    if (!dtype) {
      throw runtime_error("save_safetensors: tensor '" + name + "' has dtype " +
                          std::string(c10::toString(tensor.scalar_type())) + ", which safetensors cannot hold");
    }
    at::Tensor cpu = tensor.detach().to(at::kCPU).contiguous();
    const std::uint64_t bytes = cpu.numel() * cpu.element_size();
    header[name] = {{"dtype", dtype}, {"shape", cpu.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    contiguous.push_back(std::move(cpu));
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned, as the reference does
  const std::uint64_t size = text.size();

  write_file_atomically(file, [&](std::ostream& out) {
    out.write(reinterpret_cast<const char*>(&size), sizeof(size));
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const at::Tensor& t : contiguous) {
      out.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.numel() * t.element_size()));
    }
  });
}

namespace {

struct Header {
  nlohmann::ordered_json json;
  std::uint64_t size = 0;  // in bytes, after the 8 that give it
};

// The header: its length, then that many bytes of JSON.
Header read_header(std::istream& in, const fs::path& file, std::uint64_t file_size) {
  Header header;
  in.read(reinterpret_cast<char*>(&header.size), sizeof(header.size));
  if (!in || header.size > kMaxHeader || header.size + 8 > file_size) {
    throw bad_file(file, "bad header length");
  }
  std::string text(header.size, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header.size));
  try {
    header.json = nlohmann::ordered_json::parse(text);
  } catch (const std::exception&) {
    throw bad_file(file, "the header is not JSON");
  }
  if (!header.json.is_object()) throw bad_file(file, "the header is not a JSON object");
  return header;
}

void read_metadata(const fs::path& file, const nlohmann::ordered_json& entry,
                   std::map<std::string, std::string>& metadata) {
  if (!entry.is_object()) throw bad_file(file, "__metadata__ is not an object");
  for (const auto& [key, value] : entry.items()) {
    metadata[key] = value.is_string() ? value.get<std::string>() : value.dump();
  }
}

// A tensor's header entry: its dtype, shape, and bytes in the data (from the data's start).
struct TensorEntry {
  at::ScalarType type{};
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;
};

// A header number that must be a non-negative integer (JSON allows 1e30 or -1 anywhere; as
// a size or an offset either would be undefined or wrong once converted).
std::uint64_t count_in_header(const fs::path& file, const std::string& name, const char* what,
                              const nlohmann::ordered_json& number) {
  if (number.is_number_integer() && !number.is_number_unsigned()) {
    throw bad_file(file, "tensor '" + name + "' has a negative " + what);
  }
  if (!number.is_number_unsigned()) {
    throw bad_file(
        file, "tensor '" + name + "' has " + number.dump().substr(0, 40) + " in its " + what + ", not a whole number");
  }
  return number.get<std::uint64_t>();
}

TensorEntry tensor_entry(const fs::path& file, const std::string& name, const nlohmann::ordered_json& entry) {
  TensorEntry t;
  std::vector<std::uint64_t> offsets;
  try {
    const std::string dtype = entry.at("dtype").get<std::string>();
    const auto known =
        std::find_if(std::begin(kDtypes), std::end(kDtypes), [&](const DtypeName& d) { return dtype == d.name; });
    if (known == std::end(kDtypes)) throw bad_file(file, "tensor '" + name + "' has unsupported dtype " + dtype);
    t.type = known->type;
    const auto& shape = entry.at("shape");
    const auto& data_offsets = entry.at("data_offsets");
    if (!shape.is_array() || !data_offsets.is_array()) {
      throw bad_file(file, "tensor '" + name + "': shape and data_offsets are lists of numbers");
    }
    for (const auto& dimension : shape) {
      const std::uint64_t size = count_in_header(file, name, "dimension in its shape", dimension);
      if (size > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        throw bad_file(file, "tensor '" + name + "' has a dimension of " + std::to_string(size));
      }
      t.shape.push_back(static_cast<std::int64_t>(size));
    }
    for (const auto& offset : data_offsets) offsets.push_back(count_in_header(file, name, "data offset", offset));
  } catch (const nlohmann::json::exception&) {
    throw bad_file(file, "tensor '" + name + "' lacks dtype, shape or data_offsets");
  }
  if (offsets.size() != 2) throw bad_file(file, "tensor '" + name + "': data_offsets needs two numbers");
  t.begin = offsets[0];
  t.end = offsets[1];
  return t;
}

// `entry`'s size checked against its offsets and the file, before anything is allocated: a
// header alone must not ask for memory the file does not hold.
TensorEntry checked_entry(const fs::path& file, const std::string& name, const nlohmann::ordered_json& entry,
                          std::uint64_t data_size) {
  const TensorEntry t = tensor_entry(file, name, entry);
  std::uint64_t bytes = c10::elementSize(t.type);
  bool overflow = false;
  for (const std::int64_t dimension : t.shape) {
    overflow = overflow || __builtin_mul_overflow(bytes, static_cast<std::uint64_t>(dimension), &bytes);
  }
  if (overflow || t.end < t.begin || t.end - t.begin != bytes || t.end > data_size) {
    throw bad_file(file,
                   "tensor '" + name + "': data_offsets do not match its shape and dtype, or the file is truncated");
  }
  return t;
}

}  // namespace

SafetensorsReader::SafetensorsReader(const fs::path& file) : file_(file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    // errno still says why the open failed: "No such file or directory", "Permission denied".
    const std::string why = std::strerror(errno);
    throw Error(ErrorKind::recipe, "cannot read safetensors file: " + why, SourceLocation{file.string()}, {},
                "check the path (relative paths are relative to the working directory)");
  }
  std::error_code ec;
  const std::uint64_t file_size = fs::file_size(file, ec);
  const Header header = read_header(in, file, file_size);
  data_start_ = 8 + header.size;
  const std::uint64_t data_size = file_size - data_start_;
  for (const auto& [name, entry] : header.json.items()) {
    if (name == "__metadata__") {
      read_metadata(file, entry, metadata_);
      continue;
    }
    const TensorEntry t = checked_entry(file, name, entry, data_size);
    layout_.emplace_back(name, at::empty(t.shape, at::TensorOptions().dtype(t.type).device(at::kMeta)));
    ranges_.emplace_back(t.begin, t.end);
  }
}

void SafetensorsReader::read_bytes(std::size_t index, void* destination) const {
  std::ifstream in(file_, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(data_start_ + ranges_.at(index).first));
  in.read(static_cast<char*>(destination), static_cast<std::streamsize>(ranges_[index].second - ranges_[index].first));
  if (!in) throw bad_file(file_, "truncated while reading tensor '" + layout_[index].first + "'");
}

at::Tensor SafetensorsReader::read(std::size_t index) const {
  const at::Tensor& meta = layout_.at(index).second;
  at::Tensor tensor = at::empty(meta.sizes(), at::TensorOptions().dtype(meta.scalar_type()));
  read_bytes(index, tensor.data_ptr());
  return tensor;
}

void SafetensorsReader::read_into(std::size_t index, const at::Tensor& target) const {
  const at::Tensor& meta = layout_.at(index).second;
  if (target.sizes() != meta.sizes()) {
    throw bad_file(file_, "tensor '" + layout_[index].first + "' is " + c10::str(meta.sizes()) + ", not " +
                              c10::str(target.sizes()));
  }
  if (target.device().is_cpu() && target.scalar_type() == meta.scalar_type() && target.is_contiguous()) {
    read_bytes(index, target.data_ptr());
  } else {
    at::NoGradGuard no_grad;
    target.copy_(read(index));
  }
}

SafetensorsContents load_safetensors(const fs::path& file) {
  const SafetensorsReader reader(file);
  SafetensorsContents contents;
  contents.metadata = reader.metadata();
  for (std::size_t i = 0; i < reader.layout().size(); ++i)
    contents.tensors.emplace_back(reader.layout()[i].first, reader.read(i));
  return contents;
}

}  // namespace mixt

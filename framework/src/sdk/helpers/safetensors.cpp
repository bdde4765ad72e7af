#include "mixt/helpers/safetensors.h"

#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
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

SafetensorsContents load_safetensors(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    // errno still says why the open failed: "No such file or directory", "Permission denied".
    const std::string why = std::strerror(errno);
    throw Error(ErrorKind::recipe, "cannot read safetensors file: " + why, SourceLocation{file.string()}, {},
                "check the path (relative paths are relative to the working directory)");
  }
  std::error_code ec;
  const std::uint64_t file_size = fs::file_size(file, ec);
  std::uint64_t header_size = 0;
  in.read(reinterpret_cast<char*>(&header_size), sizeof(header_size));
  if (!in || header_size > kMaxHeader || header_size + 8 > file_size) {
    throw bad_file(file, "bad header length");
  }
  std::string text(header_size, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_size));
  nlohmann::ordered_json header;
  try {
    header = nlohmann::ordered_json::parse(text);
  } catch (const std::exception&) {
    throw bad_file(file, "the header is not JSON");
  }
  if (!header.is_object()) throw bad_file(file, "the header is not a JSON object");

  const std::uint64_t data_size = file_size - 8 - header_size;
  SafetensorsContents contents;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw bad_file(file, "__metadata__ is not an object");
      for (const auto& [key, value] : entry.items()) {
        contents.metadata[key] = value.is_string() ? value.get<std::string>() : value.dump();
      }
      continue;
    }
    at::ScalarType type{};
    std::vector<std::int64_t> shape;
    std::uint64_t begin = 0, end = 0;
    try {
      const std::string dtype = entry.at("dtype").get<std::string>();
      const auto known = std::find_if(std::begin(kDtypes), std::end(kDtypes),
                                      [&](const DtypeName& d) { return dtype == d.name; });
      if (known == std::end(kDtypes)) throw bad_file(file, "tensor '" + name + "' has unsupported dtype " + dtype);
      type = known->type;
      shape = entry.at("shape").get<std::vector<std::int64_t>>();
      const auto offsets = entry.at("data_offsets").get<std::vector<std::uint64_t>>();
      if (offsets.size() != 2) throw bad_file(file, "tensor '" + name + "': data_offsets needs two numbers");
      begin = offsets[0];
      end = offsets[1];
    } catch (const nlohmann::json::exception&) {
      throw bad_file(file, "tensor '" + name + "' lacks dtype, shape or data_offsets");
    }
    for (const std::int64_t dimension : shape) {
      if (dimension < 0) throw bad_file(file, "tensor '" + name + "' has a negative dimension in its shape");
    }
    at::Tensor tensor = at::empty(shape, at::TensorOptions().dtype(type));
    const std::uint64_t bytes = tensor.numel() * tensor.element_size();
    if (end < begin || end - begin != bytes || end > data_size) {
      throw bad_file(file,
                     "tensor '" + name + "': data_offsets do not match its shape and dtype, or the file is truncated");
    }
    in.seekg(static_cast<std::streamoff>(8 + header_size + begin));
    in.read(static_cast<char*>(tensor.data_ptr()), static_cast<std::streamsize>(bytes));
    if (!in) throw bad_file(file, "truncated while reading tensor '" + name + "'");
    contents.tensors.emplace_back(name, std::move(tensor));
  }
  return contents;
}

}  // namespace mixt

#include "sprintnet/io/safetensors.h"

#include <cstdint>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "sprintnet/io/atomic_file.h"
#include "sprintnet/io/read_file.h"

namespace sprintnet {
namespace {

constexpr std::size_t kHeaderLengthBytes = 8;
constexpr std::uint64_t kMaxHeaderBytes = 100u << 20;  // the reference implementation's limit
constexpr std::size_t kHeaderAlignmentBytes = 8;       // pad so the data section starts aligned

constexpr std::pair<DType, std::string_view> kDtypeCodes[] = {
    {DType::kF32, "F32"}, {DType::kF64, "F64"}, {DType::kBF16, "BF16"},
    {DType::kF16, "F16"}, {DType::kI32, "I32"}, {DType::kU8, "U8"},
};

std::string_view dtype_code(DType dtype) {
  for (auto [d, code] : kDtypeCodes) {
    if (d == dtype) return code;
  }
  SN_FAIL("dtype {} has no safetensors code", dtype_name(dtype));
}

DType dtype_from_code(std::string_view code, std::string_view origin, std::string_view name) {
  for (auto [d, c] : kDtypeCodes) {
    if (c == code) return d;
  }
  SN_FAIL("{}: tensor '{}' has unsupported dtype '{}'", origin, name, code);
}

}  // namespace

void save_safetensors(const std::filesystem::path& path, const TensorList& tensors, const Metadata& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  std::set<std::string> names;
  for (const auto& [name, tensor] : tensors) {
    SN_CHECK(!name.empty() && name != "__metadata__" && names.insert(name).second,
             "{}: tensor name '{}' is empty, reserved or repeated", path.string(), name);
    SN_CHECK(tensor.defined(), "{}: tensor '{}' is undefined (no storage)", path.string(), name);
    const std::uint64_t bytes = tensor.nbytes();
    header[name] = {{"dtype", dtype_code(tensor.dtype())}, {"shape", tensor.shape()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string header_text = header.dump();
  header_text.append((kHeaderAlignmentBytes - header_text.size() % kHeaderAlignmentBytes) % kHeaderAlignmentBytes, ' ');

  std::string file(kHeaderLengthBytes, '\0');
  const std::uint64_t header_size = header_text.size();
  for (std::size_t i = 0; i < kHeaderLengthBytes; ++i) file[i] = static_cast<char>((header_size >> (8 * i)) & 0xFF);
  file += header_text;
  for (const auto& [name, tensor] : tensors) {
    const Tensor host = tensor.to(Device::cpu());
    file.append(static_cast<const char*>(host.raw_data()), host.nbytes());  // x86-64 and CUDA are little-endian
  }
  write_text_file_atomically(path, file);
}

SafetensorsFile parse_safetensors(std::string_view bytes, std::string_view origin) {
  SN_CHECK(bytes.size() >= kHeaderLengthBytes, "{}: {} bytes is too short for a safetensors file", origin, bytes.size());
  std::uint64_t header_size = 0;
  for (std::size_t i = 0; i < kHeaderLengthBytes; ++i) {
    header_size |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  }
  SN_CHECK(header_size <= bytes.size() - kHeaderLengthBytes,
           "{}: not a safetensors file, or a truncated one (its first 8 bytes give a header of {} bytes, which does not "
           "fit in the file's {} bytes)",
           origin, header_size, bytes.size());
  SN_CHECK(header_size <= kMaxHeaderBytes,
           "{}: its header of {} bytes is larger than the {} bytes a safetensors header may have", origin, header_size,
           kMaxHeaderBytes);
  const std::string_view data = bytes.substr(kHeaderLengthBytes + header_size);

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.substr(kHeaderLengthBytes, header_size));
  } catch (const nlohmann::json::exception& e) {
    SN_FAIL("{}: header is not valid JSON ({})", origin, e.what());
  }
  SN_CHECK(header.is_object(), "{}: header is not a JSON object", origin);

  SafetensorsFile out;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  std::vector<std::pair<std::uint64_t, std::pair<std::string, Tensor>>> by_offset;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      SN_CHECK(entry.is_object(), "{}: __metadata__ is not an object", origin);
      for (const auto& [key, value] : entry.items()) {
        SN_CHECK(value.is_string(), "{}: metadata '{}' is not a string", origin, key);
        out.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    SN_CHECK(!name.empty(), "{}: a tensor has an empty name", origin);
    SN_CHECK(entry.is_object() && entry.contains("dtype") && entry.contains("shape") && entry.contains("data_offsets") &&
                 entry["dtype"].is_string() && entry["shape"].is_array() && entry["data_offsets"].is_array() &&
                 entry["data_offsets"].size() == 2,
             "{}: tensor '{}' needs dtype (string), shape (array) and data_offsets ([begin, end])", origin, name);
    const DType dtype = dtype_from_code(entry["dtype"].get<std::string>(), origin, name);
    Shape shape;
    std::uint64_t numel = 1;
    for (const auto& extent : entry["shape"]) {
      SN_CHECK(extent.is_number_unsigned(), "{}: tensor '{}' has a shape entry that is not a non-negative integer",
               origin, name);
      const auto e = extent.get<std::uint64_t>();
      SN_CHECK(e <= static_cast<std::uint64_t>(INT64_MAX) && !__builtin_mul_overflow(numel, e, &numel) &&
                   numel <= static_cast<std::uint64_t>(INT64_MAX),
               "{}: tensor '{}' shape overflows", origin, name);
      shape.push_back(static_cast<std::int64_t>(e));
    }
    const auto& offsets = entry["data_offsets"];
    SN_CHECK(offsets[0].is_number_unsigned() && offsets[1].is_number_unsigned(),
             "{}: tensor '{}' data_offsets are not non-negative integers", origin, name);
    const auto begin = offsets[0].get<std::uint64_t>(), end = offsets[1].get<std::uint64_t>();
    SN_CHECK(begin <= end && end <= data.size(),
             "{}: tensor '{}' data [{}, {}) lies outside the {} data bytes (the file is truncated or corrupt)", origin,
             name, begin, end, data.size());
    std::uint64_t span_bytes = 0;
    SN_CHECK(!__builtin_mul_overflow(numel, dtype_size(dtype), &span_bytes) && end - begin == span_bytes,
             "{}: tensor '{}' is {} {} but spans {} bytes", origin, name, dtype_name(dtype), shape_str(shape),
             end - begin);
    ranges.emplace_back(begin, end);
    Tensor tensor = Tensor::empty(shape, dtype);
    if (end > begin) std::memcpy(tensor.raw_data(), data.data() + begin, end - begin);
    by_offset.push_back({begin, {name, tensor}});
  }
  // The format forbids overlaps and holes: the tensors tile the data section exactly.
  std::sort(ranges.begin(), ranges.end());
  std::uint64_t covered = 0;
  for (auto [begin, end] : ranges) {
    SN_CHECK(begin == covered, "{}: tensor data overlaps or leaves a gap at byte {}", origin, covered);
    covered = end;
  }
  SN_CHECK(covered == data.size(), "{}: {} trailing bytes after the last tensor", origin, data.size() - covered);
  std::stable_sort(by_offset.begin(), by_offset.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [offset, named] : by_offset) out.tensors.push_back(std::move(named));
  return out;
}

SafetensorsFile load_safetensors(const std::filesystem::path& path) {
  return parse_safetensors(read_file(path, "checkpoint"), path.string());
}

}  // namespace sprintnet

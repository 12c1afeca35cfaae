// Fuzzes the safetensors reader in memory (parse_safetensors). An accepted
// input must describe tensors whose sizes add up to the data section without
// any arithmetic wrapping, and must survive a round trip: written again with
// save_safetensors and read back with load_safetensors, it gives the same
// names, dtypes, shapes, bytes and metadata.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>

#include "fuzz_support.h"
#include "sprintnet/core/error.h"
#include "sprintnet/io/safetensors.h"

namespace sprintnet::fuzz {
namespace {

inline constexpr std::size_t kHeaderLengthBytes = 8;

// The tensor's byte size computed without wrapping; false when it would wrap.
bool exact_nbytes(const Tensor& tensor, std::uint64_t& bytes) {
  bytes = dtype_size(tensor.dtype());
  for (const std::int64_t extent : tensor.shape()) {
    if (extent < 0 || __builtin_mul_overflow(bytes, static_cast<std::uint64_t>(extent), &bytes)) return false;
  }
  return true;
}

void check_file(const SafetensorsFile& file, std::size_t input_size, std::string_view input) {
  std::uint64_t header_size = 0;
  for (std::size_t i = 0; i < kHeaderLengthBytes; ++i) {
    header_size |= std::uint64_t{static_cast<unsigned char>(input[i])} << (8 * i);
  }
  const std::uint64_t data_size = input_size - kHeaderLengthBytes - header_size;
  std::set<std::string> names;
  std::uint64_t total = 0;
  for (const auto& [name, tensor] : file.tensors) {
    require(names.insert(name).second, "a tensor name appears twice");
    require(name != "__metadata__", "a tensor is named __metadata__");
    std::uint64_t bytes = 0;
    require(exact_nbytes(tensor, bytes), "an accepted tensor's shape × dtype size overflows 64 bits");
    require(bytes == tensor.nbytes(), "nbytes() disagrees with shape × dtype size");
    require(!__builtin_add_overflow(total, bytes, &total), "tensor sizes overflow when added");
  }
  require(total == data_size, "the tensors do not tile the data section");
}

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         (a.nbytes() == 0 || std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0);
}

void check_round_trip(const SafetensorsFile& file) {
  static ScratchFile scratch("round-trip.safetensors");
  SafetensorsFile again;
  try {
    save_safetensors(scratch.path(), file.tensors, file.metadata);
    again = load_safetensors(scratch.path());
  } catch (const Error& e) {
    require(false, fmt::format("an accepted file fails its round trip: {}", e.what()));
  }
  require(again.metadata == file.metadata, "metadata changed in the round trip");
  require(again.tensors.size() == file.tensors.size(), "the tensor count changed in the round trip");
  for (std::size_t i = 0; i < file.tensors.size(); ++i) {
    require(again.tensors[i].first == file.tensors[i].first, "tensor order or names changed in the round trip");
    require(same_tensor(again.tensors[i].second, file.tensors[i].second), "a tensor changed in the round trip");
  }
}

}  // namespace
}  // namespace sprintnet::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sprintnet;
  const std::string_view bytes = fuzz::as_text(data, size);
  SafetensorsFile file;
  try {
    file = parse_safetensors(bytes, "fuzz input");
  } catch (const Error&) {
    return 0;  // rejected: the expected outcome for most inputs
  }
  fuzz::check_file(file, size, bytes);
  fuzz::check_round_trip(file);
  return 0;
}

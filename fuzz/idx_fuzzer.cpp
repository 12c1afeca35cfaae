// Fuzzes the IDX reader (read_idx) and the data-set loader built on it
// (load_idx_dataset). Both take paths, so inputs go through scratch files.
//
// Every input is read twice:
//  1. whole, as one IDX file (raw or gzipped: gzip is detected by its magic);
//  2. as an images/labels pair laid out as
//       u16 little-endian L | u8 num_classes | u8 limit | L bytes images | labels
//     (L is clamped to what is there), so the seeds in corpus/idx/pair-* and
//     mutations of them reach the checks that relate the two files.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "fuzz_support.h"
#include "sprintnet/core/error.h"
#include "sprintnet/data/dataset.h"
#include "sprintnet/data/idx.h"

namespace sprintnet::fuzz {
namespace {

inline constexpr std::size_t kPairHeaderBytes = 4;

void check_array(const IdxArray& array) {
  require(!array.dims.empty() && array.dims.size() <= kIdxMaxDims, "read_idx accepted a dimension count outside [1, 4]");
  std::uint64_t expected = idx_element_size(array.type);
  for (auto extent : array.dims) {
    require(extent > 0, "read_idx accepted a zero extent");
    require(!__builtin_mul_overflow(expected, static_cast<std::uint64_t>(extent), &expected),
            "read_idx accepted dimensions whose byte count overflows");
  }
  require(array.bytes.size() == expected, "read_idx returned a payload whose size differs from the header's");
}

void read_single(const std::uint8_t* data, std::size_t size) {
  static ScratchFile file("single.idx");
  try {
    check_array(read_idx(file.write(as_span(data, size))));
  } catch (const Error&) {
    // A rejected file is the expected outcome for most inputs.
  }
}

void check_dataset(const Dataset& set, std::int64_t num_classes, std::int64_t limit) {
  require(set.images.dtype() == DType::kU8 && set.images.dim() == 2, "images are not a uint8 matrix");
  require(set.labels.dtype() == DType::kI32 && set.labels.dim() == 1, "labels are not an int32 vector");
  require(set.images.size(0) == set.labels.numel(), "images and labels disagree on the sample count");
  require(set.images.size(1) == shape_numel(set.sample_shape), "image rows do not hold one sample each");
  require(limit == 0 || set.size() <= limit, "limit was not applied");
  require(set.num_classes > 0 && set.num_classes <= kMaxClasses, "num_classes outside [1, kMaxClasses]");
  require(num_classes == 0 || set.num_classes == num_classes, "the given num_classes was not kept");
  for (const std::int32_t label : set.labels.span<std::int32_t>()) {
    require(label >= 0 && label < set.num_classes, "a label outside [0, num_classes) was accepted");
  }
}

void read_pair(const std::uint8_t* data, std::size_t size) {
  if (size < kPairHeaderBytes) return;
  static ScratchFile images("images.idx");
  static ScratchFile labels("labels.idx");
  const std::size_t images_size = std::min<std::size_t>(data[0] | (std::size_t{data[1]} << 8), size - kPairHeaderBytes);
  const std::int64_t num_classes = data[2];
  const std::int64_t limit = data[3];
  const std::uint8_t* images_begin = data + kPairHeaderBytes;
  images.write(as_span(images_begin, images_size));
  labels.write(as_span(images_begin + images_size, size - kPairHeaderBytes - images_size));
  try {
    check_dataset(load_idx_dataset(images.path(), labels.path(), num_classes, limit), num_classes, limit);
  } catch (const Error&) {
  }
}

}  // namespace
}  // namespace sprintnet::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sprintnet::fuzz::read_single(data, size);
  sprintnet::fuzz::read_pair(data, size);
  return 0;
}

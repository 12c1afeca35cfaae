#pragma once
// IDX files, the format MNIST and Fashion-MNIST ship in: a 4-byte magic
// (0, 0, element type, number of dimensions), one big-endian uint32 per
// dimension, then the elements, big-endian, row-major. Files may be gzipped;
// gzip is detected by its magic bytes (1f 8b), never by the file name.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

namespace sprintnet {

enum class IdxType : std::uint8_t { kU8 = 0x08, kI8 = 0x09, kI16 = 0x0B, kI32 = 0x0C, kF32 = 0x0D, kF64 = 0x0E };

// Bytes per element (1, 2, 4 or 8); throws for a code outside IdxType.
std::size_t idx_element_size(IdxType type);
// "uint8", "int8", "int16", "int32", "float32", "float64".
std::string_view idx_type_name(IdxType type);

inline constexpr std::size_t kIdxMaxDims = 4;

struct IdxArray {
  IdxType type = IdxType::kU8;
  std::vector<std::int64_t> dims;
  std::vector<std::uint8_t> bytes;  // payload, big-endian as stored

  std::int64_t numel() const;
};

// Reads a raw or gzipped IDX file. Every inconsistency (magic, element type,
// dimension count, zero extents, payload shorter or longer than the header
// says, a corrupt gzip stream) throws sprintnet::Error naming the file.
IdxArray read_idx(const std::filesystem::path& path);
// The same parse, checks and errors for a file's bytes already in memory (raw or gzipped), as read once by a
// caller that looked at them first (`predict`: a pipe can be read only once); `origin` names the file.
IdxArray parse_idx(std::span<const std::uint8_t> bytes, std::string_view origin);

// Writes an IDX file (gzipped when `gzip`), through a temporary file renamed
// into place so a reader never sees half a file. `bytes` must hold exactly
// product(dims) elements, big-endian.
void write_idx(const std::filesystem::path& path, IdxType type, const std::vector<std::int64_t>& dims,
               const std::vector<std::uint8_t>& bytes, bool gzip = false);

}  // namespace sprintnet

#pragma once
// Hand-made files for the data tests: IDX headers built byte by byte, so a
// test can write the broken files that write_idx refuses to produce, and a
// scratch folder that is removed when the test ends.
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sprintnet/core/error.h"
#include "support/error_message.h"
#include "sprintnet/core/random.h"
#include "sprintnet/data/idx.h"
#include "support/test_util.h"

namespace sprintnet::test {

// 00 00 <type> <ndims> then each extent as a big-endian uint32.
inline std::vector<std::uint8_t> idx_header(std::uint8_t type_code, const std::vector<std::uint32_t>& dims) {
  std::vector<std::uint8_t> out = {0, 0, type_code, static_cast<std::uint8_t>(dims.size())};
  for (const std::uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(d >> shift));
  }
  return out;
}

inline std::vector<std::uint8_t> concat(std::vector<std::uint8_t> a, const std::vector<std::uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

inline void write_bytes(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("test: cannot write " + path.string());
}

inline void write_gzip_bytes(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes) {
  gzFile out = gzopen(path.c_str(), "wb");
  const bool ok = out != nullptr && gzwrite(out, bytes.data(), static_cast<unsigned>(bytes.size())) ==
                                        static_cast<int>(bytes.size());
  if (gzclose(out) != Z_OK || !ok) throw std::runtime_error("test: cannot write " + path.string());
}

inline std::vector<std::uint8_t> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Bytes uniform in [low, high).
inline std::vector<std::uint8_t> random_bytes(std::size_t n, Generator& gen, unsigned low = 0, unsigned high = 256) {
  std::vector<std::uint8_t> out(n);
  for (auto& b : out) b = static_cast<std::uint8_t>(low + gen.below(high - low));
  return out;
}

// A fresh temporary folder, removed with the object.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name) : path_(temp_dir(name)) {}
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace sprintnet::test

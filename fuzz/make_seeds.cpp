// Writes the seed corpora under fuzz/corpus/ and the config dictionary.
//   sprintnet_fuzz_seeds corpus DIR      the binary seeds: DIR/idx/, DIR/safetensors/
//   sprintnet_fuzz_seeds config-dict FILE every config key, table and choice, from the schema
// The binary seeds are committed (re-run this after a format change); the
// dictionary is made afresh by scripts/fuzz, so it follows the schema. The
// config seeds are plain TOML, written by hand in corpus/config/.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "sprintnet/data/idx.h"
#include "sprintnet/io/config_schema.h"
#include "sprintnet/io/safetensors.h"

namespace sprintnet::fuzz {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

void write_bytes(const fs::path& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  SN_CHECK(out.good(), "cannot write {}", path.string());
}

Bytes read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  SN_CHECK(in.good(), "cannot read {}", path.string());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Payload bytes 0, 1, 2, ... (mod `modulo`): labels stay below a few classes.
Bytes counting(std::size_t n, unsigned modulo = 256) {
  Bytes bytes(n);
  for (std::size_t i = 0; i < n; ++i) bytes[i] = static_cast<std::uint8_t>(i % modulo);
  return bytes;
}

// An IDX file through the library's writer, returned as its bytes.
Bytes idx_file(const fs::path& dir, const std::string& name, IdxType type, const std::vector<std::int64_t>& dims,
               const Bytes& payload, bool gzip) {
  const fs::path path = dir / name;
  write_idx(path, type, dims, payload, gzip);
  return read_bytes(path);
}

Bytes concat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

// The idx fuzzer's pair layout: u16 LE images length | num_classes | limit | images | labels.
Bytes pair(const Bytes& images, const Bytes& labels, std::uint8_t num_classes, std::uint8_t limit) {
  const Bytes header = {static_cast<std::uint8_t>(images.size() & 0xFF), static_cast<std::uint8_t>(images.size() >> 8),
                        num_classes, limit};
  return concat({header, images, labels});
}

void idx_seeds(const fs::path& dir) {
  fs::create_directories(dir);
  const Bytes images = idx_file(dir, "images-u8-3x4x4.idx", IdxType::kU8, {3, 4, 4}, counting(48), false);
  const Bytes images_gz = idx_file(dir, "images-u8-3x4x4.idx.gz", IdxType::kU8, {3, 4, 4}, counting(48), true);
  const Bytes labels = idx_file(dir, "labels-u8-3.idx", IdxType::kU8, {3}, counting(3, 3), false);
  Bytes labels_i32_payload(12, 0);
  for (std::size_t i = 0; i < 3; ++i) labels_i32_payload[4 * i + 3] = static_cast<std::uint8_t>(i * 3);
  const Bytes labels_i32 = idx_file(dir, "labels-i32-3.idx.gz", IdxType::kI32, {3}, labels_i32_payload, true);
  idx_file(dir, "f32-2x3.idx", IdxType::kF32, {2, 3}, counting(24), false);
  idx_file(dir, "f64-1x1x1x2.idx", IdxType::kF64, {1, 1, 1, 2}, counting(16), false);
  idx_file(dir, "i16-5.idx.gz", IdxType::kI16, {5}, counting(10), true);
  idx_file(dir, "i8-2x2.idx", IdxType::kI8, {2, 2}, counting(4), false);

  write_bytes(dir / "pair-u8.bin", pair(images, labels, 0, 0));
  write_bytes(dir / "pair-gz-i32-labels-limit2.bin", pair(images_gz, labels_i32, 10, 2));
  write_bytes(dir / "pair-count-mismatch.bin", pair(images, idx_file(dir, "tmp", IdxType::kU8, {2}, counting(2), false), 0, 0));
  write_bytes(dir / "pair-label-out-of-range.bin", pair(images, labels, 2, 0));
  fs::remove(dir / "tmp");

  // Malformed single files, one defect each.
  write_bytes(dir / "bad-magic.idx", concat({{1, 0, 0x08, 1, 0, 0, 0, 1}, {7}}));
  write_bytes(dir / "unknown-type.idx", {0, 0, 0x0A, 1, 0, 0, 0, 1, 7});
  write_bytes(dir / "five-dims.idx", {0, 0, 0x08, 5, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 7});
  write_bytes(dir / "zero-extent.idx", {0, 0, 0x08, 2, 0, 0, 0, 0, 0, 0, 0, 4});
  write_bytes(dir / "truncated-payload.idx", Bytes(images.begin(), images.end() - 5));
  write_bytes(dir / "trailing-bytes.idx", concat({labels, {1, 2, 3}}));
  write_bytes(dir / "truncated-gzip.idx.gz", Bytes(images_gz.begin(), images_gz.end() - 6));
  // A header promising 4 GiB over 3 bytes: must fail as truncated, not by allocating.
  write_bytes(dir / "claims-4gib.idx", {0, 0, 0x08, 3, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 2, 3});
}

Tensor patterned(Shape shape, DType dtype) {
  Tensor tensor = Tensor::empty(std::move(shape), dtype);
  auto* bytes = static_cast<std::uint8_t*>(tensor.raw_data());
  for (std::size_t i = 0; i < tensor.nbytes(); ++i) bytes[i] = static_cast<std::uint8_t>(i * 37 + 11);
  return tensor;
}

// A safetensors file from a hand-written header and data section.
Bytes raw_safetensors(std::string_view header, std::size_t data_bytes) {
  Bytes out(8, 0);
  for (std::size_t i = 0; i < 8; ++i) out[i] = static_cast<std::uint8_t>((std::uint64_t{header.size()} >> (8 * i)) & 0xFF);
  out.insert(out.end(), header.begin(), header.end());
  const Bytes data = counting(data_bytes);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

void safetensors_seeds(const fs::path& dir) {
  fs::create_directories(dir);
  save_safetensors(dir / "empty.safetensors", {});
  save_safetensors(dir / "one-f32.safetensors", {{"weight", patterned({2, 3}, DType::kF32)}});
  save_safetensors(dir / "mlp.safetensors",
                   {{"0.weight", patterned({4, 3}, DType::kF32)}, {"0.bias", patterned({4}, DType::kF32)},
                    {"2.weight", patterned({2, 4}, DType::kF32)}, {"2.bias", patterned({2}, DType::kF32)}},
                   {{"format", "pt"}, {"step", "120"}});
  save_safetensors(dir / "every-dtype.safetensors",
                   {{"f64", patterned({2}, DType::kF64)}, {"bf16", patterned({3}, DType::kBF16)},
                    {"f16", patterned({1, 2}, DType::kF16)}, {"i32", patterned({2}, DType::kI32)},
                    {"u8", patterned({5}, DType::kU8)}});
  save_safetensors(dir / "zero-size-and-scalar.safetensors",
                   {{"empty", patterned({0, 4}, DType::kF32)}, {"scalar", patterned({}, DType::kF32)}});

  write_bytes(dir / "not-json.safetensors", raw_safetensors("{\"a\": [", 0));
  write_bytes(dir / "header-past-end.safetensors", {0xFF, 0xFF, 0, 0, 0, 0, 0, 0, '{', '}'});
  write_bytes(dir / "unsupported-dtype.safetensors",
              raw_safetensors(R"({"x":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 8));
  write_bytes(dir / "shape-mismatch.safetensors",
              raw_safetensors(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8));
  write_bytes(dir / "overlap.safetensors",
              raw_safetensors(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                              R"("b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
                              6));
  write_bytes(dir / "gap-and-trailing.safetensors",
              raw_safetensors(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})", 6));
  write_bytes(dir / "bad-metadata.safetensors", raw_safetensors(R"({"__metadata__":{"k":1}})", 0));
}

// libFuzzer dictionary: every key as it appears in a file ("lr") and in an
// override ("optim.lr"), each table header, and each string choice.
void config_dict(const fs::path& file) {
  std::set<std::string> tokens;
  for (const ConfigTable& table : config_tables()) {
    if (!table.name.empty()) tokens.insert(fmt::format("[{}]", table.name));
  }
  for (const ConfigKey& key : config_schema()) {
    tokens.insert(std::string(key.name));
    tokens.insert(std::string(key.short_name()));
    for (std::string_view choice : key.constraint.choices) tokens.insert(fmt::format("\"{}\"", choice));
  }
  std::ofstream out(file, std::ios::trunc);
  for (const std::string& token : tokens) {
    out << '"';
    for (char c : token) out << (c == '"' || c == '\\' ? "\\" : "") << c;
    out << "\"\n";
  }
  SN_CHECK(out.good(), "cannot write {}", file.string());
}

}  // namespace
}  // namespace sprintnet::fuzz

int main(int argc, char** argv) {
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  try {
    if (args.size() == 2 && args[0] == "corpus") {
      sprintnet::fuzz::idx_seeds(std::filesystem::path(args[1]) / "idx");
      sprintnet::fuzz::safetensors_seeds(std::filesystem::path(args[1]) / "safetensors");
      return 0;
    }
    if (args.size() == 2 && args[0] == "config-dict") {
      sprintnet::fuzz::config_dict(args[1]);
      return 0;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sprintnet_fuzz_seeds: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: sprintnet_fuzz_seeds corpus DIR | config-dict FILE\n");
  return 2;
}

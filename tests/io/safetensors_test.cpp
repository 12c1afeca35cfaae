// The safetensors reader and writer: a round trip, and rejection of files that
// are inconsistent, including the inputs libFuzzer found (fuzz/crashes/).
#include <gmock/gmock.h>
#include <gtest/gtest.h>


#include "sprintnet/io/read_file.h"
#include "sprintnet/io/safetensors.h"
#include "support/error_message.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::string error_of(std::string_view bytes) {
  try {
    parse_safetensors(bytes, "test.safetensors");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string with_header(const std::string& json, std::size_t data_bytes) {
  std::string file(8, '\0');
  for (std::size_t i = 0; i < 8; ++i) file[i] = static_cast<char>((json.size() >> (8 * i)) & 0xFF);
  return file + json + std::string(data_bytes, '\x01');
}

TEST(Safetensors, RoundTripKeepsNamesShapesValuesAndMetadata) {
  Generator gen(test::test_seed());
  const Tensor w = test::random_uniform({3, 4}, DType::kF32, gen);
  const Tensor y = test::random_labels(5, 7, gen);
  const auto path = test::temp_dir("safetensors") / "m.safetensors";
  save_safetensors(path, {{"0.weight", w}, {"labels", y}}, {{"format", "pt"}});
  const SafetensorsFile file = load_safetensors(path);
  ASSERT_EQ(file.tensors.size(), 2u);
  EXPECT_EQ(file.tensors[0].first, "0.weight");
  EXPECT_EQ(file.tensors[0].second.to_vector<float>(), w.to_vector<float>());
  EXPECT_EQ(file.tensors[1].second.to_vector<std::int32_t>(), y.to_vector<std::int32_t>());
  EXPECT_EQ(file.metadata.at("format"), "pt");
}

TEST(Safetensors, RejectsInconsistentFilesNamingTheProblem) {
  EXPECT_THAT(error_of("abc"), HasSubstr("too short"));
  EXPECT_THAT(error_of(with_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4)),
              HasSubstr("lies outside the 4 data bytes (the file is truncated or corrupt)"));
  // A text file given as a checkpoint: its first 8 bytes read as an absurd header length.
  EXPECT_THAT(error_of("[data]\ndir = \"data\"\n"), HasSubstr("not a safetensors file, or a truncated one"));
  EXPECT_THAT(error_of(with_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8)),
              HasSubstr("spans 8 bytes"));
  EXPECT_THAT(error_of(with_header("{\"a\":{\"dtype\":\"X9\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8)),
              HasSubstr("unsupported dtype"));
  EXPECT_THAT(error_of(with_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8)),
              HasSubstr("trailing"));
  EXPECT_THAT(error_of(with_header("not json", 0)), HasSubstr("not valid JSON"));
  // A header over the reference implementation's 100 MiB that fits in its file: the limit is the reason, not the size.
  const std::string huge_header = "{\"__metadata__\":{\"k\":\"" + std::string((100u << 20) + 1, 'x') + "\"}}";
  EXPECT_THAT(error_of(with_header(huge_header, 0)),
              HasSubstr("larger than the 104857600 bytes a safetensors header may have"));
}

TEST(Safetensors, ShapesWhoseByteCountWrapsAreRejected) {
  // 2^62 fp32 elements are 2^64 bytes: the product wraps to 0 and once matched an empty span.
  EXPECT_THAT(error_of(with_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,0]}}", 0)),
              HasSubstr("a"));
  EXPECT_THAT(error_of(with_header("{\"a\":{\"dtype\":\"F16\",\"shape\":[4611686018427387904,2],\"data_offsets\":[0,0]}}", 0)),
              HasSubstr("overflows"));
}

TEST(Safetensors, AnUndefinedTensorIsNamedWithTheFile) {
  const std::filesystem::path path = test::temp_dir("safetensors-undefined") / "w.safetensors";
  EXPECT_THAT(test::error_message([&] { save_safetensors(path, {{"x", Tensor()}}); }),
              AllOf(HasSubstr(path.string()), HasSubstr("tensor 'x' is undefined")));
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(Safetensors, EmptyNamesAreRejectedOnReadAsOnWrite) {
  EXPECT_THAT(error_of(with_header("{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4)),
              HasSubstr("empty name"));
}

TEST(Safetensors, FuzzerFindingsStayFixed) {
  const auto dir = std::filesystem::path(SPRINTNET_SOURCE_DIR) / "fuzz" / "crashes" / "safetensors";
  ASSERT_TRUE(std::filesystem::exists(dir)) << dir;
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_FALSE(error_of(read_file(entry.path())).empty()) << entry.path() << " was accepted";
    ++files;
  }
  EXPECT_GE(files, 3);
}

}  // namespace
}  // namespace sprintnet

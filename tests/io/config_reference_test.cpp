// docs/CONFIG.md must be what config_reference_markdown() generates from the schema.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "sprintnet/io/atomic_file.h"
#include "sprintnet/io/config.h"
#include "sprintnet/io/config_schema.h"
#include "sprintnet/io/read_file.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

using ::testing::HasSubstr;

TEST(ConfigReference, DocumentsEveryKeyWithItsDefault) {
  const std::string markdown = config_reference_markdown();
  for (const ConfigKey& key : config_schema()) {
    EXPECT_THAT(markdown, HasSubstr(fmt::format("| `{}` |", key.name)));
  }
  EXPECT_THAT(markdown, HasSubstr("| `optim.lr` | float | `0.05` | learning rate"));
  EXPECT_THAT(markdown, HasSubstr("Must be > 0."));
  EXPECT_THAT(markdown, HasSubstr("One of `sgd`, `adam`, `adamw`."));
  EXPECT_THAT(markdown, HasSubstr("| `model.hidden` | integer array | `[256, 256]` |"));
}

TEST(ConfigReference, TheExampleInTheIntroductionLoads) {
  const std::string markdown = config_reference_markdown();
  const auto begin = markdown.find("```toml\n");
  ASSERT_NE(begin, std::string::npos);
  const auto end = markdown.find("```", begin + 8);
  ASSERT_NE(end, std::string::npos);
  const auto path = test::temp_dir("config-example") / "example.toml";
  std::ofstream(path) << markdown.substr(begin + 8, end - begin - 8);
  const Config config = load_config(path);
  EXPECT_EQ(config.optim.type, "adamw");
  EXPECT_EQ(config.model.hidden, (std::vector<std::int64_t>{512, 256}));
}

TEST(ConfigReference, DocsConfigMdIsUpToDate) {
  const std::filesystem::path path = std::filesystem::path(SPRINTNET_SOURCE_DIR) / "docs" / "CONFIG.md";
  const std::string expected = config_reference_markdown();
  const char* update = std::getenv("SPRINTNET_UPDATE_DOCS");
  if (update != nullptr && std::string_view(update) == "1") {
    write_text_file_atomically(path, expected);
    std::printf("wrote %s\n", path.c_str());
  }
  EXPECT_TRUE(try_read_file(path).value_or("") == expected)
      << path << " is out of date with the config schema (src/sprintnet/io/config_schema.cpp). Regenerate it with\n"
      << "  SPRINTNET_UPDATE_DOCS=1 <build>/tests/io/io_test --gtest_filter='ConfigReference.*'\n"
      << "(with SPRINTNET_UPDATE_DOCS=1 this test rewrites the file itself), then review and commit the diff.";
}

}  // namespace
}  // namespace sprintnet

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

// Where the schedules part from torch.optim.lr_scheduler is said beside their keys (optim/lr_schedule.h and
// tools/'s torch comparison hold the proof), not only in lr_schedule.h's comments.
TEST(ConfigReference, TheSchedulesSayWhereTheyDepartFromTorch) {
  const auto description = [](std::string_view name) {
    for (const ConfigKey& key : config_schema()) {
      if (key.name == name) return std::string(key.doc);
    }
    ADD_FAILURE() << name << " is not in the schema";
    return std::string();
  };
  EXPECT_THAT(description("schedule.type"), HasSubstr("OneCycleLR(max_lr = optim.lr, cycle_momentum=False)"));
  EXPECT_THAT(description("schedule.min_lr"), HasSubstr("CosineAnnealingLR with T_max = the run's steps"));
  EXPECT_THAT(description("schedule.min_lr"), HasSubstr("with min_lr = 0 that last step runs at lr 0"));
  EXPECT_THAT(description("schedule.warmup_steps"), HasSubstr("SequentialLR"));
  EXPECT_THAT(description("schedule.warmup_steps"), HasSubstr("ChainedScheduler"));
  EXPECT_THAT(description("schedule.warmup_start_factor"), HasSubstr("first step run at lr 0"));
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

// config_to_toml writes every key so that load_config reads back the same Config,
// checked on random configurations (doubles with all 53 bits, strings needing escapes).
#include <cmath>

#include "config_test_util.h"

namespace sprintnet {
namespace {

std::string random_text(Generator& gen, bool non_empty) {
  // Characters TOML must escape, plus multi-byte UTF-8.
  static const std::vector<std::string> kPieces = {"a",  "Z",    "9",    " ", "_", "/", "\"", "\\", "\n",
                                                   "\t", "\x01", "\x7f", "é", "→", "#", "'",  "="};
  const std::uint64_t length = gen.below(8) + (non_empty ? 1 : 0);
  std::string text;
  for (std::uint64_t i = 0; i < length; ++i) text += kPieces[gen.below(kPieces.size())];
  return text;
}

// A uniformly random double within the key's bounds, with a random magnitude when unbounded above.
double random_float(const Constraint& c, Generator& gen) {
  const double low = c.low ? c.low->value : 0.0;
  if (!c.high) return low + std::pow(10.0, gen.uniform(-9.0, 6.0));  // above low, so an exclusive bound holds
  for (;;) {
    const double value = low + (c.high->value - low) * gen.uniform_double();  // in [low, high)
    if (value != low || !c.low || c.low->inclusive) return value;
  }
}

ConfigValue random_value(const ConfigKey& key, Generator& gen) {
  const Constraint& c = key.constraint;
  switch (key.kind) {
    case ValueKind::kBool: return gen.below(2) == 1;
    case ValueKind::kInteger: {
      if (key.name == "seed") return static_cast<std::int64_t>(gen.next_u32()) << 31 | gen.next_u32();
      const auto low = static_cast<std::int64_t>(c.low ? c.low->value : 0.0);
      // Within an inclusive upper bound where there is one (model.classes), else up to 100000 above low.
      const std::uint64_t span = c.high ? static_cast<std::uint64_t>(c.high->value - static_cast<double>(low)) + 1 : 100000;
      return low + static_cast<std::int64_t>(gen.below(span));
    }
    case ValueKind::kFloat: return random_float(c, gen);
    case ValueKind::kString: {
      if (c.choices.empty()) return random_text(gen, c.non_empty);
      const std::string choice(c.choices[gen.below(c.choices.size())]);
      return choice == "cuda:N" ? fmt::format("cuda:{}", gen.below(16)) : choice;
    }
    case ValueKind::kIntegerList: {
      std::vector<std::int64_t> list(gen.below(5));
      for (auto& width : list) width = 1 + static_cast<std::int64_t>(gen.below(4096));
      return list;
    }
  }
  return {};
}

Config random_config(Generator& gen) {
  for (;;) {
    Config config;
    for (const ConfigKey& key : config_schema()) {
      const ConfigValue value = random_value(key, gen);
      EXPECT_EQ(check_config_value(key, value), std::nullopt) << key.name << " = " << format_toml_value(value);
      key.set(config, value);
    }
    // Half of the random configs combine nesterov with dampening; draw again.
    if (check_config_consistency(config).empty()) return config;
  }
}

TEST(ConfigRoundTrip, RandomConfigsSurviveTomlAndBack) {
  Generator gen(test::test_seed());
  for (int trial = 0; trial < 20; ++trial) {
    const Config original = random_config(gen);
    const std::string toml = config_to_toml(original);
    // The config must differ from the defaults, or the test would pass with a loader that ignores the file.
    ASSERT_NE(toml, config_to_toml(Config{}));
    const Config loaded = load_config(test::write_toml(toml, "resolved.toml"));
    SCOPED_TRACE(toml);
    test::expect_same_config(loaded, original);
    EXPECT_EQ(config_to_toml(loaded), toml);
  }
}

TEST(ConfigRoundTrip, DefaultsSurviveAndEveryKeyIsWritten) {
  const std::string toml = config_to_toml(Config{});
  for (const ConfigKey& key : config_schema()) {
    EXPECT_NE(toml.find(fmt::format("\n{} = ", key.short_name())), std::string::npos) << key.name;
  }
  test::expect_same_config(load_config(test::write_toml(toml, "defaults.toml")), Config{});
  EXPECT_NE(toml.find("final_div_factor = 10000.0\n"), std::string::npos) << "floats keep a '.'";
  EXPECT_NE(toml.find("eps = 1e-08\n"), std::string::npos);
}

}  // namespace
}  // namespace sprintnet

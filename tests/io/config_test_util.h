#pragma once
// Helpers for the config tests: write a TOML file, load it, catch the error text.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sprintnet/core/error.h"
#include "sprintnet/io/config.h"
#include "sprintnet/io/config_schema.h"
#include "support/test_util.h"

namespace sprintnet::test {

// Writes `text` to <fresh temp dir>/<name> and returns the path.
inline std::filesystem::path write_toml(const std::string& text, const std::string& name = "bad.toml") {
  const auto path = temp_dir("config") / name;
  std::ofstream(path) << text;
  return path;
}

// The message of the sprintnet::Error that loading throws; a test failure when nothing is thrown.
inline std::string load_error(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    load_config(write_toml(text), overrides);
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected an error loading:\n" << text;
  return {};
}

inline std::string overrides_error(const std::vector<std::string>& overrides) {
  try {
    config_from_overrides(overrides);
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected an error from the overrides";
  return {};
}

// Every key of `actual` equals `expected`'s, compared exactly (doubles bit for bit).
inline void expect_same_config(const Config& actual, const Config& expected) {
  for (const ConfigKey& key : config_schema()) {
    EXPECT_TRUE(key.get(actual) == key.get(expected))
        << key.name << ": " << format_toml_value(key.get(actual)) << " vs " << format_toml_value(key.get(expected));
  }
}

// "[optim]\nlr = 0.1\n" for "optim.lr", "0.1"; top-level keys have no table line.
inline std::string toml_setting(const ConfigKey& key, const std::string& value_text) {
  const std::string assignment = std::string(key.short_name()) + " = " + value_text + "\n";
  return key.table().empty() ? assignment : "[" + std::string(key.table()) + "]\n" + assignment;
}

}  // namespace sprintnet::test

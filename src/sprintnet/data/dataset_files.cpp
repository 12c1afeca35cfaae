#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "sprintnet/data/dataset.h"
#include "sprintnet/io/read_file.h"

namespace sprintnet {
namespace {

// The names scripts/get-data writes (MNIST's own names; Fashion-MNIST reuses them).
inline constexpr std::array<std::string_view, 4> kStandardFileNames = {
    "train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};

// A data file that exists but cannot be used is named with the reason, not reported missing.
bool is_file(const std::filesystem::path& path) {
  const std::optional<std::string> problem = file_problem(path);
  SN_CHECK(!problem || *problem == kNoSuchFile, "data file {}: {}", path.string(), *problem);
  return !problem;
}

// <folder>/<name>, else <folder>/<name>.gz. Raw first: it loads without inflating.
std::filesystem::path find_standard_file(const std::filesystem::path& folder, std::string_view name,
                                         const DataConfig& config) {
  const auto raw = folder / name;
  if (is_file(raw)) return raw;
  auto gz = raw;
  gz += ".gz";
  if (is_file(gz)) return gz;
  const std::string fetch = config.dir == "data" ? "scripts/get-data" : fmt::format("scripts/get-data --dir {}", config.dir);
  const std::string relative_note =
      folder.is_relative() ? fmt::format(" (data.dir = \"{}\" is relative to the working directory)", config.dir) : "";
  SN_FAIL("{} data file {} not found (nor {}.gz): run {} to fetch it{}", config.dataset,
          std::filesystem::absolute(raw).lexically_normal().string(), name, fetch, relative_note);
}

// A relative path is relative to the working directory, which may not be where the config is.
std::filesystem::path explicit_file(const std::string& value, std::string_view key) {
  SN_CHECK(!value.empty(),
           "{} is empty: data.dataset = \"idx\" reads the files that data.train_images, data.train_labels, "
           "data.test_images and data.test_labels name",
           key);
  const std::optional<std::string> problem = file_problem(value);
  const std::filesystem::path path(value);
  SN_CHECK(!problem, "{} = \"{}\": {}{}", key, value, problem.value_or(""),
           path.is_relative() ? fmt::format(" (relative to the working directory: {})",
                                            std::filesystem::absolute(path).lexically_normal().string())
                              : std::string());
  return path;
}

}  // namespace

SplitFiles dataset_split_files(const DataConfig& config, Split split) {
  const bool train = split == Split::kTrain;
  if (config.dataset == "mnist" || config.dataset == "fashion-mnist") {
    const std::filesystem::path folder = std::filesystem::path(config.dir) / config.dataset;
    return {find_standard_file(folder, kStandardFileNames[train ? 0 : 2], config),
            find_standard_file(folder, kStandardFileNames[train ? 1 : 3], config)};
  }
  if (config.dataset == "idx") {
    return train ? SplitFiles{explicit_file(config.train_images, "data.train_images"),
                              explicit_file(config.train_labels, "data.train_labels")}
                 : SplitFiles{explicit_file(config.test_images, "data.test_images"),
                              explicit_file(config.test_labels, "data.test_labels")};
  }
  SN_FAIL("data.dataset = \"{}\" is not a known dataset; accepted: mnist, fashion-mnist, idx", config.dataset);
}

DatasetFiles dataset_files(const DataConfig& config) {
  const SplitFiles train = dataset_split_files(config, Split::kTrain);
  const SplitFiles test = dataset_split_files(config, Split::kTest);
  return {train.images, train.labels, test.images, test.labels};
}

}  // namespace sprintnet

#pragma once
// The PyTorch golden data of tools/make_golden.py: named tensors plus a JSON
// description ("golden" metadata) of the model and every hyperparameter, so
// the C++ side repeats the run without repeating any number in code.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sprintnet/core/tensor.h"

namespace sprintnet::parity {

inline constexpr const char* kGoldenFileName = "mlp_sgd_adamw.safetensors";
// tests/parity/golden/ in the source tree.
std::filesystem::path golden_dir();

class GoldenFile {
 public:
  // Throws sprintnet::Error naming the path and how to make the file when it is missing or malformed.
  static GoldenFile load(const std::filesystem::path& path);

  // The tensor called `name`; throws naming it when absent.
  const Tensor& tensor(const std::string& name) const;
  // Replaces (or adds) a tensor: lets a test corrupt the reference and see the comparison fail.
  void set_tensor(const std::string& name, Tensor value) { tensors_[name] = std::move(value); }
  const nlohmann::json& description() const { return description_; }
  const std::filesystem::path& path() const { return path_; }

  // Accessors for the description's fields.
  std::vector<std::int64_t> layers() const;
  std::int64_t steps() const;
  std::int64_t batches() const;
  const nlohmann::json& optimizer(const std::string& name) const;

 private:
  std::filesystem::path path_;
  std::map<std::string, Tensor> tensors_;
  nlohmann::json description_;
};

}  // namespace sprintnet::parity

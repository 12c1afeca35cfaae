#include "parity/golden_file.h"

#include "sprintnet/io/safetensors.h"

namespace sprintnet::parity {
namespace {

constexpr const char* kFormat = "sprintnet-parity-golden-1";
constexpr const char* kHowToMake =
    "it is made by PyTorch: python3 tools/make_golden.py --out tests/parity/golden/ (see tools/README.md)";

}  // namespace

std::filesystem::path golden_dir() {
  return std::filesystem::path(SPRINTNET_SOURCE_DIR) / "tests" / "parity" / "golden";
}

GoldenFile GoldenFile::load(const std::filesystem::path& path) {
  SN_CHECK(std::filesystem::is_regular_file(path), "golden file {} is missing: {}", path.string(), kHowToMake);
  SafetensorsFile file = load_safetensors(path);
  GoldenFile golden;
  golden.path_ = path;
  for (auto& [name, tensor] : file.tensors) golden.tensors_.emplace(name, std::move(tensor));
  const auto it = file.metadata.find("golden");
  SN_CHECK(it != file.metadata.end(), "{}: no \"golden\" metadata; {}", path.string(), kHowToMake);
  try {
    golden.description_ = nlohmann::json::parse(it->second);
  } catch (const nlohmann::json::exception& e) {
    SN_FAIL("{}: the \"golden\" metadata is not JSON ({})", path.string(), e.what());
  }
  SN_CHECK(golden.description_.value("format", "") == kFormat, "{}: format is {}, this test reads {}; {}",
           path.string(), golden.description_.value("format", "(none)"), kFormat, kHowToMake);
  return golden;
}

const Tensor& GoldenFile::tensor(const std::string& name) const {
  const auto it = tensors_.find(name);
  SN_CHECK(it != tensors_.end(), "{}: no tensor '{}'", path_.string(), name);
  return it->second;
}

std::vector<std::int64_t> GoldenFile::layers() const {
  return description_.at("layers").get<std::vector<std::int64_t>>();
}
std::int64_t GoldenFile::steps() const { return description_.at("steps").get<std::int64_t>(); }
std::int64_t GoldenFile::batches() const { return description_.at("batches").get<std::int64_t>(); }

const nlohmann::json& GoldenFile::optimizer(const std::string& name) const {
  const auto& optimizers = description_.at("optimizers");
  SN_CHECK(optimizers.contains(name), "{}: no optimizer '{}' in the description", path_.string(), name);
  return optimizers.at(name);
}

}  // namespace sprintnet::parity

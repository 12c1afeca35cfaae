#include "support/test_util.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <utility>

#include "sprintnet/io/read_file.h"

namespace sprintnet::test {

std::uint64_t test_seed() {
  static const std::uint64_t seed = [] {
    if (const char* env = std::getenv("SPRINTNET_TEST_SEED")) return static_cast<std::uint64_t>(std::strtoull(env, nullptr, 10));
    return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }();
  return seed;
}

std::uint64_t config_seed() {
  return test_seed() & static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
}

Tensor random_uniform(const Shape& shape, DType dtype, Generator& gen, double low, double high, Device device) {
  std::vector<double> values(static_cast<std::size_t>(shape_numel(shape)));
  for (double& v : values) v = gen.uniform(low, high);
  return Tensor::from_vector(values, shape).to(dtype).to(device);
}

Tensor random_labels(std::int64_t n, std::int64_t classes, Generator& gen, Device device) {
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
  for (auto& y : labels) y = static_cast<std::int32_t>(gen.below(static_cast<std::uint64_t>(classes)));
  return Tensor::from_vector(labels, {n}, device);
}

Dataset random_dataset(const std::string& name, std::int64_t n, std::int64_t features, std::int64_t classes,
                       Generator& gen) {
  std::vector<std::uint8_t> pixels(static_cast<std::size_t>(n * features));
  for (auto& p : pixels) p = static_cast<std::uint8_t>(gen.below(256));
  Tensor images = Tensor::from_vector(pixels, {n, features});
  return Dataset{name, std::move(images), random_labels(n, classes, gen), {features}, classes};
}

// NaN in floating point; in int32 the one value no index, label or count takes (90, the old poison, was a valid
// permutation entry); bytes have no such value: 0x5A.
Tensor poisoned(const Shape& shape, DType dtype, Device device) {
  const double poison = is_floating(dtype)      ? std::numeric_limits<double>::quiet_NaN()
                        : dtype == DType::kI32 ? static_cast<double>(std::numeric_limits<std::int32_t>::min())
                                               : 0x5A;
  return Tensor::full(shape, poison, dtype, device);
}

double relative_error(const Tensor& a, const Tensor& b) {
  SN_CHECK(a.numel() == b.numel(), "relative_error: {} vs {} elements", a.numel(), b.numel());
  const auto x = a.to_vector<double>(), y = b.to_vector<double>();
  double diff = 0.0, ref = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) != std::isnan(y[i])) return std::numeric_limits<double>::infinity();
    diff += (x[i] - y[i]) * (x[i] - y[i]);
    ref += y[i] * y[i];
  }
  if (std::isnan(diff)) return std::numeric_limits<double>::infinity();
  return std::sqrt(diff) / std::max(std::sqrt(ref), 1e-300);
}

double max_abs_difference(const Tensor& a, const Tensor& b) {
  const auto x = a.to_vector<double>(), y = b.to_vector<double>();
  double worst = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double d = std::abs(x[i] - y[i]);
    if (std::isnan(d)) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, d);
  }
  return worst;
}

bool all_finite(const Tensor& t) {
  for (double v : t.to_vector<double>()) {
    if (!std::isfinite(v)) return false;
  }
  return true;
}

bool all_zero(const Tensor& t) {
  for (double v : t.to_vector<double>()) {
    if (v != 0.0) return false;
  }
  return true;
}

std::filesystem::path data_dir() {
  if (const char* env = std::getenv("SPRINTNET_DATA_DIR")) return env;
  return SPRINTNET_DATA_DIR;
}

std::filesystem::path temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   fmt::format("sprintnet-test-{}-{}", name, std::chrono::steady_clock::now().time_since_epoch().count());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string file_bytes(const std::filesystem::path& path) { return try_read_file(path).value_or(std::string()); }

}  // namespace sprintnet::test

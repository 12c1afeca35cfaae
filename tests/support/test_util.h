#pragma once
// Helpers every test uses: fresh random inputs, poisoned outputs, and
// comparisons by normalised error with the tolerance stated at the call site.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "sprintnet/core/random.h"
#include "sprintnet/core/tensor.h"
#include "sprintnet/data/dataset.h"

namespace sprintnet::test {

// A seed that differs per test run unless SPRINTNET_TEST_SEED is set; printed
// by the test main so a failure can be replayed.
std::uint64_t test_seed();
// test_seed() as a config's `seed`: TOML integers are signed, so it is kept below 2^63.
std::uint64_t config_seed();

// Uniform values in [low, high) of the given dtype, on `device`.
Tensor random_uniform(const Shape& shape, DType dtype, Generator& gen, double low = -1.0, double high = 1.0,
                      Device device = Device::cpu());
// Labels uniform in [0, classes), int32.
Tensor random_labels(std::int64_t n, std::int64_t classes, Generator& gen, Device device = Device::cpu());
// A data set of `n` samples of uniform uint8 pixels (drawn first) and random_labels (then), on the CPU.
Dataset random_dataset(const std::string& name, std::int64_t n, std::int64_t features, std::int64_t classes,
                       Generator& gen);
// A tensor filled with NaN (floating) or 0x5A bytes (integer): any element an op fails to write shows.
Tensor poisoned(const Shape& shape, DType dtype, Device device = Device::cpu());

// ||a - b|| / max(||b||, tiny), over all elements, in double.
double relative_error(const Tensor& a, const Tensor& b);
double max_abs_difference(const Tensor& a, const Tensor& b);
bool all_finite(const Tensor& t);
bool all_zero(const Tensor& t);

// The data/ folder scripts/get-data fills (SPRINTNET_DATA_DIR overrides).
std::filesystem::path data_dir();
// A fresh, empty temporary directory for this test.
std::filesystem::path temp_dir(const std::string& name);
// The bytes of a file (empty when it cannot be read).
std::string file_bytes(const std::filesystem::path& path);

}  // namespace sprintnet::test

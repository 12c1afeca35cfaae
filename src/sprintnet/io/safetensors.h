#pragma once
// Reading and writing the safetensors format (huggingface/safetensors):
//   u64 little-endian N | N bytes of JSON header | raw little-endian tensor data
// The header maps each name to {"dtype", "shape", "data_offsets": [begin, end)}
// relative to the data section, plus an optional "__metadata__" of strings.
// Writes are atomic (temp file, fsync, rename); reads validate the header,
// dtypes, shapes and offsets against the file size before touching data.
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sprintnet/core/tensor.h"

namespace sprintnet {

using TensorList = std::vector<std::pair<std::string, Tensor>>;
using Metadata = std::map<std::string, std::string>;

struct SafetensorsFile {
  TensorList tensors;  // CPU tensors, in the order of their data offsets
  Metadata metadata;
};

void save_safetensors(const std::filesystem::path& path, const TensorList& tensors, const Metadata& metadata = {});
SafetensorsFile load_safetensors(const std::filesystem::path& path);
// The same checks on bytes already in memory; `origin` names them in errors.
SafetensorsFile parse_safetensors(std::string_view bytes, std::string_view origin);

}  // namespace sprintnet

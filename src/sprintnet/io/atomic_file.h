#pragma once
// Writing a file so that readers see either the old contents or the new, never
// a half-written file: a crash mid-write leaves the previous version intact.
#include <filesystem>
#include <string_view>

namespace sprintnet {

// Writes `contents` to a temporary file beside `path`, fsyncs it, renames it
// over `path` and fsyncs the directory. The directory must exist. Throws
// sprintnet::Error naming the path on any failure, and leaves no temporary behind.
void write_text_file_atomically(const std::filesystem::path& path, std::string_view contents);

}  // namespace sprintnet

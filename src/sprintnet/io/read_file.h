#pragma once
// Reading a whole file into memory: one reader for configs, weights, metrics, images and /proc
// files, so every failure says the same thing (the file, what it is, and the system's reason).
#include <cstddef>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace sprintnet {

// The bytes of `path`, as they are. Reads until the end rather than trusting the size the file
// system reports, so /proc files (which report 0) read whole. Throws sprintnet::Error
// "cannot open <what> '<path>': <reason>" or "cannot read <what> '<path>': <reason>", the reason
// the system's (strerror: "No such file or directory", "Is a directory", ...).
// A file of more than `max_bytes` is refused ("cannot read <what> '<path>': it holds more than <max_bytes> bytes,
// the most accepted"): at once where its size says so, else (a pipe) once one byte past the limit has come, so
// that nothing past it is read or kept.
inline constexpr std::size_t kNoByteLimit = std::numeric_limits<std::size_t>::max();
std::string read_file(const std::filesystem::path& path, std::string_view what = "file",
                      std::size_t max_bytes = kNoByteLimit);

// The same, or nullopt where read_file would throw: for a file whose absence is an answer (a
// /proc file on a system without it), not an error.
std::optional<std::string> try_read_file(const std::filesystem::path& path);

// What `path` is when it is not a regular file (a link is followed), to follow "<path>: " in an error, so that a
// path that exists is not reported missing: kNoSuchFile, "it is a directory", "it is a character device" (/dev/null),
// "it is a block device", "it is a pipe", "it is a socket", or the system's reason ("Permission denied").
// nullopt for a regular file.
inline constexpr std::string_view kNoSuchFile = "no such file";
std::optional<std::string> file_problem(const std::filesystem::path& path);

}  // namespace sprintnet

#pragma once
// What every fuzz target shares: scratch files for readers that take a path,
// and the line between an expected rejection and a finding. A reader that
// throws sprintnet::Error has done its job; any other exception, a crash, a
// sanitizer report, or a broken invariant (require()) is a finding.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace sprintnet::fuzz {

// A file the target rewrites for every input. It lives in
// $SPRINTNET_FUZZ_SCRATCH (scripts/fuzz points it at a folder it removes, so
// a crashed run leaves nothing behind), else on tmpfs when there is one (no
// disk traffic at thousands of inputs a second). Its name carries the process
// id, so parallel fuzzers (-jobs) never share it.
class ScratchFile {
 public:
  explicit ScratchFile(std::string_view name) : path_(scratch_dir() / fmt::format("sprintnet-fuzz-{}-{}", ::getpid(), name)) {}
  ~ScratchFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  const std::filesystem::path& write(std::span<const std::uint8_t> bytes) {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (out.fail()) die(fmt::format("cannot write scratch file {}", path_.string()));
    return path_;
  }
  const std::filesystem::path& write(std::string_view text) {
    return write({reinterpret_cast<const std::uint8_t*>(text.data()), text.size()});
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  static std::filesystem::path scratch_dir() {
    if (const char* dir = std::getenv("SPRINTNET_FUZZ_SCRATCH"); dir != nullptr && *dir != '\0') return dir;
    std::error_code ec;
    if (std::filesystem::is_directory("/dev/shm", ec)) return "/dev/shm";
    return std::filesystem::temp_directory_path();
  }
  [[noreturn]] static void die(const std::string& message) {
    std::fprintf(stderr, "fuzz harness: %s\n", message.c_str());
    std::abort();
  }

  std::filesystem::path path_;
};

// A property every accepted input must have. abort() makes libFuzzer save the
// input as a crash, with the message above its report.
inline void require(bool holds, std::string_view what) {
  if (holds) return;
  std::fprintf(stderr, "fuzz invariant broken: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

inline std::span<const std::uint8_t> as_span(const std::uint8_t* data, std::size_t size) { return {data, size}; }

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace sprintnet::fuzz

#include "sprintnet/tensorboard/event_file_writer.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <boost/crc.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "sprintnet/core/error.h"
#include "sprintnet/tensorboard/event.pb.h"

namespace sprintnet::tensorboard {
namespace {

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) return "localhost";
  return name.data();
}

// Makes the names of files opened within one second by one process differ (as PyTorch's do).
int next_file_number() {
  static std::atomic<int> counter{0};
  return counter++;
}

// Little-endian, as TFRecord's length and checksums are.
template <typename T>
std::string little_endian(T value) {
  std::string bytes(sizeof(T), '\0');
  for (std::size_t i = 0; i < sizeof(T); ++i) bytes[i] = static_cast<char>((value >> (8 * i)) & 0xFF);
  return bytes;
}

}  // namespace

std::uint32_t masked_crc32c(std::string_view bytes) {
  // CRC-32C (Castagnoli): polynomial 0x1EDC6F41, reflected, initial and final XOR all ones.
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(bytes.data(), bytes.size());
  const std::uint32_t c = crc.checksum();
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

EventFileWriter::EventFileWriter(const std::filesystem::path& dir)
    : path_(dir / fmt::format("{}{}.{}.{}.{}", kEventFilePrefix, static_cast<long long>(unix_seconds()), host_name(),
                              getpid(), next_file_number())) {
  out_.open(path_, std::ios::binary | std::ios::trunc);
  SN_CHECK(out_.is_open(), "cannot create TensorBoard event file '{}': {}", path_.string(), std::strerror(errno));
  proto::Event event;
  event.set_wall_time(unix_seconds());
  event.set_file_version("brain.Event:2");
  try {
    write_record(event.SerializeAsString());
  } catch (const Error&) {
    // A full disk: the file just created (its name is this process's alone) would stay behind
    // empty, and TensorBoard would list a run with nothing in it. The error names the file and why.
    out_.close();
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
    throw;
  }
}

void EventFileWriter::add_scalars(std::int64_t step, const std::vector<std::pair<std::string, double>>& scalars) {
  proto::Event event;
  event.set_wall_time(unix_seconds());
  event.set_step(step);
  for (const auto& [tag, value] : scalars) {
    proto::SummaryValue* v = event.mutable_summary()->add_value();
    v->set_tag(tag);
    v->set_simple_value(static_cast<float>(value));
  }
  write_record(event.SerializeAsString());
}

void EventFileWriter::add_session_start(std::int64_t step) {
  proto::Event event;
  event.set_wall_time(unix_seconds());
  event.set_step(step);
  event.mutable_session_log()->set_status(proto::SessionLog::START);
  write_record(event.SerializeAsString());
}

void EventFileWriter::write_record(const std::string& data) {
  const std::string length = little_endian<std::uint64_t>(data.size());
  out_ << length << little_endian<std::uint32_t>(masked_crc32c(length)) << data
       << little_endian<std::uint32_t>(masked_crc32c(data));
  out_.flush();
  SN_CHECK(out_.good(), "cannot write TensorBoard event file '{}': {}", path_.string(), std::strerror(errno));
}

}  // namespace sprintnet::tensorboard

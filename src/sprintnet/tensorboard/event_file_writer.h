#pragma once
// TensorBoard event files: `tensorboard --logdir runs/` shows a run's scalars while it trains.
// Messages are encoded by protobuf (event.proto: TensorFlow's Event/Summary field numbers), framed
// as TFRecords (length, masked CRC-32C of the length, data, masked CRC-32C of the data; the CRC
// from Boost.CRC) and flushed after every step's scalars, so a reader sees them at once. A crash
// leaves at most a truncated last record, which TensorBoard's reader skips.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sprintnet::tensorboard {

// TensorBoard finds files by this prefix.
inline constexpr std::string_view kEventFilePrefix = "events.out.tfevents.";

// TFRecord's checksum: CRC-32C rotated right by 15 bits plus a constant.
std::uint32_t masked_crc32c(std::string_view bytes);

class EventFileWriter {
 public:
  // Creates <dir>/events.out.tfevents.<unix seconds>.<host>.<pid>.<n> and writes the file-version event.
  // Throws sprintnet::Error naming the file and the system's reason when either fails; a file it
  // created but could not write is removed first.
  explicit EventFileWriter(const std::filesystem::path& dir);
  // One event with every (tag, value) of this step.
  void add_scalars(std::int64_t step, const std::vector<std::pair<std::string, double>>& scalars);
  // A session START at `step`: TensorBoard then discards what the folder's earlier files logged at steps >=
  // `step` (a run resumed after a crash re-does those epochs), as PyTorch's SummaryWriter(purge_step=step).
  void add_session_start(std::int64_t step);
  const std::filesystem::path& path() const { return path_; }

 private:
  void write_record(const std::string& data);
  std::filesystem::path path_;
  std::ofstream out_;
};

}  // namespace sprintnet::tensorboard

#include "sprintnet/tensorboard/event_file_writer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sprintnet/io/metrics_writer.h"
#include "sprintnet/io/read_file.h"
#include "sprintnet/tensorboard/event.pb.h"
#include "support/error_message.h"
#include "support/full_disk.h"
#include "support/test_util.h"

namespace sprintnet::tensorboard {
namespace {

std::uint64_t read_little_endian(const std::string& bytes, std::size_t at, std::size_t width) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < width; ++i) value |= std::uint64_t(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return value;
}

// Reads TFRecords back the way TensorBoard's reader does, checking both checksums of each.
std::vector<proto::Event> read_events(const std::filesystem::path& path) {
  const std::string bytes = read_file(path);
  std::vector<proto::Event> events;
  std::size_t at = 0;
  while (at < bytes.size()) {
    EXPECT_LE(at + 12, bytes.size());
    const std::uint64_t length = read_little_endian(bytes, at, 8);
    EXPECT_EQ(read_little_endian(bytes, at + 8, 4), masked_crc32c(std::string_view(bytes).substr(at, 8)));
    const std::string data = bytes.substr(at + 12, length);
    EXPECT_EQ(read_little_endian(bytes, at + 12 + length, 4), masked_crc32c(data));
    proto::Event event;
    EXPECT_TRUE(event.ParseFromString(data));
    events.push_back(event);
    at += 12 + length + 4;
  }
  return events;
}

TEST(EventFile, MaskedCrc32cMatchesTheCastagnoliCheckValue) {
  // CRC-32C("123456789") = 0xE3069283 (the published check value), then TFRecord's mask.
  const std::uint32_t crc = 0xE3069283u;
  EXPECT_EQ(masked_crc32c("123456789"), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

TEST(EventFile, ScalarsReadBackWithTagsStepsAndValues) {
  const std::filesystem::path dir = test::temp_dir("tensorboard");
  std::filesystem::path path;
  {
    EventFileWriter writer(dir);
    path = writer.path();
    writer.add_scalars(100, {{"loss/train", 0.25}, {"lr", 0.05}});
    writer.add_scalars(200, {{"loss/train", 0.125}, {"accuracy/test", 0.98}});
  }
  EXPECT_EQ(path.filename().string().rfind(kEventFilePrefix, 0), 0u) << path;
  const std::vector<proto::Event> events = read_events(path);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  EXPECT_EQ(events[1].step(), 100);
  ASSERT_EQ(events[1].summary().value_size(), 2);
  EXPECT_EQ(events[1].summary().value(0).tag(), "loss/train");
  EXPECT_FLOAT_EQ(events[1].summary().value(0).simple_value(), 0.25f);
  EXPECT_EQ(events[1].summary().value(1).tag(), "lr");
  EXPECT_EQ(events[2].step(), 200);
  EXPECT_FLOAT_EQ(events[2].summary().value(1).simple_value(), 0.98f);
  EXPECT_GT(events[2].wall_time(), events[0].wall_time() - 1.0);
}

TEST(EventFile, AZeroValueIsWrittenNotLeftOut) {
  // The learning rate ends at 0 under a cosine schedule. proto3 leaves a plain float field out when it
  // is 0, and TensorBoard's reader then drops the value: it must be on the wire (a oneof member).
  const std::filesystem::path dir = test::temp_dir("tensorboard-zero");
  std::filesystem::path path;
  {
    EventFileWriter writer(dir);
    path = writer.path();
    writer.add_scalars(7, {{"optim/learning_rate", 0.0}});
  }
  const std::vector<proto::Event> events = read_events(path);
  ASSERT_EQ(events.size(), 2u);
  ASSERT_EQ(events[1].summary().value_size(), 1);
  EXPECT_TRUE(events[1].summary().value(0).has_simple_value());
  EXPECT_EQ(events[1].summary().value(0).simple_value(), 0.0f);
}

std::vector<std::filesystem::path> event_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind(kEventFilePrefix, 0) == 0) files.push_back(entry.path());
  }
  return files;
}

TEST(EventFile, EveryMetricsRowIsAnEventWithItsScalars) {
  const std::filesystem::path run = test::temp_dir("tensorboard-run");
  {
    MetricsWriter metrics(run, false);
    MetricsRow row;
    row.step = 469;
    row.epoch = 1;
    row.train_loss = 0.3;
    row.test_loss = 0.2;
    row.test_accuracy = 0.95;
    row.samples_per_s = 120000;
    row.lr = 0.05;
    metrics.write(row);
    row.step = 938;
    row.epoch = 2;
    row.test_loss.reset();
    row.test_accuracy.reset();
    row.lr = 0.01;
    metrics.write(row);
  }
  const std::vector<std::filesystem::path> files = event_files(run);
  ASSERT_EQ(files.size(), 1u);
  const std::vector<proto::Event> events = read_events(files[0]);
  ASSERT_EQ(events.size(), 3u);
  std::vector<std::string> tags;
  for (const auto& v : events[1].summary().value()) tags.push_back(v.tag());
  EXPECT_EQ(tags, (std::vector<std::string>{"loss/train", "loss/test", "accuracy/test", "optim/learning_rate",
                                            "speed/samples_per_s", "speed/epoch_time_s"}));
  EXPECT_EQ(events[1].step(), 469);
  EXPECT_FLOAT_EQ(events[1].summary().value(2).simple_value(), 0.95f);
  EXPECT_EQ(events[2].step(), 938);
  EXPECT_EQ(events[2].summary().value_size(), 4);  // no test numbers in this row
  EXPECT_FLOAT_EQ(events[2].summary().value(1).simple_value(), 0.01f);
  // A resumed run's writer adds a second file beside the first, never truncating it. Resumed after epoch 1 (a
  // run killed after logging epoch 2 but before its checkpoint), the new file's first event after the version
  // is a session START at the step after the checkpoint's: TensorBoard's purge of the orphaned step 938.
  { MetricsWriter::resume(run, false, 1, 470); }
  const std::vector<std::filesystem::path> both = event_files(run);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(read_events(files[0]).size(), 3u);
  const std::vector<proto::Event> resumed = read_events(both[0] == files[0] ? both[1] : both[0]);
  ASSERT_EQ(resumed.size(), 2u);
  EXPECT_EQ(resumed[0].file_version(), "brain.Event:2");
  ASSERT_TRUE(resumed[1].has_session_log());
  EXPECT_EQ(resumed[1].session_log().status(), proto::SessionLog::START);
  EXPECT_EQ(resumed[1].step(), 470);
}

TEST(EventFile, AnUnwritableDirectoryIsAnErrorNamingTheFile) {
  try {
    EventFileWriter writer("/nonexistent-sprintnet-dir");
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-sprintnet-dir/events.out.tfevents."), std::string::npos) << e.what();
  }
}

// A full disk at the start: an error naming the file and why, and no empty event file left for
// TensorBoard to list as a run.
TEST(EventFile, AFullDiskAtTheStartIsAnErrorNamingTheFileAndLeavesNoFile) {
  const std::filesystem::path dir = test::temp_dir("tensorboard-full-disk");
  std::string message;
  {
    test::FullDisk full;
    message = test::error_message([&] { EventFileWriter writer(dir); });
  }
  EXPECT_NE(message.find((dir / kEventFilePrefix).string()), std::string::npos) << message;
  EXPECT_NE(message.find(test::FullDisk::reason()), std::string::npos) << message;
  EXPECT_TRUE(event_files(dir).empty());
}

}  // namespace
}  // namespace sprintnet::tensorboard

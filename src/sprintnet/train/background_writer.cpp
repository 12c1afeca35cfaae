#include "sprintnet/train/background_writer.h"

namespace sprintnet::train {

BackgroundWriter::~BackgroundWriter() {
  if (in_flight_.valid()) in_flight_.wait();
}

void BackgroundWriter::submit(std::function<void()> job) {
  wait();
  in_flight_ = std::async(std::launch::async, std::move(job));
}

void BackgroundWriter::wait() {
  if (!in_flight_.valid()) return;
  std::future<void> done = std::move(in_flight_);
  done.get();  // rethrows the job's exception
}

}  // namespace sprintnet::train

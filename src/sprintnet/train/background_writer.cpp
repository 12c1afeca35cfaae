#include "sprintnet/train/background_writer.h"

#include <new>

#include "sprintnet/core/error.h"

namespace sprintnet::train {

BackgroundWriter::~BackgroundWriter() {
  if (in_flight_.valid()) in_flight_.wait();
}

void BackgroundWriter::submit(std::function<void()> job, std::string what) {
  wait();
  in_flight_ = std::async(std::launch::async, [job = std::move(job), what = std::move(what)] {
    try {
      job();
    } catch (const std::bad_alloc&) {
      SN_FAIL("out of host memory writing {}", what);
    }
  });
}

void BackgroundWriter::wait() {
  if (!in_flight_.valid()) return;
  std::future<void> done = std::move(in_flight_);
  done.get();  // rethrows the job's exception
}

}  // namespace sprintnet::train

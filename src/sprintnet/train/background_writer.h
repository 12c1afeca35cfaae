#pragma once
// Runs file writes (checkpoints, final weights) on one helper thread so training goes on while
// they fsync. One job at a time: submit() first waits for the previous one. The first error a job
// throws is kept and rethrown by the next submit() or wait(), so a failed write still fails the run.
// Jobs must own what they write (a snapshot), never refer to tensors training goes on changing.
#include <exception>
#include <functional>
#include <future>
#include <string>

namespace sprintnet::train {

class BackgroundWriter {
 public:
  BackgroundWriter() = default;
  // Waits for the job in flight; its error, if any, is dropped (the owner failed already).
  ~BackgroundWriter();
  BackgroundWriter(const BackgroundWriter&) = delete;
  BackgroundWriter& operator=(const BackgroundWriter&) = delete;

  // Starts `job` on the helper thread after the previous job ends; rethrows that job's error. A job that runs
  // out of host memory fails with an Error "out of host memory writing <what>" (e.g. "epoch 3's checkpoint in
  // runs/x (...what to do)"), not an anonymous std::bad_alloc; and not an OutOfMemoryError, whose advice (a
  // smaller batch) is about training.
  void submit(std::function<void()> job, std::string what = "a file");
  // Waits until no job is in flight; rethrows the error of the one that was.
  void wait();

 private:
  std::future<void> in_flight_;
};

}  // namespace sprintnet::train

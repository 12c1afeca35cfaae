#pragma once
// Data sets read once per process: the runs of a sweep (and any Trainers of one process) that read
// the same files with the same limits, class count and normalization share one copy in memory
// instead of reading, checking and normalising the files again (MNIST: 0.3-0.45 s a run, which a
// sweep's runs would otherwise spend waiting). The images are never written after loading, so
// sharing the tensors is safe across threads. A file whose size or modification time changed is
// read again; the two most recently used data sets are kept.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "sprintnet/data/dataset.h"

namespace sprintnet {

// A loaded data set's copies on GPUs, by device index (on_device(); nothing else touches it).
struct DeviceCopies {
  struct OnDevice {
    std::mutex mutex;  // held while copying: runs starting together on this GPU wait for the one copy
    std::optional<TrainTestData> copy;
  };
  std::mutex mutex;  // guards the map only: GPUs copy at once
  std::map<int, std::unique_ptr<OnDevice>> by_device;
};

// `data` must not change once loaded: every copy of a LoadedData shares the device copies made from it.
struct LoadedData {
  TrainTestData data;
  Normalization norm;
  // Shared by every copy of this LoadedData (the cache's and the runs'), so they share the device copies.
  std::shared_ptr<DeviceCopies> device_copies = std::make_shared<DeviceCopies>();
};

// load_train_test() and make_normalization(), or the copy an earlier call loaded.
LoadedData load_train_test_cached(const DataConfig& config, std::int64_t classes);

// `loaded.data` with its images and labels on `device` (on the CPU: the tensors themselves). The first
// call for a device copies them there; later calls with `loaded` or a copy of it return the same device
// tensors, which nothing writes. So a sweep's runs on one GPU share one copy of the data set instead of
// each copying it (MNIST: 55 MB a run; 8 runs starting together queued their copies on the bus, and
// every small copy of theirs behind them: docs/SWEEP.md). The device copies are kept until the process
// ends, one a data set and GPU.
TrainTestData on_device(const LoadedData& loaded, Device device);

}  // namespace sprintnet

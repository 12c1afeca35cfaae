#include "sprintnet/data/dataset_cache.h"

#include <deque>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace sprintnet {
namespace {

constexpr std::size_t kKept = 2;

// What decides the loaded bytes: the files as they are now, the limits, the classes, the normalization.
std::string cache_key(const DataConfig& config, std::int64_t classes) {
  const DatasetFiles files = dataset_files(config);
  std::string key = fmt::format("{}|{}|{}|{}", config.train_limit, config.test_limit, classes, config.normalize);
  for (const std::filesystem::path& p : {files.train_images, files.train_labels, files.test_images, files.test_labels}) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(p, ec);
    const auto time = std::filesystem::last_write_time(p, ec).time_since_epoch().count();
    key += fmt::format("|{}:{}:{}", std::filesystem::absolute(p).string(), size, time);
  }
  return key;
}

}  // namespace

LoadedData load_train_test_cached(const DataConfig& config, std::int64_t classes) {
  static std::mutex mutex;
  // Most recently used first. Never destroyed: its tensors would be freed during static destruction,
  // after the allocator they return to (constructed later, so destroyed earlier) is gone.
  static auto& kept = *new std::deque<std::pair<std::string, LoadedData>>;
  const std::string key = cache_key(config, classes);
  // Held while loading: runs that start together wait for the one read instead of each reading.
  const std::lock_guard lock(mutex);
  for (auto it = kept.begin(); it != kept.end(); ++it) {
    if (it->first == key) {
      std::pair<std::string, LoadedData> hit = std::move(*it);
      kept.erase(it);
      kept.push_front(std::move(hit));
      return kept.front().second;
    }
  }
  LoadedData loaded;
  loaded.data = load_train_test(config, classes);
  loaded.norm = make_normalization(loaded.data.train, config.normalize);
  kept.emplace_front(key, loaded);
  if (kept.size() > kKept) kept.pop_back();
  return loaded;
}

TrainTestData on_device(const LoadedData& loaded, Device device) {
  if (device.is_cpu()) return loaded.data;
  DeviceCopies& copies = *loaded.device_copies;
  DeviceCopies::OnDevice* on = nullptr;
  {
    const std::lock_guard lock(copies.mutex);
    std::unique_ptr<DeviceCopies::OnDevice>& slot = copies.by_device[device.index];
    if (!slot) slot = std::make_unique<DeviceCopies::OnDevice>();
    on = slot.get();
  }
  // Runs that start together on this GPU wait for the one copy instead of each making one.
  const std::lock_guard lock(on->mutex);
  if (!on->copy) {
    TrainTestData copy = loaded.data;
    for (Dataset* set : {&copy.train, &copy.test}) {
      set->images = set->images.to(device);  // waits for the copy: done before any other stream reads it
      set->labels = set->labels.to(device);
    }
    on->copy = copy;
    // Never freed: a sweep's worker that copies them allocates them on its own stream, which is gone
    // once the worker ends, while the data set may outlive it (the cache, other runs); freeing them then
    // would order the free on that stream. A process keeps one copy a data set and GPU.
    static std::mutex kept_mutex;
    static auto& kept = *new std::vector<TrainTestData>;
    const std::lock_guard keep(kept_mutex);
    kept.push_back(std::move(copy));
  }
  return *on->copy;
}

}  // namespace sprintnet

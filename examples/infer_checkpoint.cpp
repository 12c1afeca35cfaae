// Inference inside another C++ program: load what `sprintnet train` wrote (a run directory, a
// checkpoint directory or a .safetensors file), predict the first test images of the data set its
// config names, and print each prediction with its probability.
//   infer_checkpoint RUN_DIR [N]      (from the directory the run's data.dir is relative to)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "sprintnet/data/dataset.h"
#include "sprintnet/train/inference.h"

using namespace sprintnet;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s RUN_DIR [N]\n", argv[0]);
    return 2;
  }
  try {
    train::LoadedModel model = train::load_model(argv[1]);
    const Dataset test = train::load_split(model, "test");
    const std::int64_t n = std::min<std::int64_t>(argc > 2 ? std::atoll(argv[2]) : 10, test.size());
    std::printf("%s\n", train::model_summary(model).c_str());
    const std::vector<train::Prediction> predictions = train::predict(model, test.images.slice_rows(0, n), /*top_k=*/1);
    std::int64_t correct = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const train::Prediction& p = predictions[static_cast<std::size_t>(i)];
      const std::int32_t truth = test.labels.span<std::int32_t>()[static_cast<std::size_t>(i)];
      correct += p.label == truth;
      std::printf("image %lld: predicted %lld (p = %.3f), label %d\n", static_cast<long long>(i),
                  static_cast<long long>(p.label), p.top.front().probability, truth);
    }
    std::printf("%lld of %lld correct\n", static_cast<long long>(correct), static_cast<long long>(n));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "infer_checkpoint: %s\n", e.what());
    return 1;
  }
  return 0;
}

// Train a 784-256-10 MLP on MNIST with the library API alone, the way a
// PyTorch user writes it. Run from the repository root after `make data`.
#include <cstdio>

#include "sprintnet/data/dataset.h"
#include "sprintnet/nn/activation.h"
#include "sprintnet/nn/linear.h"
#include "sprintnet/nn/loss.h"
#include "sprintnet/nn/sequential.h"
#include "sprintnet/optim/optimizer.h"
#include "sprintnet/train/batch_loader.h"
#include "sprintnet/train/evaluate.h"

using namespace sprintnet;

int main() {
  const Device device = cuda_available() ? Device::cuda() : Device::cpu();
  Dataset train_set = load_idx_dataset("data/mnist/train-images-idx3-ubyte", "data/mnist/train-labels-idx1-ubyte");
  Dataset test_set = load_idx_dataset("data/mnist/t10k-images-idx3-ubyte", "data/mnist/t10k-labels-idx1-ubyte", 10);
  const Normalization norm = make_normalization(train_set, "standard");
  train::BatchLoader train_loader(train_set, norm, {.batch_size = 128, .shuffle = true, .seed = 0}, device);
  train::BatchLoader test_loader(test_set, norm, {.batch_size = 1000, .shuffle = false, .drop_last = false}, device);

  Generator gen(/*seed=*/0);
  nn::Sequential model;
  model.emplace<nn::Linear>(784, 256, true, device).reset_parameters(gen);
  model.emplace<nn::ReLU>();
  model.emplace<nn::Linear>(256, 10, true, device).reset_parameters(gen);
  model.set_input_requires_grad(false);  // the images need no gradient

  nn::CrossEntropyLoss criterion;
  optim::SGD optimizer(model.parameters(), {.lr = 0.05, .momentum = 0.9});

  for (int epoch = 0; epoch < 3; ++epoch) {
    train_loader.start_epoch(epoch);
    for (std::int64_t b = 0; b < train_loader.batches_per_epoch(); ++b) {
      const train::Batch batch = train_loader.batch(b);
      optimizer.zero_grad();
      const Tensor logits = model.forward(batch.inputs);
      criterion.forward(logits, batch.labels);
      model.backward(criterion.backward());
      optimizer.step();
    }
    const train::EvalResult test = train::evaluate(model, test_loader, "cross_entropy");
    std::printf("epoch %d: test loss %.4f, accuracy %.2f %%\n", epoch + 1, test.loss, 100.0 * test.accuracy);
  }
  return 0;
}

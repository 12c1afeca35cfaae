// The schema: every config key, declared once. Each entry names its dotted key,
// binds it to a Config field (whose type gives the key's type and whose
// default initialiser gives its default), says in one line what it means, and
// states the values it accepts. config.cpp, config_values.cpp and
// config_reference.cpp read only this table.
#include "sprintnet/io/config_schema.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "sprintnet/core/error.h"

namespace sprintnet {
namespace {

// Field type -> the key's kind and its conversions to and from ConfigValue.
template <typename T>
struct FieldTraits;

template <>
struct FieldTraits<bool> {
  static constexpr ValueKind kKind = ValueKind::kBool;
  static ConfigValue to_value(bool field) { return field; }
  static void from_value(const ConfigValue& value, bool& field) { field = std::get<bool>(value); }
};

template <>
struct FieldTraits<std::int64_t> {
  static constexpr ValueKind kKind = ValueKind::kInteger;
  static ConfigValue to_value(std::int64_t field) { return field; }
  static void from_value(const ConfigValue& value, std::int64_t& field) { field = std::get<std::int64_t>(value); }
};

// The seed: TOML integers are signed 64-bit, so a seed is written and read in [0, 2^63).
template <>
struct FieldTraits<std::uint64_t> {
  static constexpr ValueKind kKind = ValueKind::kInteger;
  static ConfigValue to_value(std::uint64_t field) {
    SN_CHECK(field <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
             "seed {} is above 2^63 - 1, the largest integer TOML can hold", field);
    return static_cast<std::int64_t>(field);
  }
  static void from_value(const ConfigValue& value, std::uint64_t& field) {
    // The key's constraint (>= 0) has been checked before any value is set.
    field = static_cast<std::uint64_t>(std::get<std::int64_t>(value));
  }
};

template <>
struct FieldTraits<double> {
  static constexpr ValueKind kKind = ValueKind::kFloat;
  static ConfigValue to_value(double field) { return field; }
  static void from_value(const ConfigValue& value, double& field) { field = std::get<double>(value); }
};

template <>
struct FieldTraits<std::string> {
  static constexpr ValueKind kKind = ValueKind::kString;
  static ConfigValue to_value(const std::string& field) { return field; }
  static void from_value(const ConfigValue& value, std::string& field) { field = std::get<std::string>(value); }
};

template <>
struct FieldTraits<std::vector<std::int64_t>> {
  static constexpr ValueKind kKind = ValueKind::kIntegerList;
  static ConfigValue to_value(const std::vector<std::int64_t>& field) { return field; }
  static void from_value(const ConfigValue& value, std::vector<std::int64_t>& field) {
    field = std::get<std::vector<std::int64_t>>(value);
  }
};

// A key inside a table: "optim.lr" bound to config.optim.lr.
template <typename Section, typename T>
ConfigKey key(std::string_view name, Section Config::*section, T Section::*field, std::string_view doc,
              Constraint constraint = {}) {
  return ConfigKey{name,
                   FieldTraits<T>::kKind,
                   doc,
                   std::move(constraint),
                   [section, field](const Config& config) { return FieldTraits<T>::to_value(config.*section.*field); },
                   [section, field](Config& config, const ConfigValue& value) {
                     FieldTraits<T>::from_value(value, config.*section.*field);
                   }};
}

// A top-level key: "seed" bound to config.seed.
template <typename T>
ConfigKey key(std::string_view name, T Config::*field, std::string_view doc, Constraint constraint = {}) {
  return ConfigKey{
      name,
      FieldTraits<T>::kKind,
      doc,
      std::move(constraint),
      [field](const Config& config) { return FieldTraits<T>::to_value(config.*field); },
      [field](Config& config, const ConfigValue& value) { FieldTraits<T>::from_value(value, config.*field); }};
}

Constraint range(std::optional<Bound> low, std::optional<Bound> high) {
  Constraint constraint;
  constraint.low = low;
  constraint.high = high;
  return constraint;
}
Constraint at_least(double low) { return range(Bound{low, true}, std::nullopt); }
Constraint greater_than(double low) { return range(Bound{low, false}, std::nullopt); }
Constraint closed(double low, double high) { return range(Bound{low, true}, Bound{high, true}); }      // [low, high]
Constraint half_open(double low, double high) { return range(Bound{low, true}, Bound{high, false}); }  // [low, high)
Constraint open(double low, double high) { return range(Bound{low, false}, Bound{high, false}); }      // (low, high)
Constraint one_of(std::initializer_list<std::string_view> choices) {
  Constraint constraint;
  constraint.choices = choices;
  return constraint;
}
Constraint non_empty() {
  Constraint constraint;
  constraint.non_empty = true;
  return constraint;
}

const std::vector<ConfigTable>& tables() {
  static const std::vector<ConfigTable> kTables = {
      {"", "Top-level keys."},
      {"data", "Where the images come from and how they are scaled."},
      {"model", "The MLP: input (the data set's sample size, one value a pixel: 784 for MNIST) -> hidden layers -> "
                 "one output a class (the data set's class count, or model.classes: 10 for MNIST)."},
      {"train", "The training loop."},
      {"device", "Where and in which precision the run computes."},
      {"loss", "The training objective."},
      {"optim", "The optimizer; update rules follow PyTorch's SGD, Adam and AdamW."},
      {"schedule", "The learning rate over the run, updated every step."},
      {"output", "What the run writes and shows."},
      {"checkpoint", "Snapshots of the run that `sprintnet train --resume` continues from (docs/CHECKPOINTS.md)."},
  };
  return kTables;
}

const std::vector<ConfigKey>& keys() {
  static const std::vector<ConfigKey> kKeys = {
      key("seed", &Config::seed, "seed of every random choice (initialisation, shuffling); same seed, same run",
          at_least(0)),

      key("data.dataset", &Config::data, &DataConfig::dataset,
          "which images: `mnist` and `fashion-mnist` are read from `<dir>/<dataset>/`; `idx` from the four paths below",
          one_of({"mnist", "fashion-mnist", "idx"})),
      key("data.dir", &Config::data, &DataConfig::dir, "folder holding the `<dataset>/` folders scripts/get-data fills",
          non_empty()),
      key("data.train_images", &Config::data, &DataConfig::train_images,
          "IDX file of training images; required for dataset `idx`, and refused with another dataset"),
      key("data.train_labels", &Config::data, &DataConfig::train_labels,
          "IDX file of training labels; required for dataset `idx`"),
      key("data.test_images", &Config::data, &DataConfig::test_images,
          "IDX file of test images; required for dataset `idx`"),
      key("data.test_labels", &Config::data, &DataConfig::test_labels,
          "IDX file of test labels; required for dataset `idx`"),
      key("data.train_limit", &Config::data, &DataConfig::train_limit,
          "use only the first N training samples (0 = all)", at_least(0)),
      key("data.test_limit", &Config::data, &DataConfig::test_limit, "use only the first N test samples (0 = all)",
          at_least(0)),
      key("data.normalize", &Config::data, &DataConfig::normalize,
          "`unit`: x/255; `standard`: (x/255 - mean)/std with the training set's mean and std",
          one_of({"unit", "standard"})),

      key("model.hidden", &Config::model, &ModelConfig::hidden,
          "widths of the hidden layers, first to last; `[]` = softmax regression; at most 1024 layers",
          at_least(1)),
      key("model.activation", &Config::model, &ModelConfig::activation, "activation after each hidden layer",
          one_of({"identity", "relu", "gelu", "tanh", "sigmoid", "silu"})),
      key("model.bias", &Config::model, &ModelConfig::bias, "linear layers add a bias"),
      key("model.classes", &Config::model, &ModelConfig::classes,
          "output classes; labels must lie in [0, classes) (0 = the largest training label + 1)",
          closed(0, 65536)),  // kMaxClasses (data/dataset.h)
      key("model.init", &Config::model, &ModelConfig::init,
          "weight initialisation; `pytorch` = what torch.nn.Linear does",
          one_of({"pytorch", "xavier_uniform", "xavier_normal", "kaiming_uniform", "kaiming_normal"})),

      key("train.epochs", &Config::train, &TrainConfig::epochs, "passes over the training set", at_least(1)),
      key("train.batch_size", &Config::train, &TrainConfig::batch_size, "training samples per step", at_least(1)),
      key("train.shuffle", &Config::train, &TrainConfig::shuffle,
          "reshuffle the training set every epoch (the order follows from seed and epoch)"),
      key("train.drop_last", &Config::train, &TrainConfig::drop_last,
          "skip each epoch's last batch when it is smaller than batch_size"),
      key("train.eval_every", &Config::train, &TrainConfig::eval_every,
          "evaluate on the test set every N epochs (0 = only after the last)", at_least(0)),
      key("train.eval_batch_size", &Config::train, &TrainConfig::eval_batch_size, "test samples per forward pass",
          at_least(1)),
      key("train.log_every", &Config::train, &TrainConfig::log_every,
          "steps between progress updates (the progress bar's loss and rate; the metrics files, curves and "
          "TensorBoard get one row an epoch)",
          at_least(1)),

      key("device.name", &Config::device, &DeviceConfig::name,
          "where to run: `auto` = the first GPU when one is usable, else the CPU; `cuda:N` = GPU number N",
          one_of({"auto", "cpu", "cuda", "cuda:N"})),
      key("device.precision", &Config::device, &DeviceConfig::precision,
          "matrix-multiply precision: `bf16`/`fp16` (fp16 with dynamic loss scaling) keep fp32 master weights and "
          "optimizer state; `tf32` rounds fp32 inputs on the matrix units. `auto` = bf16 for the fused and compiled GPU "
          "engines, fp32 for the eager one and the CPU; 16-bit and tf32 need a compiled step; the CPU's computes in "
          "fp32 or bf16 (on a CPU with AVX512-BF16 or AMX)",
          one_of({"auto", "fp32", "tf32", "bf16", "fp16"})),
      key("device.allocator", &Config::device, &DeviceConfig::allocator,
          "GPU memory: `caching` (sprintnet's caching allocator), `async` (CUDA's cudaMallocAsync pool), or "
          "`auto` = the environment variable ALLOCATOR_TYPE (`cuda` selects async), else caching",
          one_of({"auto", "caching", "async"})),
      key("device.engine", &Config::device, &DeviceConfig::engine,
          "how a training step runs: `fused` (GPU) = one persistent kernel per epoch with the model resident on chip "
          "(bf16/fp16, up to 8 layers and 64 classes, state within the GPU's L2; docs/FUSED.md); `compiled` = on a GPU "
          "the whole step captured once in a CUDA graph with fused kernels, on the CPU fixed buffers, oneDNN products "
          "with fused bias+activation and one flat optimizer update (both: every activation, loss and last batch); "
          "`eager` = module by module in fp32; `auto` = compiled, except on one GPU that runs the fused engine's "
          "cluster, rows, split and regression kernels (Hopper): every model without a hidden layer (bf16, batch "
          "at most 128, at most 1024 inputs and 16 classes) on the regression kernel, every model the cluster "
          "kernel takes (bf16, hidden layers at most 128 wide, batch at most 128, ReLU/tanh/sigmoid/identity; those "
          "with 1 to 3 hidden layers and at most 16 classes on its rows kernel), and every model the split kernel "
          "takes "
          "(bf16, 784 inputs, 1 to 3 hidden layers all of 784 or all of 256 (the default model), 10 classes, batch "
          "at most 128; 784 wide only when the run is alone on its GPU) takes `fused`, its fastest engine there; "
          "eager only for a GPU batch of more than 65535 samples",
          one_of({"auto", "fused", "compiled", "eager"})),
      // At most set_cpu_threads' kMaxCpuThreads: OpenMP asked for more threads than the system allows crashes.
      key("device.threads", &Config::device, &DeviceConfig::threads, "CPU threads (0 = OMP_NUM_THREADS when it is set, else one a core the process may run on)", closed(0, 1024)),
      key("device.update", &Config::device, &DeviceConfig::update,
          "data-parallel training (`--gpus N`): how the ranks apply the optimizer: `replicated` = the gradients "
          "all-reduced, every rank updates every parameter; `sharded` = ZeRO-1: the gradients reduce-scattered, each "
          "rank updates its 1/N of the fp32 master weights and optimizer state, the compute copy all-gathered (not "
          "fp16); `auto` = sharded where it can run (2+ GPUs, not fp16, layers that split into the shards), else "
          "replicated (docs/DISTRIBUTED.md)",
          one_of({"auto", "replicated", "sharded"})),

      key("loss.type", &Config::loss, &LossConfig::type,
          "`cross_entropy` (softmax + negative log-likelihood) or `mse` (against one-hot targets)",
          one_of({"cross_entropy", "mse"})),
      key("loss.label_smoothing", &Config::loss, &LossConfig::label_smoothing,
          "cross_entropy: share of the target spread uniformly over all classes, as in PyTorch; it shapes the "
          "training loss only: the test loss (and `sprintnet eval`'s) is plain cross-entropy, so it sits below a "
          "smoothed train loss", half_open(0, 1)),

      key("optim.type", &Config::optim, &OptimConfig::type, "the optimizer", one_of({"sgd", "adam", "adamw"})),
      key("optim.lr", &Config::optim, &OptimConfig::lr, "learning rate (the peak, for onecycle)", greater_than(0)),
      key("optim.momentum", &Config::optim, &OptimConfig::momentum, "sgd: momentum factor (0 = plain SGD)",
          at_least(0)),
      key("optim.dampening", &Config::optim, &OptimConfig::dampening,
          "sgd: dampening of the momentum (other types leave it alone)", closed(0, 1)),
      key("optim.nesterov", &Config::optim, &OptimConfig::nesterov,
          "sgd: Nesterov momentum; needs momentum > 0 and dampening = 0 (other types leave it alone)"),
      key("optim.weight_decay", &Config::optim, &OptimConfig::weight_decay,
          "sgd, adam: L2 penalty added to the gradient; adamw: decoupled decay", at_least(0)),
      key("optim.beta1", &Config::optim, &OptimConfig::beta1, "adam, adamw: decay of the gradient average",
          half_open(0, 1)),
      key("optim.beta2", &Config::optim, &OptimConfig::beta2, "adam, adamw: decay of the squared-gradient average",
          half_open(0, 1)),
      key("optim.eps", &Config::optim, &OptimConfig::eps, "adam, adamw: added to the denominator for stability",
          greater_than(0)),

      key("schedule.type", &Config::schedule, &ScheduleConfig::type,
          "`constant`, `step` (decay every step_size epochs), `cosine` (to min_lr), `onecycle`. `onecycle` is "
          "torch's OneCycleLR(max_lr = optim.lr, cycle_momentum=False): momentum and beta1 are not cycled",
          one_of({"constant", "step", "cosine", "onecycle"})),
      key("schedule.warmup_steps", &Config::schedule, &ScheduleConfig::warmup_steps,
          "linear warm-up over the first N steps from warmup_start_factor * lr, with any type. With cosine it "
          "comes first and the cosine follows (torch's SequentialLR of LinearLR and CosineAnnealingLR), so N must "
          "stay below the run's steps (train.epochs x steps an epoch); with step and onecycle it multiplies their "
          "rate (as torch's ChainedScheduler with StepLR; OneCycleLR sets the rate outright and does not chain)",
          at_least(0)),
      key("schedule.warmup_start_factor", &Config::schedule, &ScheduleConfig::warmup_start_factor,
          "the learning rate at step 0 of the warm-up, as a fraction of lr. The default 0 makes the first step "
          "run at lr 0 (torch's LinearLR refuses a start_factor of 0)",
          closed(0, 1)),
      key("schedule.step_size", &Config::schedule, &ScheduleConfig::step_size, "step: epochs between decays",
          at_least(1)),
      key("schedule.gamma", &Config::schedule, &ScheduleConfig::gamma, "step: factor applied at each decay",
          greater_than(0)),
      key("schedule.min_lr", &Config::schedule, &ScheduleConfig::min_lr,
          "cosine: the final learning rate (other types leave it alone). The cosine spans the run's steps - 1 - "
          "warmup_steps, so the last step runs at exactly min_lr (torch's CosineAnnealingLR with T_max = the run's "
          "steps ends a step short of it); with min_lr = 0 that last step runs at lr 0. A single step after the "
          "warm-up runs at optim.lr, the cosine's start (as torch's SequentialLR)",
          at_least(0)),
      key("schedule.pct_start", &Config::schedule, &ScheduleConfig::pct_start,
          "onecycle: fraction of the steps spent raising the learning rate", open(0, 1)),
      key("schedule.div_factor", &Config::schedule, &ScheduleConfig::div_factor,
          "onecycle: initial lr = lr / div_factor", greater_than(0)),
      key("schedule.final_div_factor", &Config::schedule, &ScheduleConfig::final_div_factor,
          "onecycle: final lr = initial lr / final_div_factor", greater_than(0)),

      key("output.dir", &Config::output, &OutputConfig::dir, "runs are written to `<dir>/<name>/`", non_empty()),
      key("output.name", &Config::output, &OutputConfig::name,
          "the run's folder inside output.dir (empty = `<dataset>-<timestamp>`); when it exists already, the run "
          "goes to `<name>-1`, `<name>-2`, ... (named in the run's last line), never into the earlier run"),
      key("output.csv", &Config::output, &OutputConfig::csv, "write metrics.csv beside metrics.jsonl"),
      key("output.progress", &Config::output, &OutputConfig::progress,
          "progress on stderr: `auto` = a bar on a terminal, plain lines otherwise; `none` = epoch summaries only",
          one_of({"auto", "bar", "plain", "none"})),

      key("checkpoint.every_epochs", &Config::checkpoint, &CheckpointConfig::every_epochs,
          "write a checkpoint every N epochs, and always after the last (0 = only after the last)", at_least(0)),
      key("checkpoint.keep_last", &Config::checkpoint, &CheckpointConfig::keep_last,
          "how many of the newest checkpoints to keep; older ones are deleted (0 = keep all)", at_least(0)),
  };
  return kKeys;
}

}  // namespace

std::string_view ConfigKey::table() const {
  const auto dot = name.rfind('.');
  return dot == std::string_view::npos ? std::string_view() : name.substr(0, dot);
}

std::string_view ConfigKey::short_name() const {
  const auto dot = name.rfind('.');
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

std::span<const ConfigKey> config_schema() { return keys(); }

std::span<const ConfigTable> config_tables() { return tables(); }

const ConfigKey* find_config_key(std::string_view name) {
  for (const ConfigKey& entry : keys()) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

std::vector<ConfigDifference> config_differences(const Config& before, const Config& after) {
  std::vector<ConfigDifference> out;
  for (const ConfigKey& key : keys()) {
    ConfigValue a = key.get(before), b = key.get(after);
    if (a != b) out.push_back({key.name, std::move(a), std::move(b)});
  }
  return out;
}

bool is_config_table(std::string_view name) {
  return !name.empty() &&
         std::any_of(tables().begin(), tables().end(), [&](const ConfigTable& table) { return table.name == name; });
}

std::optional<std::string> output_name_problem(std::string_view name) {
  // One folder inside output.dir: a path ("../../elsewhere", or absolute, which replaced output.dir) wrote the run
  // outside it, and "." or ".." name output.dir itself or its parent (the run went to ".-1", "..-1").
  if (name.find('/') == std::string_view::npos && name != "." && name != "..") return std::nullopt;
  return fmt::format("output.name = \"{}\": a run's name is one folder inside output.dir, without '/', and not \".\" "
                     "or \"..\" (set output.dir for where runs go)",
                     name);
}

std::vector<std::string> check_config_consistency(const Config& config) {
  std::vector<std::string> problems;
  // PyTorch's SGD refuses the same combination: Nesterov needs a momentum term to look ahead with. Keys of one
  // optimizer or schedule type are read by that type only and left alone by the others (each key's description
  // names its types), so one config can sweep over optim.type or schedule.type; the banner says what runs.
  if (config.optim.type == "sgd" && config.optim.nesterov &&
      (config.optim.momentum <= 0.0 || config.optim.dampening != 0.0)) {
    problems.push_back(
        fmt::format("optim.nesterov = true requires optim.momentum > 0 and optim.dampening = 0, got momentum = {} and "
                    "dampening = {}",
                    config.optim.momentum, config.optim.dampening));
  }
  // Far past what an MLP without residual connections trains (and set-up and checkpoints grew with its square:
  // 20 000 layers took 18 s before the first step): a typo's extra digits, named rather than waited for.
  constexpr std::size_t kMaxHiddenLayers = 1024;
  if (config.model.hidden.size() > kMaxHiddenLayers) {
    problems.push_back(fmt::format("model.hidden has {} layers; at most {} are accepted",
                                   config.model.hidden.size(), kMaxHiddenLayers));
  }
  // MSE has no target distribution to smooth: the key would be ignored, the run not what the config says.
  if (config.loss.type == "mse" && config.loss.label_smoothing != 0.0) {
    problems.push_back(fmt::format("loss.label_smoothing = {} applies to loss.type = \"cross_entropy\" only (loss.type "
                                   "is \"mse\"): leave it out, or 0",
                                   config.loss.label_smoothing));
  }
  if (auto problem = output_name_problem(config.output.name)) problems.push_back(std::move(*problem));
  const std::pair<std::string_view, const std::string*> paths[] = {
      {"data.train_images", &config.data.train_images},
      {"data.train_labels", &config.data.train_labels},
      {"data.test_images", &config.data.test_images},
      {"data.test_labels", &config.data.test_labels},
  };
  for (const auto& [name, path] : paths) {
    if (config.data.dataset == "idx" && path->empty()) {
      problems.push_back(fmt::format("data.dataset = \"idx\" requires {} (a path to an IDX file)", name));
    }
    // Another data set reads its own four files: a path given beside it would be ignored, the run training on
    // other data than the user named.
    if (config.data.dataset != "idx" && !path->empty()) {
      problems.push_back(fmt::format("{} = \"{}\" is read only with data.dataset = \"idx\" (data.dataset = \"{}\" "
                                     "reads its own files from data.dir): set data.dataset = \"idx\" and the four "
                                     "paths, or leave {} out (a run saved with it before this check, which ignored "
                                     "it: --set {}=\"\")", name, *path, config.data.dataset, name, name));
    }
  }
  return problems;
}

std::vector<std::string> config_problems(const Config& config) {
  std::vector<std::string> problems;
  for (const ConfigKey& key : keys()) {
    std::optional<ConfigValue> value;
    try {
      value = key.get(config);
    } catch (const Error& e) {  // a seed TOML cannot hold: its reading names the key
      problems.push_back(e.what());
      continue;
    }
    if (auto problem = check_config_value(key, *value)) problems.push_back(fmt::format("{}: {}", key.name, *problem));
  }
  std::vector<std::string> across = check_config_consistency(config);
  problems.insert(problems.end(), std::make_move_iterator(across.begin()), std::make_move_iterator(across.end()));
  return problems;
}

}  // namespace sprintnet

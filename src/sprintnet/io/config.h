#pragma once
// The training configuration: what a TOML file (plus --set overrides) resolves
// to. Every key, its type, default and meaning is declared once, in the schema
// in config_schema.cpp; docs/CONFIG.md is generated from it and a test keeps
// the two in step. Unknown keys and bad values are errors that name the key.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace sprintnet {

struct DataConfig {
  std::string dataset = "mnist";   // "mnist", "fashion-mnist", or "idx" (explicit paths below)
  std::string dir = "data";        // root holding <dataset>/ folders from scripts/get-data
  std::string train_images;        // explicit IDX paths (dataset = "idx"); empty = derived from dataset
  std::string train_labels;
  std::string test_images;
  std::string test_labels;
  std::int64_t train_limit = 0;    // use only the first N training samples (0 = all)
  std::int64_t test_limit = 0;     // likewise for the test set
  std::string normalize = "standard";  // "unit": x/255; "standard": (x/255 - mean)/std of the training set
};

struct ModelConfig {
  std::vector<std::int64_t> hidden = {256, 256};  // widths of the hidden layers; [] = softmax regression
  std::string activation = "relu";
  bool bias = true;
  std::string init = "pytorch";  // pytorch, xavier_uniform, xavier_normal, kaiming_uniform, kaiming_normal
  std::int64_t classes = 0;       // output classes; 0 = the largest training label + 1
};

struct TrainConfig {
  std::int64_t epochs = 10;
  std::int64_t batch_size = 128;
  bool shuffle = true;
  bool drop_last = true;
  std::int64_t eval_every = 1;     // evaluate on the test set every N epochs (0 = only at the end)
  std::int64_t eval_batch_size = 1000;
  std::int64_t log_every = 50;     // steps between progress/metric updates
};

struct DeviceConfig {
  std::string name = "auto";        // auto, cpu, cuda, cuda:N
  std::string precision = "auto";   // auto (bf16 for the compiled GPU step, else fp32), fp32, tf32, bf16, fp16
  std::string engine = "auto";      // training step: fused (GPU, one kernel an epoch), compiled, eager, auto (CONFIG.md)
  std::string allocator = "auto";   // CUDA memory: caching (ours), async (cudaMallocAsync pool), auto (ALLOCATOR_TYPE)
  std::int64_t threads = 0;         // CPU threads (0 = OMP_NUM_THREADS when set, else one a usable core)
  std::string update = "auto";      // data parallel: replicated, sharded (ZeRO-1), auto (sharded where it can)
};

struct LossConfig {
  std::string type = "cross_entropy";  // cross_entropy, mse
  double label_smoothing = 0.0;
};

struct OptimConfig {
  std::string type = "sgd";  // sgd, adam, adamw
  double lr = 0.05;
  double momentum = 0.9;
  double dampening = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};

struct ScheduleConfig {
  std::string type = "constant";  // constant, step, cosine, onecycle
  std::int64_t warmup_steps = 0;  // linear warm-up from warmup_start_factor*lr, combined with any type
  double warmup_start_factor = 0.0;
  std::int64_t step_size = 1;     // step: epochs between decays
  double gamma = 0.1;             // step: decay factor
  double min_lr = 0.0;            // cosine: final learning rate
  double pct_start = 0.3;         // onecycle: fraction of steps rising
  double div_factor = 25.0;       // onecycle: initial lr = lr / div_factor
  double final_div_factor = 1e4;  // onecycle: final lr = initial lr / final_div_factor
};

struct OutputConfig {
  std::string dir = "runs";  // runs are written to <dir>/<name>
  std::string name;          // empty = <dataset>-<timestamp>
  bool csv = true;           // metrics.csv beside metrics.jsonl
  std::string progress = "auto";  // auto (bar on a terminal), bar, plain, none
};

struct CheckpointConfig {
  std::int64_t every_epochs = 1;  // write a checkpoint every N epochs (0 = only after the last)
  std::int64_t keep_last = 3;     // checkpoints kept in the run directory (0 = all)
};

struct Config {
  std::uint64_t seed = 0;
  DataConfig data;
  ModelConfig model;
  TrainConfig train;
  DeviceConfig device;
  LossConfig loss;
  OptimConfig optim;
  ScheduleConfig schedule;
  OutputConfig output;
  CheckpointConfig checkpoint;
};

// Reads a TOML file, applies "key=value" overrides (dotted keys, TOML values;
// a bare word is taken as a string), validates every value. Throws
// sprintnet::Error naming the file and key on any problem.
Config load_config(const std::filesystem::path& path, const std::vector<std::string>& overrides = {});
// An override and where it came from, which its errors name: "--set" (the default), "--grid",
// "x.toml: sweep.grid".
struct ConfigOverride {
  std::string text;  // "key=value"
  std::string origin = "--set";
};
Config load_config_with_origins(const std::filesystem::path& path, const std::vector<ConfigOverride>& overrides);
// The same for TOML text already read; `origin` stands for the file in errors ("x.toml:12: ...").
Config parse_config(std::string_view text, const std::string& origin, const std::vector<std::string>& overrides = {});
// Defaults plus overrides, no file.
Config config_from_overrides(const std::vector<std::string>& overrides);
// A Config built in code held to what loading checks: every key's range and choices and the rules across keys.
// Throws sprintnet::Error "<what>: <key>: <problem>; ..." naming every key at fault (`what`: whose config it is).
void validate_config(const Config& config, std::string_view what);
// The resolved config as TOML: every key, so a run directory records exactly what ran.
std::string config_to_toml(const Config& config);
// docs/CONFIG.md, generated from the schema.
std::string config_reference_markdown();

}  // namespace sprintnet

#include "parity/known_answers.h"

#include "sprintnet/core/random.h"
#include "sprintnet/data/dataset.h"
#include "sprintnet/data/idx.h"
#include "sprintnet/io/config.h"
#include "sprintnet/optim/lr_schedule.h"
#include "sprintnet/train/model_io.h"
#include "sprintnet/train/trainer.h"

namespace sprintnet::parity {
namespace {

using Json = nlohmann::ordered_json;

// The trainer's salt of the shuffle seed (train/trainer.cpp kShuffleSeedSalt); the "trainer_runs"
// section checks the whole pipeline, so a change there shows even if this copy goes stale.
constexpr std::uint64_t kShuffleSeedSalt = 0x9E3779B97F4A7C15ULL;

Json philox_answers() {
  // Random123's known-answer inputs (zero, all ones, digits of pi) plus keys the trainer uses.
  const std::uint64_t inputs[][3] = {
      {0, 0, 0},
      {~0ULL, ~0ULL, ~0ULL},
      {0x299f31d0a4093822ULL, 0x85a308d3243f6a88ULL, 0x0370734413198a2eULL},
      {0 ^ 0x5851F42D4C957F2DULL ^ kShuffleSeedSalt, 59999, 3},
      {7, 12345, 1},
  };
  Json out = Json::array();
  for (const auto& in : inputs) {
    const PhiloxBlock block = philox4x32_10(in[0], in[1], in[2]);
    out.push_back({{"key", in[0]}, {"counter_lo", in[1]}, {"counter_hi", in[2]},
                   {"words", {block.v[0], block.v[1], block.v[2], block.v[3]}}});
  }
  return out;
}

Json generator_answers() {
  Generator gen(99, 3);
  Json u32 = Json::array(), uniform = Json::array(), normal = Json::array();
  for (int i = 0; i < 7; ++i) u32.push_back(gen.next_u32());  // 7: the next draws start mid-block
  for (int i = 0; i < 5; ++i) uniform.push_back(gen.uniform_double());
  for (int i = 0; i < 5; ++i) normal.push_back(gen.normal());
  return {{"seed", 99}, {"stream", 3}, {"u32", u32}, {"uniform_double", uniform}, {"normal", normal}};
}

Json permutation_answers() {
  struct Case {
    std::uint64_t seed, epoch;
    std::int64_t n;
  };
  // The training orders of config seeds 0 and 1 on MNIST, and a short one kept whole.
  const Case cases[] = {{0 ^ kShuffleSeedSalt, 0, 60000}, {1 ^ kShuffleSeedSalt, 4, 60000}, {12345, 1, 257}};
  Json out = Json::array();
  for (const Case& c : cases) {
    const std::vector<std::int32_t> order = epoch_permutation(c.seed, c.epoch, c.n);
    std::uint64_t weighted_sum = 0;
    for (std::size_t i = 0; i < order.size(); ++i) weighted_sum += (i + 1) * static_cast<std::uint64_t>(order[i]);
    const auto kept = static_cast<std::ptrdiff_t>(std::min<std::size_t>(order.size(), 300));
    out.push_back({{"seed", c.seed}, {"epoch", c.epoch}, {"n", c.n},
                   {"first", std::vector<std::int32_t>(order.begin(), order.begin() + kept)},
                   {"weighted_sum", weighted_sum}});
  }
  return out;
}

Json normalization_answers() {
  Generator gen(5);
  std::vector<std::uint8_t> pixels(6 * 7);
  for (auto& p : pixels) p = static_cast<std::uint8_t>(gen.below(256));
  Dataset data;
  data.name = "known-answers";
  data.images = Tensor::from_vector(pixels, {6, 7});
  Json out = {{"pixels", pixels}};
  for (const char* mode : {"unit", "standard"}) {
    const Normalization norm = make_normalization(data, mode);
    out[mode] = {{"scale", norm.scale}, {"shift", norm.shift}};
  }
  return out;
}

Json schedule_answers() {
  struct Case {
    std::vector<std::string> overrides;
    std::int64_t steps_per_epoch, total_steps;
  };
  const Case cases[] = {
      {{"schedule.type=\"constant\"", "schedule.warmup_steps=3", "schedule.warmup_start_factor=0.25"}, 4, 12},
      {{"schedule.type=\"step\"", "schedule.step_size=2", "schedule.gamma=0.5"}, 3, 15},
      {{"schedule.type=\"cosine\"", "schedule.warmup_steps=3", "schedule.min_lr=0.001"}, 5, 20},
      // One cosine step after the warm-up: at lr, the cosine's start.
      {{"schedule.type=\"cosine\"", "schedule.warmup_steps=5", "schedule.min_lr=0.01"}, 2, 6},
      {{"schedule.type=\"onecycle\"", "schedule.pct_start=0.25"}, 4, 17},
  };
  Json out = Json::array();
  for (const Case& c : cases) {
    const Config config = config_from_overrides(c.overrides);
    const optim::LrSchedule schedule(config.schedule, 0.1, c.steps_per_epoch, c.total_steps);
    Json lrs = Json::array();
    for (std::int64_t s = 0; s < c.total_steps; ++s) lrs.push_back(schedule.lr_at(s));
    Json schedule_config = Json::object();
    for (const std::string& override_text : c.overrides) {
      const auto eq = override_text.find('=');
      schedule_config[override_text.substr(9, eq - 9)] = Json::parse(override_text.substr(eq + 1));
    }
    out.push_back({{"schedule", schedule_config}, {"base_lr", 0.1}, {"steps_per_epoch", c.steps_per_epoch},
                   {"total_steps", c.total_steps}, {"lr", lrs}});
  }
  return out;
}

// A tiny IDX data set: 10 training and 9 test images of 2x3 pixels, 3 classes.
struct TinyData {
  std::vector<std::uint8_t> train_images, train_labels, test_images, test_labels;
  std::vector<std::string> overrides;  // data.* keys pointing at the files
};

TinyData write_tiny_data(const std::filesystem::path& dir) {
  Generator gen(2024);
  TinyData d;
  const auto bytes = [&gen](std::size_t n, std::uint64_t below) {
    std::vector<std::uint8_t> out(n);
    for (auto& b : out) b = static_cast<std::uint8_t>(gen.below(below));
    return out;
  };
  d.train_images = bytes(10 * 6, 256);
  d.train_labels = bytes(10, 3);
  d.train_labels[0] = 2;  // the largest label fixes the class count at 3
  d.test_images = bytes(9 * 6, 256);
  d.test_labels = bytes(9, 3);
  const std::pair<const char*, std::pair<const std::vector<std::uint8_t>*, std::vector<std::int64_t>>> files[] = {
      {"train_images", {&d.train_images, {10, 2, 3}}},
      {"train_labels", {&d.train_labels, {10}}},
      {"test_images", {&d.test_images, {9, 2, 3}}},
      {"test_labels", {&d.test_labels, {9}}},
  };
  d.overrides.push_back("data.dataset=\"idx\"");
  for (const auto& [key, file] : files) {
    const auto path = dir / key;
    write_idx(path, IdxType::kU8, file.second, *file.first);
    d.overrides.push_back(fmt::format("data.{}=\"{}\"", key, path.string()));
  }
  return d;
}

// The keys the Python port reads, in a run's config.toml layout (tables of keys): the
// inputs of the trainer cases. Keys it ignores (paths, output, device) stay out, so adding
// a config key elsewhere does not change this file.
Json port_config(const Config& c) {
  const auto& o = c.optim;
  const auto& s = c.schedule;
  return {{"seed", c.seed},
          {"data", {{"normalize", c.data.normalize}}},
          {"model", {{"hidden", c.model.hidden}, {"activation", c.model.activation}, {"bias", c.model.bias},
                     {"init", c.model.init}}},
          {"train", {{"epochs", c.train.epochs}, {"batch_size", c.train.batch_size}, {"shuffle", c.train.shuffle},
                     {"drop_last", c.train.drop_last}, {"eval_every", c.train.eval_every},
                     {"eval_batch_size", c.train.eval_batch_size}}},
          {"loss", {{"type", c.loss.type}, {"label_smoothing", c.loss.label_smoothing}}},
          {"optim", {{"type", o.type}, {"lr", o.lr}, {"momentum", o.momentum}, {"dampening", o.dampening},
                     {"nesterov", o.nesterov}, {"weight_decay", o.weight_decay}, {"beta1", o.beta1},
                     {"beta2", o.beta2}, {"eps", o.eps}}},
          {"schedule", {{"type", s.type}, {"warmup_steps", s.warmup_steps},
                        {"warmup_start_factor", s.warmup_start_factor}, {"step_size", s.step_size},
                        {"gamma", s.gamma}, {"min_lr", s.min_lr}, {"pct_start", s.pct_start},
                        {"div_factor", s.div_factor}, {"final_div_factor", s.final_div_factor}}}};
}

Json weights_json(nn::Module& model) {
  Json out = Json::object();
  for (const auto& [name, tensor] : train::model_weights(model)) out[name] = tensor.to_vector<double>();
  return out;
}

Config tiny_config(const TinyData& data, const std::filesystem::path& scratch, const std::string& name,
                   const std::vector<std::string>& extra) {
  std::vector<std::string> overrides = data.overrides;
  for (const char* o : {"seed=7", "model.hidden=[4]", "device.name=\"cpu\"", "device.threads=1",
                        "output.progress=\"none\"", "output.csv=false", "train.batch_size=3",
                        "train.eval_batch_size=4"}) {
    overrides.emplace_back(o);
  }
  overrides.push_back(fmt::format("output.dir=\"{}\"", (scratch / "runs").string()));
  overrides.push_back(fmt::format("output.name=\"{}\"", name));
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  return config_from_overrides(overrides);
}

// The initial weights a Trainer builds (seed, init stream, make_mlp), for three init schemes.
Json trainer_init_answers(const TinyData& data, const std::filesystem::path& scratch) {
  const std::vector<std::string> cases[] = {
      {"model.init=\"pytorch\""},
      {"model.init=\"xavier_normal\"", "model.bias=false"},
      {"model.init=\"kaiming_uniform\"", "seed=123", "model.hidden=[5, 3]"},
  };
  Json out = Json::array();
  for (const auto& extra : cases) {
    train::Trainer trainer(tiny_config(data, scratch, "init", extra));
    out.push_back({{"config", port_config(trainer.config())}, {"weights", weights_json(trainer.model())}});
  }
  return out;
}

// Two whole runs: per-epoch metrics and final weights.
Json trainer_run_answers(const TinyData& data, const std::filesystem::path& scratch) {
  const std::vector<std::string> cases[] = {
      {"train.epochs=3", "train.batch_size=3", "optim.type=\"sgd\"", "optim.lr=0.1", "optim.momentum=0.9",
       "schedule.type=\"cosine\"", "schedule.warmup_steps=2", "schedule.warmup_start_factor=0.5"},
      {"train.epochs=2", "train.batch_size=4", "train.drop_last=false", "optim.type=\"adamw\"", "optim.lr=0.01",
       "optim.weight_decay=0.01", "schedule.type=\"onecycle\"", "loss.label_smoothing=0.1",
       "model.activation=\"gelu\"", "data.normalize=\"unit\""},
  };
  Json out = Json::array();
  int index = 0;
  for (const auto& extra : cases) {
    train::Trainer trainer(tiny_config(data, scratch, fmt::format("run{}", index++), extra));
    const train::TrainSummary summary = trainer.fit();
    Json metrics = Json::array();
    for (const train::EpochRecord& r : summary.epochs) {
      metrics.push_back({{"step", r.step}, {"epoch", r.epoch}, {"train_loss", r.train_loss},
                         {"test_loss", r.test_loss ? Json(*r.test_loss) : Json()},
                         {"test_accuracy", r.test_accuracy ? Json(*r.test_accuracy) : Json()}, {"lr", r.lr}});
    }
    out.push_back({{"config", port_config(trainer.config())}, {"metrics", metrics},
                   {"final_weights", weights_json(trainer.model())}});
  }
  return out;
}

}  // namespace

double known_answer_tolerance(const std::string& section) {
  // Integer-only maths (Philox, permutations, uniform draws scaled by a power of two) and
  // sums of exact terms: bit-exact everywhere.
  if (section == "philox" || section == "permutation" || section == "tiny_data") return 0.0;
  // libm's log/cos/pow/sqrt may differ by an ulp between C libraries: normals, schedules,
  // normalisation and (through fp32 rounding, almost never visible) initial weights.
  if (section == "generator" || section == "schedule" || section == "normalization") return 1e-14;
  if (section == "trainer_init") return 1e-7;  // one fp32 ulp of a normal draw
  // Training runs go through oneDNN's sgemm, whose kernels (and so summation order) depend on the CPU.
  if (section == "trainer_runs") return 1e-5;
  return 0.0;
}

nlohmann::ordered_json compute_known_answers(const std::filesystem::path& scratch) {
  const TinyData data = write_tiny_data(scratch);
  Json out = {
      {"about", "sprintnet's own values for tools/test_sprintnet_port.py; regenerate with "
                "SPRINTNET_UPDATE_GOLDEN=1 parity_test --gtest_filter='PortKnownAnswers.*'"},
      {"philox", philox_answers()},
      {"generator", generator_answers()},
      {"permutation", permutation_answers()},
      {"normalization", normalization_answers()},
      {"schedule", schedule_answers()},
      {"tiny_data",
       {{"train_images", data.train_images}, {"train_labels", data.train_labels}, {"test_images", data.test_images},
        {"test_labels", data.test_labels}, {"sample_shape", {2, 3}}}},
      {"trainer_init", trainer_init_answers(data, scratch)},
      {"trainer_runs", trainer_run_answers(data, scratch)},
  };
  return out;
}

}  // namespace sprintnet::parity

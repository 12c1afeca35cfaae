// `sprintnet eval` and `sprintnet predict` run as a user runs them: exit
// codes, what they print, the CSV and JSON they write, and that the numbers
// are the library's (and `sprintnet sweep`'s exit code). One 784-32-10 model is trained on a 2000-sample slice of
// MNIST for the whole suite; the inputs are test images written as PNG, PGM
// and IDX files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stb/stb_image_write.h>

#include <cstdlib>
#include <map>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "sprintnet/data/idx.h"
#include "sprintnet/io/read_file.h"
#include "sprintnet/io/safetensors.h"
#include "sprintnet/train/inference.h"
#include "sprintnet/train/trainer.h"
#include "cli_run.h"
#include "support/test_util.h"
#include "support/tiny_run.h"

namespace sprintnet::train {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using test::CliResult;
using test::run_cli;

constexpr std::int64_t kTestSamples = 500;
constexpr std::int64_t kIdxImages = 5;

class EvalPredictCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(test::temp_dir("eval-predict-cli"));
    Trainer trainer(test::tiny_run_config(*dir_, kTestSamples));
    run_ = new fs::path(trainer.fit().run_dir);
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete run_;
    delete dir_;
  }

  // The first `count` test images and labels, as the library loads them.
  static Dataset test_images(std::int64_t count) {
    LoadOptions options;
    options.device = "cpu";
    options.overrides = {fmt::format("data.test_limit={}", count)};
    return load_split(load_model(*run_, options), "test");
  }

  // A binary (P5) PGM of the first width x height of `pixels`.
  static void write_pgm(const fs::path& path, int width, int height, const std::vector<std::uint8_t>& pixels) {
    std::ofstream out(path, std::ios::binary);
    out << fmt::format("P5\n{} {}\n255\n", width, height);
    out.write(reinterpret_cast<const char*>(pixels.data()), static_cast<std::streamsize>(width) * height);
  }

  // The first test image of `pixels` as <stem>.png, the second as <stem>.pgm, and all `count` as <stem>.idx.
  struct InputFiles {
    fs::path png, pgm, idx;
  };
  static InputFiles write_inputs(const std::string& stem, const std::vector<std::uint8_t>& pixels, std::int64_t count) {
    const InputFiles files{*dir_ / (stem + ".png"), *dir_ / (stem + ".pgm"), *dir_ / (stem + ".idx")};
    EXPECT_EQ(stbi_write_png(files.png.c_str(), 28, 28, 1, pixels.data(), 28), 1);
    write_pgm(files.pgm, 28, 28, {pixels.begin() + 28 * 28, pixels.end()});
    write_idx(files.idx, IdxType::kU8, {count, 28, 28}, pixels);
    return files;
  }

  static fs::path* dir_;
  static fs::path* run_;
};

fs::path* EvalPredictCli::dir_ = nullptr;
fs::path* EvalPredictCli::run_ = nullptr;

TEST_F(EvalPredictCli, EvalPrintsTheMatrixAndWritesItAsCsv) {
  const fs::path csv = *dir_ / "confusion.csv";
  const CliResult result =
      run_cli(fmt::format("eval '{}' --device cpu --csv '{}'", run_->string(), csv.string()), *dir_);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr(fmt::format("mnist/test: {} samples", kTestSamples)));
  EXPECT_THAT(result.out, HasSubstr("per-class accuracy"));
  EXPECT_THAT(result.out, HasSubstr("confusion matrix"));

  // The CSV holds exactly the library's confusion matrix.
  LoadOptions options;
  options.device = "cpu";
  LoadedModel model = load_model(*run_, options);
  const Evaluation evaluation = evaluate_dataset(model, load_split(model, "test"));
  EXPECT_THAT(result.out, HasSubstr(fmt::format("accuracy {:.2f} % ({} / {})", 100.0 * evaluation.result.accuracy,
                                                evaluation.result.correct, kTestSamples)));
  std::ifstream in(csv);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_EQ(line, "true/predicted,0,1,2,3,4,5,6,7,8,9");
  for (std::int64_t t = 0; t < 10; ++t) {
    ASSERT_TRUE(std::getline(in, line)) << "row " << t;
    std::string expected = std::to_string(t);
    for (std::int64_t p = 0; p < 10; ++p) expected += fmt::format(",{}", evaluation.confusion.at(t, p));
    EXPECT_EQ(line, expected);
  }
  EXPECT_FALSE(std::getline(in, line)) << "extra line: " << line;
}

TEST_F(EvalPredictCli, EvalTakesExplicitIdxFiles) {
  const Dataset data = test_images(100);
  write_idx(*dir_ / "images.idx", IdxType::kU8, {100, 28, 28}, data.images.to_vector<std::uint8_t>());
  std::vector<std::uint8_t> labels;
  for (const std::int32_t label : data.labels.span<std::int32_t>()) labels.push_back(static_cast<std::uint8_t>(label));
  write_idx(*dir_ / "labels.idx", IdxType::kU8, {100}, labels);
  const CliResult result = run_cli(fmt::format("eval '{}' --device cpu --data '{}' '{}'", run_->string(),
                                               (*dir_ / "images.idx").string(), (*dir_ / "labels.idx").string()),
                                   *dir_);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("images.idx: 100 samples"));
}

// The same 784 values a sample are not enough: they must be laid out as the training images were. A flat file
// and a channel of 1 are that layout; 14x56 is another picture, which used to be evaluated without a word.
TEST_F(EvalPredictCli, EvalRefusesImagesOfAnotherLayout) {
  const Dataset data = test_images(100);
  std::vector<std::uint8_t> labels;
  for (const std::int32_t label : data.labels.span<std::int32_t>()) labels.push_back(static_cast<std::uint8_t>(label));
  write_idx(*dir_ / "layout-labels.idx", IdxType::kU8, {100}, labels);
  const auto eval_with_shape = [&](const std::string& name, const std::vector<std::int64_t>& shape) {
    write_idx(*dir_ / name, IdxType::kU8, shape, data.images.to_vector<std::uint8_t>());
    return run_cli(fmt::format("eval '{}' --device cpu --data '{}' '{}'", run_->string(), (*dir_ / name).string(),
                               (*dir_ / "layout-labels.idx").string()),
                   *dir_);
  };
  const CliResult square = eval_with_shape("square.idx", {100, 28, 28});
  ASSERT_EQ(square.exit_code, 0) << square.err;
  const std::size_t loss_at = square.out.find("loss ");
  ASSERT_NE(loss_at, std::string::npos) << square.out;
  const std::string accuracy_line = square.out.substr(loss_at, square.out.find('\n', loss_at) - loss_at);
  for (const auto& [name, shape] : std::map<std::string, std::vector<std::int64_t>>{
           {"flat.idx", {100, 784}}, {"channel.idx", {100, 1, 28, 28}}}) {
    const CliResult same = eval_with_shape(name, shape);
    ASSERT_EQ(same.exit_code, 0) << name << ": " << same.err;
    EXPECT_THAT(same.out, HasSubstr(accuracy_line)) << name;
  }
  const CliResult wide = eval_with_shape("wide.idx", {100, 14, 56});
  EXPECT_EQ(wide.exit_code, 1);
  EXPECT_THAT(wide.err, AllOf(HasSubstr("wide.idx"), HasSubstr("[14, 56]"), HasSubstr("[28, 28]"),
                              HasSubstr("another picture")));
}

// A model of more classes than a terminal shows: the per-class table lists the classes that have samples, the
// matrix is not printed, and --csv (more than 1024 classes: millions of cells) is refused before anything runs.
TEST_F(EvalPredictCli, EvalOfManyClassesListsTheClassesWithSamples) {
  Config config = test::tiny_run_config(*dir_, kTestSamples);
  config.model.hidden = {8};
  config.model.classes = 2000;
  config.output.name = "many-classes";
  const fs::path run = Trainer(config).fit().run_dir;
  CliResult result = run_cli(fmt::format("eval '{}' --device cpu", run.string()), *dir_);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, AllOf(HasSubstr("(1990 of the 2000 classes have no sample and are not listed)"),
                                HasSubstr("2000 classes, too wide to print"), Not(HasSubstr("true\\pred"))));
  EXPECT_THAT(result.out, Not(HasSubstr("\n10 ")));  // class 10 has no sample
  const fs::path csv = *dir_ / "many.csv";
  result = run_cli(fmt::format("eval '{}' --device cpu --csv '{}'", run.string(), csv.string()), *dir_);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, AllOf(HasSubstr("many.csv"), HasSubstr("2000 classes"), HasSubstr("1024")));
  EXPECT_FALSE(fs::exists(csv));
}

TEST_F(EvalPredictCli, EvalErrorsExitNonZero) {
  CliResult result = run_cli(fmt::format("eval '{}'", (*dir_ / "missing").string()), *dir_);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("no such file"));
  result = run_cli(fmt::format("eval '{}' --split validation", run_->string()), *dir_);
  EXPECT_EQ(result.exit_code, 2);  // a usage error
  result = run_cli(fmt::format("eval '{}' --csv '{}'", run_->string(), (*dir_ / "no-dir" / "x.csv").string()), *dir_);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("x.csv"));
}

TEST_F(EvalPredictCli, PredictJsonCoversPngPgmAndIdxInputs) {
  const Dataset data = test_images(kIdxImages);
  const auto [png, pgm, idx] = write_inputs("digit", data.images.to_vector<std::uint8_t>(), kIdxImages);

  const CliResult result = run_cli(fmt::format("predict '{}' '{}' '{}' '{}' --json --device cpu", run_->string(),
                                               png.string(), pgm.string(), idx.string()),
                                   *dir_);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json json = nlohmann::json::parse(result.out);
  const auto& predictions = json.at("predictions");
  ASSERT_EQ(predictions.size(), 2u + kIdxImages);
  EXPECT_EQ(predictions[0].at("input"), png.string());
  EXPECT_FALSE(predictions[0].contains("index"));
  EXPECT_EQ(predictions[2].at("input"), idx.string());
  EXPECT_EQ(predictions[2].at("index"), 0);

  // The library's predictions for the same pixels: PNG and PGM carry them unchanged.
  LoadOptions options;
  options.device = "cpu";
  LoadedModel model = load_model(*run_, options);
  const std::vector<Prediction> expected = predict(model, data.images, 3);
  EXPECT_EQ(predictions[0].at("class"), expected[0].label);
  EXPECT_EQ(predictions[1].at("class"), expected[1].label);
  for (std::int64_t i = 0; i < kIdxImages; ++i) {
    const auto& entry = predictions[static_cast<std::size_t>(2 + i)];
    EXPECT_EQ(entry.at("class"), expected[static_cast<std::size_t>(i)].label) << "image " << i;
    const auto& top = entry.at("top_k");
    ASSERT_EQ(top.size(), 3u);
    EXPECT_EQ(top[0].at("class"), entry.at("class"));
    double sum = 0.0;
    for (std::size_t k = 0; k < 3; ++k) {
      // Another process with another batch size (7 images, here 5): BLAS may round differently.
      EXPECT_NEAR(top[k].at("probability").get<double>(), expected[static_cast<std::size_t>(i)].top[k].probability,
                  1e-6);
      if (k > 0) {
        EXPECT_LE(top[k].at("probability").get<double>(), top[k - 1].at("probability").get<double>());
      }
      sum += top[k].at("probability").get<double>();
    }
    EXPECT_LE(sum, 1.0 + 1e-9);  // three of ten probabilities; 1e-9 for rounding
  }
}

// predict reads IDX files as eval --data does, one prediction a sample: [N, 784] was one image of N x 784 pixels
// (refused for its aspect, or squashed into one prediction), [N, 1, 28, 28] was refused as 4-D. Another picture
// of the same values, or samples of another size, are refused naming the file, as eval refuses them. A 2-D file
// whose rows are not the model's inputs cannot be samples, and stays one image, resized like a PNG.
TEST_F(EvalPredictCli, PredictReadsIdxFilesAsEvalDataDoes) {
  const Dataset data = test_images(kIdxImages);
  const std::vector<std::uint8_t> pixels = data.images.to_vector<std::uint8_t>();
  LoadOptions options;
  options.device = "cpu";
  LoadedModel model = load_model(*run_, options);
  const std::vector<Prediction> expected = predict(model, data.images, 3);
  const auto predict_file = [&](const std::string& name, const std::vector<std::int64_t>& shape,
                                const std::vector<std::uint8_t>& bytes) {
    write_idx(*dir_ / name, IdxType::kU8, shape, bytes);
    return run_cli(fmt::format("predict '{}' '{}' --json --device cpu", run_->string(), (*dir_ / name).string()),
                   *dir_);
  };
  for (const auto& [name, shape] : std::map<std::string, std::vector<std::int64_t>>{
           {"samples-square.idx", {kIdxImages, 28, 28}},
           {"samples-flat.idx", {kIdxImages, 784}},
           {"samples-channel.idx", {kIdxImages, 1, 28, 28}}}) {
    const CliResult result = predict_file(name, shape, pixels);
    ASSERT_EQ(result.exit_code, 0) << name << ": " << result.err;
    const nlohmann::json predictions = nlohmann::json::parse(result.out).at("predictions");
    ASSERT_EQ(predictions.size(), static_cast<std::size_t>(kIdxImages)) << name;
    for (std::int64_t i = 0; i < kIdxImages; ++i) {
      const auto& entry = predictions[static_cast<std::size_t>(i)];
      EXPECT_EQ(entry.at("index"), i) << name;
      EXPECT_EQ(entry.at("class"), expected[static_cast<std::size_t>(i)].label) << name << " sample " << i;
      // Another process with another batch size: BLAS may round differently (as in the JSON test above).
      EXPECT_NEAR(entry.at("top_k").at(0).at("probability").get<double>(),
                  expected[static_cast<std::size_t>(i)].top[0].probability, 1e-6)
          << name << " sample " << i;
    }
  }
  const CliResult wide = predict_file("samples-wide.idx", {kIdxImages, 14, 56}, pixels);
  EXPECT_EQ(wide.exit_code, 1);
  EXPECT_THAT(wide.err, AllOf(HasSubstr("samples-wide.idx"), HasSubstr("[14, 56]"), HasSubstr("another picture")));
  std::vector<std::uint8_t> large(pixels.size() * 4);
  const CliResult other_size = predict_file("samples-56.idx", {kIdxImages, 56, 56}, large);
  EXPECT_EQ(other_size.exit_code, 1);
  EXPECT_THAT(other_size.err, AllOf(HasSubstr("samples-56.idx"), HasSubstr("[56, 56]"), HasSubstr("784 inputs")));

  // [28, 28]: rows of 28 values are not samples of this model: one image, as the first sample.
  const CliResult one = predict_file("one-image.idx", {28, 28}, {pixels.begin(), pixels.begin() + 784});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const nlohmann::json single = nlohmann::json::parse(one.out).at("predictions");
  ASSERT_EQ(single.size(), 1u);
  EXPECT_EQ(single[0].at("class"), expected[0].label);
  // [10, 700] neither: one image, refused for its aspect like a PNG of that shape, the file named.
  const CliResult neither = predict_file("rows-700.idx", {10, 700}, std::vector<std::uint8_t>(7000));
  EXPECT_EQ(neither.exit_code, 1);
  EXPECT_THAT(neither.err, AllOf(HasSubstr("rows-700.idx"), HasSubstr("not the model's 784 inputs"),
                                 HasSubstr("aspect")));
  // The rule is in the help.
  EXPECT_THAT(run_cli("predict --help", *dir_).out, HasSubstr("as eval --data reads them"));
}

// A model trained on [N, 1, 28, 28] IDX samples records them as 1x28x28, and predict refused every PNG and PGM for it
// ("the model takes inputs of shape [1, 28, 28], not 2-D images"). The channel of 1 is no dimension of the picture:
// the images are 28x28 for it, and predicted exactly as by the same weights recorded as 28x28.
TEST_F(EvalPredictCli, PredictTakesImagesForAModelOfOneChannelSamples) {
  const fs::path channel_run = test::temp_dir("one-channel-model");
  fs::copy_file(*run_ / "config.toml", channel_run / "config.toml");
  SafetensorsFile weights = load_safetensors(*run_ / "model.safetensors");
  ASSERT_EQ(weights.metadata.at(std::string(kMetadataSampleShape)), "28x28");
  weights.metadata[std::string(kMetadataSampleShape)] = "1x28x28";  // what training on [N, 1, 28, 28] writes
  save_safetensors(channel_run / "model.safetensors", weights.tensors, weights.metadata);

  const std::vector<std::uint8_t> pixels = test_images(2).images.to_vector<std::uint8_t>();
  const fs::path png = *dir_ / "channel-digit.png";
  ASSERT_EQ(stbi_write_png(png.c_str(), 28, 28, 1, pixels.data(), 28), 1);
  const fs::path pgm = *dir_ / "channel-digit.pgm";
  write_pgm(pgm, 14, 14, {pixels.begin() + 28 * 28, pixels.end()});  // resized to 28x28 for both models
  const auto predictions = [&](const fs::path& run) {
    const CliResult result = run_cli(
        fmt::format("predict '{}' '{}' '{}' --json --device cpu", run.string(), png.string(), pgm.string()), *dir_);
    EXPECT_EQ(result.exit_code, 0) << run << ": " << result.err;
    return result.exit_code == 0 ? nlohmann::json::parse(result.out).at("predictions") : nlohmann::json();
  };
  const nlohmann::json expected = predictions(*run_);
  ASSERT_EQ(expected.size(), 2u);
  EXPECT_EQ(predictions(channel_run), expected);  // the same pixels in a batch of the same size: the same bits

  // A 2-D sample shape keeps its ones: a model of [1, 784] samples takes pictures one pixel high (left out, the 1
  // made [784], refused as "not 2-D images"). The first digit's 784 pixels as one row predict as the 28x28 PNG
  // alone (a batch of one both times: the same bits).
  const fs::path row_run = test::temp_dir("one-row-model");
  fs::copy_file(*run_ / "config.toml", row_run / "config.toml");
  weights.metadata[std::string(kMetadataSampleShape)] = "1x784";
  save_safetensors(row_run / "model.safetensors", weights.tensors, weights.metadata);
  const fs::path row = *dir_ / "channel-digit-row.pgm";
  write_pgm(row, 784, 1, {pixels.begin(), pixels.begin() + 28 * 28});
  const auto alone = [&](const fs::path& run, const fs::path& input) {
    const CliResult result = run_cli(fmt::format("predict '{}' '{}' --json --device cpu", run.string(), input.string()),
                                     *dir_);
    EXPECT_EQ(result.exit_code, 0) << run << ": " << result.err;
    return result.exit_code == 0 ? nlohmann::json::parse(result.out).at("predictions").at(0).at("top_k")
                                 : nlohmann::json();
  };
  EXPECT_EQ(alone(row_run, row), alone(*run_, png));
}

// Each input is read once. A pipe (`<(cat FILE)`) was read twice, its first bytes looked at and then the file opened
// again, which found it drained ("IDX file /dev/fd/63: only 0 bytes"), and an image's size was asked of it ("cannot
// read its size: Operation not supported"). Piped, the inputs predict as the files do.
TEST_F(EvalPredictCli, PredictReadsInputsFromPipes) {
  const std::vector<std::uint8_t> pixels = test_images(kIdxImages).images.to_vector<std::uint8_t>();
  const auto [png, pgm, idx] = write_inputs("piped", pixels, kIdxImages);
  const fs::path gzipped = *dir_ / "piped.idx.gz";
  write_idx(gzipped, IdxType::kU8, {kIdxImages, 28, 28}, pixels, /*gzip=*/true);

  const CliResult files = run_cli(fmt::format("predict '{}' '{}' '{}' '{}' '{}' --json --device cpu", run_->string(),
                                              png.string(), pgm.string(), idx.string(), gzipped.string()),
                                  *dir_);
  ASSERT_EQ(files.exit_code, 0) << files.err;
  const CliResult piped = run_cli(
      fmt::format("predict '{}' <(cat '{}') <(cat '{}') <(cat '{}') <(cat '{}') --json --device cpu", run_->string(),
                  png.string(), pgm.string(), idx.string(), gzipped.string()),
      *dir_, /*bash=*/true);
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  const nlohmann::json expected = nlohmann::json::parse(files.out).at("predictions");
  const nlohmann::json got = nlohmann::json::parse(piped.out).at("predictions");
  ASSERT_EQ(got.size(), 2u + 2u * kIdxImages);
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_THAT(got[i].at("input").get<std::string>(), HasSubstr("/dev/fd/")) << i;  // bash's name of a pipe
    EXPECT_EQ(got[i].value("index", -1), expected[i].value("index", -1)) << i;
    EXPECT_EQ(got[i].at("top_k"), expected[i].at("top_k")) << i;  // the same batch as above: the same bits
  }
}

// A file name is bytes: one that is not UTF-8 (here Latin-1's "é", 0xE9) ended `predict --json` with nlohmann's
// "invalid UTF-8 byte" as an internal error. It prints, the byte as U+FFFD, and the prediction is there.
TEST_F(EvalPredictCli, PredictJsonPrintsFileNamesThatAreNotUtf8) {
  const Dataset data = test_images(1);
  const std::vector<std::uint8_t> pixels = data.images.to_vector<std::uint8_t>();
  const fs::path png = *dir_ / "caf\xe9.png";
  ASSERT_EQ(stbi_write_png(png.c_str(), 28, 28, 1, pixels.data(), 28), 1);
  const CliResult result =
      run_cli(fmt::format("predict '{}' '{}' --json --device cpu", run_->string(), png.string()), *dir_);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json json = nlohmann::json::parse(result.out);
  EXPECT_EQ(json.at("predictions").at(0).at("input"), (*dir_ / "caf\xEF\xBF\xBD.png").string());
  EXPECT_EQ(json.at("predictions").at(0).at("top_k").size(), 3u);
}

TEST_F(EvalPredictCli, PredictPrintsATableAndRejectsBadInputs) {
  const fs::path pgm = *dir_ / "flat.pgm";
  std::ofstream(pgm) << "P2 2 2 1\n0 1\n1 0\n";  // resized from 2x2 to 28x28
  CliResult result = run_cli(fmt::format("predict '{}' '{}' -k 2 --device cpu", run_->string(), pgm.string()), *dir_);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("top-2"));
  EXPECT_THAT(result.out, HasSubstr("flat.pgm"));

  const fs::path corrupt = *dir_ / "corrupt.png";
  std::ofstream(corrupt, std::ios::binary) << "\x89PNG\r\n\x1a\nnot really a png";
  result = run_cli(fmt::format("predict '{}' '{}' '{}'", run_->string(), pgm.string(), corrupt.string()), *dir_);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr(corrupt.string()));
  result = run_cli(fmt::format("predict '{}' '{}'", run_->string(), (*dir_ / "absent.png").string()), *dir_);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("absent.png"));
  result = run_cli(fmt::format("predict '{}' '{}' --top-k 0", run_->string(), pgm.string()), *dir_);
  EXPECT_EQ(result.exit_code, 2);  // a usage error
}

// The activation is not in the weights' shapes: a config of another one, by --set or by --config, evaluated another
// model (exit 0). The weights record theirs (sprintnet.activation), and a config that disagrees is refused.
TEST_F(EvalPredictCli, EvalRefusesAConfigOfAnotherActivation) {
  CliResult result = run_cli(
      fmt::format("eval '{}' --device cpu --set 'model.activation=\"tanh\"'", run_->string()), *dir_);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, AllOf(HasSubstr((*run_ / "model.safetensors").string()), HasSubstr("sprintnet.activation"),
                                HasSubstr("\"relu\""), HasSubstr("model.activation = \"tanh\"")));
  EXPECT_THAT(result.out, Not(HasSubstr("accuracy")));

  std::string config = read_file(*run_ / "config.toml");
  const std::string relu = "activation = \"relu\"";
  ASSERT_NE(config.find(relu), std::string::npos) << config;
  config.replace(config.find(relu), relu.size(), "activation = \"tanh\"");
  const fs::path tanh_config = *dir_ / "tanh-config.toml";
  std::ofstream(tanh_config) << config;
  result = run_cli(fmt::format("eval '{}' --device cpu --config '{}'", (*run_ / "model.safetensors").string(),
                               tanh_config.string()),
                   *dir_);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, AllOf(HasSubstr("sprintnet.activation"), HasSubstr(tanh_config.string())));
  // The config it was trained with, given the same way, evaluates.
  result = run_cli(fmt::format("eval '{}' --device cpu --config '{}' --set 'model.activation=\"relu\"'",
                               (*run_ / "model.safetensors").string(), (*run_ / "config.toml").string()),
                   *dir_);
  EXPECT_EQ(result.exit_code, 0) << result.err;
}

// eval --split test looked for all four files of the data set, so it failed where the training files were not there
// (the weights' metadata holds all that inference took from them). Only the split's own files are needed.
TEST_F(EvalPredictCli, EvalOfTheTestSplitNeedsNoTrainingFiles) {
  const fs::path data = test::temp_dir("test-split-only");
  fs::create_directories(data / "mnist");
  for (const fs::directory_entry& entry : fs::directory_iterator(test::data_dir() / "mnist")) {
    if (entry.path().filename().string().starts_with("t10k-")) {
      fs::create_symlink(entry.path(), data / "mnist" / entry.path().filename());
    }
  }
  const CliResult result = run_cli(
      fmt::format("eval '{}' --device cpu --split test --set 'data.dir=\"{}\"'", run_->string(), data.string()),
      *dir_);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr(fmt::format("mnist/test: {} samples", kTestSamples)));
  // The training split still needs its files, and names them.
  const CliResult train = run_cli(
      fmt::format("eval '{}' --device cpu --split train --set 'data.dir=\"{}\"'", run_->string(), data.string()),
      *dir_);
  EXPECT_EQ(train.exit_code, 1);
  EXPECT_THAT(train.err, HasSubstr("train-images-idx3-ubyte"));
}

// eval --csv to a folder that is not there, or to a directory: named before the evaluation, not after it with
// the name of an internal temporary file.
TEST_F(EvalPredictCli, ACsvDestinationThatCannotBeWrittenIsNamedFirst) {
  const std::vector<std::pair<fs::path, std::string>> cases = {{*dir_ / "absent" / "c.csv", "does not exist"},
                                                                {*dir_, "is a directory"}};
  for (const auto& [destination, reason] : cases) {
    const CliResult result =
        run_cli(fmt::format("eval '{}' --device cpu --csv '{}'", run_->string(), destination.string()), *dir_);
    EXPECT_EQ(result.exit_code, 1) << destination;
    EXPECT_THAT(result.err, AllOf(HasSubstr("eval --csv"), HasSubstr(reason), Not(HasSubstr(".tmp"))));
    EXPECT_THAT(result.out, Not(HasSubstr("accuracy"))) << "refused before the evaluation";
  }
}

// --csv /dev/stdout puts the matrix after the report printed before it: with stdout a file or a pipe, the report was
// still in stdio's buffer when the CSV went into the descriptor, so the CSV came first (or, for a long report, in the
// middle of one of its lines).
TEST_F(EvalPredictCli, ACsvOnStdoutComesAfterTheReportPrintedBeforeIt) {
  const CliResult result = run_cli(fmt::format("eval '{}' --device cpu --csv /dev/stdout", run_->string()), *dir_);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::size_t report = result.out.find("confusion matrix (rows: true class");
  const std::size_t csv = result.out.find("\ntrue/predicted,0,1,2,3,4,5,6,7,8,9\n");  // at a line's start
  const std::size_t written = result.out.find("confusion matrix written to /dev/stdout");
  ASSERT_NE(report, std::string::npos) << result.out;
  ASSERT_NE(csv, std::string::npos) << result.out;
  EXPECT_LT(report, csv) << result.out;
  EXPECT_LT(csv, written) << result.out;
}

// --csv naming a descriptor that is not open for writing (`3< file`) or not open at all is refused before the
// evaluation; it failed after it, with "Bad file descriptor".
TEST_F(EvalPredictCli, ACsvDescriptorNotOpenForWritingIsRefusedFirst) {
  const fs::path read_only = *dir_ / "read-only.csv";
  std::ofstream(read_only) << "kept";
  for (const auto& [redirection, reason] : std::vector<std::pair<std::string, std::string>>{
           {fmt::format("/dev/fd/3 3< '{}'", read_only.string()), "descriptor 3 is not open for writing"},
           {"/dev/fd/9 9>&-", "descriptor 9 is not open"}}) {
    const CliResult result =
        run_cli(fmt::format("eval '{}' --device cpu --csv {}", run_->string(), redirection), *dir_);
    EXPECT_EQ(result.exit_code, 1) << redirection;
    EXPECT_THAT(result.err, AllOf(HasSubstr("eval --csv: cannot write '/dev/fd/"), HasSubstr(reason)));
    EXPECT_THAT(result.out, Not(HasSubstr("accuracy"))) << "refused before the evaluation";
  }
  EXPECT_EQ(test::file_bytes(read_only), "kept");
}

// --csv naming a file the evaluation reads was written over it: the weights (the run could not be read again), the
// config, a --data file. Refused before anything runs, the file as it was.
TEST_F(EvalPredictCli, ACsvOverAnInputIsRefused) {
  const fs::path copy = test::temp_dir("eval-csv-over-input");
  fs::copy_file(*run_ / "model.safetensors", copy / "model.safetensors");
  fs::copy_file(*run_ / "config.toml", copy / "config.toml");
  const Dataset data = test_images(kIdxImages);
  write_idx(copy / "images.idx", IdxType::kU8, {kIdxImages, 28, 28}, data.images.to_vector<std::uint8_t>());
  std::vector<std::uint8_t> labels;
  for (const std::int32_t label : data.labels.span<std::int32_t>()) labels.push_back(static_cast<std::uint8_t>(label));
  write_idx(copy / "labels.idx", IdxType::kU8, {kIdxImages}, labels);
  const std::string data_option =
      fmt::format("--data '{}' '{}'", (copy / "images.idx").string(), (copy / "labels.idx").string());
  const std::vector<std::pair<fs::path, std::string>> cases = {
      {copy / "model.safetensors", "the weights"}, {copy / "config.toml", "the config"}, {copy / "labels.idx", "a --data file"}};
  for (const auto& [input, what] : cases) {
    const std::string before = test::file_bytes(input);
    const CliResult result = run_cli(fmt::format("eval '{}' --device cpu {} --csv '{}'", copy.string(),
                                                 what == "a --data file" ? data_option : "", input.string()),
                                     *dir_);
    EXPECT_EQ(result.exit_code, 1) << input;
    EXPECT_THAT(result.err, AllOf(HasSubstr("eval --csv"), HasSubstr("that is " + what))) << result.err;
    EXPECT_EQ(test::file_bytes(input), before) << input;
  }
  // The data set's own files, when --data is not given.
  const DatasetFiles files = dataset_files(load_model(copy, LoadOptions{}).config.data);
  const CliResult result =
      run_cli(fmt::format("eval '{}' --device cpu --csv '{}'", copy.string(), files.test_labels.string()), *dir_);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("that is a file of the data set"));
}

// Under a launcher's job of several ranks this process is one rank already: --gpus started a separate job in
// every rank (on the same GPUs), and a sweep's runs each failed or joined the job. Both are refused up front.
TEST(LauncherCli, GpusAndSweepsInsideALaunchersJobAreRefused) {
  const fs::path dir = test::temp_dir("launcher-cli");
  const fs::path config = dir / "tiny.toml";
  std::ofstream(config) << fmt::format("[data]\ndir = \"{}\"\ntrain_limit = 600\n[device]\nname = \"cpu\"\n",
                                       test::data_dir().string());
  const std::map<std::string, std::string> job = {
      {"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}};
  for (const auto& [name, value] : job) setenv(name.c_str(), value.c_str(), 1);
  const CliResult gpus = run_cli(fmt::format("train '{}' --gpus 2", config.string()), dir);
  const CliResult sweep =
      run_cli(fmt::format("sweep '{}' --seeds 0,1 --out '{}'", config.string(), (dir / "s").string()), dir);
  for (const auto& [name, value] : job) unsetenv(name.c_str());
  EXPECT_EQ(gpus.exit_code, 1);
  EXPECT_THAT(gpus.err, AllOf(HasSubstr("rank 1 of 2 started by torchrun"), HasSubstr("leave --gpus out")));
  EXPECT_EQ(sweep.exit_code, 1);
  EXPECT_THAT(sweep.err, HasSubstr("a sweep trains its runs in one process"));
  EXPECT_FALSE(fs::exists(dir / "s"));
}

// A sweep goes on past a failed run, then exits non-zero so that a script sees it.
TEST(SweepCli, AFailedRunEndsTheSweepNonZeroAfterItsSummary) {
  const fs::path dir = test::temp_dir("sweep-cli");
  const fs::path config = dir / "sweep.toml";
  std::ofstream(config) << fmt::format(
      "[data]\ndir = \"{}\"\ntrain_limit = 600\ntest_limit = 200\n[model]\nhidden = [16]\n[train]\nepochs = 1\n"
      "batch_size = 100\n[device]\nname = \"cpu\"\nthreads = 1\n",
      test::data_dir().string());
  const fs::path out = dir / "out";
  const CliResult result =
      run_cli(fmt::format("sweep '{}' --grid optim.lr=0.1,1e30 --out '{}'", config.string(), out.string()), dir);
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_THAT(result.out, HasSubstr("2 runs, 1 failed"));
  EXPECT_THAT(result.err, HasSubstr("1 of 2 runs failed"));
  EXPECT_THAT(read_file(out / "summary.md"), HasSubstr("failed: training diverged"));
  // A resume continues the sweep as it began: options that would change it are refused, not silently ignored.
  const std::vector<std::string> changes = {"--grid optim.lr=0.3", "--seeds 7", "--set train.epochs=2",
                                            "--out elsewhere", fmt::format("'{}'", config.string())};
  for (const std::string& extra : changes) {
    const CliResult refused = run_cli(fmt::format("sweep --resume '{}' {}", out.string(), extra), dir);
    EXPECT_NE(refused.exit_code, 0) << extra;
    EXPECT_THAT(refused.err, HasSubstr("excludes")) << extra;
  }
  EXPECT_FALSE(fs::exists(dir / "elsewhere"));
}

}  // namespace
}  // namespace sprintnet::train

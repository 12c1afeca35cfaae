// dataset_files (where a DataConfig's files are) and load_train_test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "data/idx_files.h"
#include "sprintnet/data/dataset.h"
#include "sprintnet/data/idx.h"

namespace sprintnet {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using test::error_message;
using test::ScratchDir;

constexpr std::array<const char*, 4> kNames = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                               "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};

// Writes a small data set under the standard names into `folder`: n_train and
// n_test images of rows×cols, uint8 labels in [0, classes) with every class in
// the training set.
void write_standard_folder(const std::filesystem::path& folder, std::int64_t n_train, std::int64_t n_test,
                           std::int64_t rows, std::int64_t cols, std::int64_t classes, Generator& gen,
                           bool gzip = false) {
  std::filesystem::create_directories(folder);
  const std::string ext = gzip ? ".gz" : "";
  const auto labels = [&](std::int64_t n) {
    auto values = test::random_bytes(static_cast<std::size_t>(n), gen, 0, static_cast<unsigned>(classes));
    for (std::int64_t c = 0; c < std::min(classes, n); ++c) values[static_cast<std::size_t>(c)] = static_cast<std::uint8_t>(c);
    return values;
  };
  write_idx(folder / (kNames[0] + ext), IdxType::kU8, {n_train, rows, cols},
            test::random_bytes(static_cast<std::size_t>(n_train * rows * cols), gen), gzip);
  write_idx(folder / (kNames[1] + ext), IdxType::kU8, {n_train}, labels(n_train), gzip);
  write_idx(folder / (kNames[2] + ext), IdxType::kU8, {n_test, rows, cols},
            test::random_bytes(static_cast<std::size_t>(n_test * rows * cols), gen), gzip);
  write_idx(folder / (kNames[3] + ext), IdxType::kU8, {n_test}, labels(n_test), gzip);
}

TEST(DatasetFiles, StandardLayoutAcceptsRawOrGzipAndPrefersRaw) {
  ScratchDir dir("files-layout");
  Generator gen(test::test_seed());
  write_standard_folder(dir / "fashion-mnist", 6, 4, 2, 2, 3, gen, /*gzip=*/true);
  DataConfig config;
  config.dataset = "fashion-mnist";
  config.dir = dir.path().string();
  EXPECT_EQ(dataset_files(config).train_images, dir / "fashion-mnist" / "train-images-idx3-ubyte.gz");

  write_standard_folder(dir / "fashion-mnist", 6, 4, 2, 2, 3, gen, /*gzip=*/false);
  const DatasetFiles files = dataset_files(config);
  EXPECT_EQ(files.train_images, dir / "fashion-mnist" / "train-images-idx3-ubyte");
  EXPECT_EQ(files.train_labels, dir / "fashion-mnist" / "train-labels-idx1-ubyte");
  EXPECT_EQ(files.test_images, dir / "fashion-mnist" / "t10k-images-idx3-ubyte");
  EXPECT_EQ(files.test_labels, dir / "fashion-mnist" / "t10k-labels-idx1-ubyte");
}

TEST(DatasetFiles, MissingFileSaysToRunGetData) {
  ScratchDir dir("files-missing");
  Generator gen(test::test_seed());
  write_standard_folder(dir / "mnist", 6, 4, 2, 2, 3, gen);
  std::filesystem::remove(dir / "mnist" / kNames[3]);
  DataConfig config;
  config.dir = dir.path().string();
  EXPECT_THAT(error_message([&] { dataset_files(config); }),
              AllOf(HasSubstr((dir / "mnist" / kNames[3]).string()), HasSubstr("not found"),
                    HasSubstr("scripts/get-data --dir " + dir.path().string())));
  // One split's files are found without the other's (evaluating one split needs only its own).
  EXPECT_EQ(dataset_split_files(config, Split::kTrain).labels, dir / "mnist" / kNames[1]);
  EXPECT_THAT(error_message([&] { dataset_split_files(config, Split::kTest); }), HasSubstr(kNames[3]));
}

TEST(DatasetFiles, RejectsUnknownDataset) {
  DataConfig config;
  config.dataset = "cifar10";
  EXPECT_THAT(error_message([&] { dataset_files(config); }),
              AllOf(HasSubstr("data.dataset"), HasSubstr("\"cifar10\""), HasSubstr("mnist, fashion-mnist, idx")));
}

TEST(DatasetFiles, ExplicitPathsMustBeGivenAndExist) {
  ScratchDir dir("files-explicit");
  Generator gen(test::test_seed());
  write_standard_folder(dir.path(), 6, 4, 2, 2, 3, gen);
  DataConfig config;
  config.dataset = "idx";
  config.train_images = (dir / kNames[0]).string();
  config.test_images = (dir / kNames[2]).string();
  config.test_labels = (dir / kNames[3]).string();
  EXPECT_THAT(error_message([&] { dataset_files(config); }),
              AllOf(HasSubstr("data.train_labels is empty"), HasSubstr("dataset = \"idx\"")));
  EXPECT_EQ(dataset_split_files(config, Split::kTest).labels, dir / kNames[3]);  // the test split's keys suffice
  config.train_labels = (dir / kNames[1]).string();
  EXPECT_EQ(dataset_files(config).train_labels, dir / kNames[1]);
  config.test_images = (dir / "typo").string();
  EXPECT_THAT(error_message([&] { dataset_files(config); }),
              AllOf(HasSubstr("data.test_images"), HasSubstr((dir / "typo").string()), HasSubstr("no such file")));
  // A path that exists but is no file is named as what it is, not reported missing.
  config.test_images = dir.path().string();
  EXPECT_THAT(error_message([&] { dataset_files(config); }),
              AllOf(HasSubstr("data.test_images"), HasSubstr("is a directory")));
}

// A relative data.* path is found from the working directory, which is not where the config is: its error said so
// for data.dir (the mnist layout) but not for the explicit paths.
TEST(DatasetFiles, ARelativeExplicitPathThatIsMissingIsNamedFromTheWorkingDirectory) {
  DataConfig config;
  config.dataset = "idx";
  config.train_images = "sprintnet-no-such-folder/train-images";
  config.train_labels = "sprintnet-no-such-folder/train-labels";
  const std::string absolute = (std::filesystem::current_path() / config.train_images).string();
  EXPECT_THAT(error_message([&] { dataset_split_files(config, Split::kTrain); }),
              AllOf(HasSubstr("data.train_images = \"sprintnet-no-such-folder/train-images\": no such file"),
                    HasSubstr(fmt::format("(relative to the working directory: {})", absolute))));
  // An absolute path needs no such note.
  config.train_images = "/sprintnet-no-such-folder/train-images";
  EXPECT_THAT(error_message([&] { dataset_split_files(config, Split::kTrain); }),
              AllOf(HasSubstr("no such file"), ::testing::Not(HasSubstr("working directory"))));
}

TEST(LoadTrainTest, LoadsBothSplitsWithLimits) {
  ScratchDir dir("train-test");
  Generator gen(test::test_seed());
  write_standard_folder(dir / "mnist", 20, 8, 4, 3, 5, gen, /*gzip=*/true);
  DataConfig config;
  config.dir = dir.path().string();
  config.train_limit = 12;
  config.test_limit = 5;
  const TrainTestData data = load_train_test(config);
  EXPECT_EQ(data.train.size(), 12);
  EXPECT_EQ(data.test.size(), 5);
  EXPECT_EQ(data.train.num_classes, 5);
  EXPECT_EQ(data.test.num_classes, 5);
  EXPECT_EQ(data.train.sample_shape, (Shape{4, 3}));
  EXPECT_EQ(data.test.images.shape(), (Shape{5, 12}));
  EXPECT_EQ(data.train.name, "mnist/train");
  EXPECT_EQ(data.test.name, "mnist/test");
  EXPECT_FALSE(test::all_zero(data.train.images));

  config.train_limit = -1;
  EXPECT_THAT(error_message([&] { load_train_test(config); }), HasSubstr("data.train_limit = -1"));
}

TEST(LoadTrainTest, TestLabelsMustFitTheTrainingClasses) {
  ScratchDir dir("train-test-classes");
  Generator gen(test::test_seed());
  write_standard_folder(dir / "mnist", 10, 6, 2, 2, 4, gen);
  const auto test_labels = dir / "mnist" / kNames[3];
  write_idx(test_labels, IdxType::kU8, {6}, {0, 1, 2, 3, 4, 0});
  DataConfig config;
  config.dir = dir.path().string();
  EXPECT_THAT(error_message([&] { load_train_test(config); }),
              AllOf(HasSubstr(test_labels.string()), HasSubstr("label 4 at index 4"), HasSubstr("[0, 4)")));
}

TEST(LoadTrainTest, ModelClassesFixesTheClassCountAndWarnsOfEmptyClasses) {
  ScratchDir dir("train-test-model-classes");
  Generator gen(test::test_seed());
  write_standard_folder(dir / "mnist", 10, 6, 2, 2, 4, gen);
  const auto train_labels = dir / "mnist" / kNames[1];
  DataConfig config;
  config.dir = dir.path().string();
  // Labels all 200: 201 classes inferred, 200 of them empty, named as ranges with the file.
  write_idx(train_labels, IdxType::kU8, {10}, std::vector<std::uint8_t>(10, 200));
  write_idx(dir / "mnist" / kNames[3], IdxType::kU8, {6}, std::vector<std::uint8_t>(6, 0));
  ::testing::internal::CaptureStderr();
  const TrainTestData inferred = load_train_test(config);
  const std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(inferred.train.num_classes, 201);
  EXPECT_THAT(warning, AllOf(HasSubstr("warning"), HasSubstr(train_labels.string()), HasSubstr("200 of the model's 201"),
                             HasSubstr(": 0-199 ("), HasSubstr("model.classes")));
  // model.classes = 4: a label at or above it is an error naming the file and the key.
  EXPECT_THAT(error_message([&] { load_train_test(config, 4); }),
              AllOf(HasSubstr(train_labels.string()), HasSubstr("label 200 at index 0"), HasSubstr("[0, 4)"),
                    HasSubstr("model.classes")));
  // model.classes = 6 over labels 0-3, 5: class 4 is empty, and the test split is checked against 6.
  write_idx(train_labels, IdxType::kU8, {10}, {0, 1, 2, 3, 5, 0, 1, 2, 3, 5});
  ::testing::internal::CaptureStderr();
  const TrainTestData fixed = load_train_test(config, 6);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), HasSubstr("1 of the model's 6 classes have no training samples: 4 ("));
  EXPECT_EQ(fixed.train.num_classes, 6);
  EXPECT_EQ(fixed.test.num_classes, 6);
  // Every class present: no warning.
  write_idx(train_labels, IdxType::kU8, {10}, {0, 1, 2, 3, 4, 5, 0, 1, 2, 3});
  ::testing::internal::CaptureStderr();
  load_train_test(config, 6);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(LoadTrainTest, SampleShapesMustMatch) {
  ScratchDir dir("train-test-shapes");
  Generator gen(test::test_seed());
  write_standard_folder(dir / "mnist", 10, 6, 2, 3, 4, gen);
  const auto test_images = dir / "mnist" / kNames[2];
  write_idx(test_images, IdxType::kU8, {6, 3, 2}, test::random_bytes(36, gen));
  DataConfig config;
  config.dir = dir.path().string();
  EXPECT_THAT(error_message([&] { load_train_test(config); }),
              AllOf(HasSubstr(test_images.string()), HasSubstr("[2, 3]"), HasSubstr("[3, 2]"), HasSubstr("must match")));
}

}  // namespace
}  // namespace sprintnet

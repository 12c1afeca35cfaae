// --set KEY=VALUE overrides: parsed as TOML values, bare words as strings, applied after the file.
#include "config_test_util.h"
#include "sprintnet/io/atomic_file.h"

namespace sprintnet {
namespace {

using test::overrides_error;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(ConfigOverrides, ParseNumbersBooleansArraysAndStrings) {
  const Config config = config_from_overrides({
      "optim.lr=0.125",
      "train.epochs = 3",
      "optim.momentum=1",  // an integer where a float is expected
      "train.shuffle=false",
      "model.hidden=[512, 128]",
      "data.dataset=fashion-mnist",  // not a TOML value: taken as it is
      "output.name=\"my run\"",      // a TOML string: unquoted
      "data.dir=2024",               // a string key keeps numeric-looking text
      "device.name=cuda:1",
  });
  EXPECT_EQ(config.optim.lr, 0.125);
  EXPECT_EQ(config.train.epochs, 3);
  EXPECT_EQ(config.optim.momentum, 1.0);
  EXPECT_FALSE(config.train.shuffle);
  EXPECT_EQ(config.model.hidden, (std::vector<std::int64_t>{512, 128}));
  EXPECT_EQ(config.data.dataset, "fashion-mnist");
  EXPECT_EQ(config.output.name, "my run");
  EXPECT_EQ(config.data.dir, "2024");
  EXPECT_EQ(config.device.name, "cuda:1");
  EXPECT_TRUE(config_from_overrides({"model.hidden=[]"}).model.hidden.empty());
  EXPECT_EQ(config_from_overrides({"output.name="}).output.name, "");
}

TEST(ConfigOverrides, ApplyAfterTheFileAndLaterOnesWin) {
  const auto path = test::write_toml("[optim]\nlr = 0.5\nmomentum = 0.8\n", "base.toml");
  const Config config = load_config(path, {"optim.lr=0.01", "seed=3", "seed=4"});
  EXPECT_EQ(config.optim.lr, 0.01);
  EXPECT_EQ(config.optim.momentum, 0.8);
  EXPECT_EQ(config.seed, 4u);
}

// A value that starts as TOML but does not read as it was taken as a string, and the error hid why: "expected an
// integer, got a string" for a 20-digit seed or a list without its comma; an unclosed quote became part of a name.
TEST(ConfigOverrides, ValuesThatStartAsTomlSayWhyTheyDoNotRead) {
  EXPECT_THAT(overrides_error({"seed=99999999999999999999"}),
              AllOf(HasSubstr("as TOML:"), HasSubstr("64 bits"), HasSubstr("seed: expected an integer")));
  EXPECT_THAT(overrides_error({"model.hidden=[16 32]"}), AllOf(HasSubstr("as TOML:"), HasSubstr("model.hidden")));
  EXPECT_THAT(overrides_error({"output.name=\"unterminated"}),
              AllOf(HasSubstr("output.name does not read as a TOML string"), HasSubstr("close its quote")));
  EXPECT_THAT(overrides_error({"optim.lr=fast"}), Not(HasSubstr("as TOML")));  // a word: no TOML to explain
  EXPECT_EQ(config_from_overrides({"data.dataset=fashion-mnist"}).data.dataset, "fashion-mnist");  // still a string
}

TEST(ConfigOverrides, ErrorsNameTheOverride) {
  EXPECT_THAT(overrides_error({"optim.learning_rate=0.1"}),
              AllOf(HasSubstr("--set 'optim.learning_rate=0.1'"), HasSubstr("unknown key 'optim.learning_rate'"),
                    HasSubstr("(did you mean 'optim.lr'?)")));
  EXPECT_THAT(overrides_error({"optim.lr"}), AllOf(HasSubstr("--set 'optim.lr'"), HasSubstr("expected KEY=VALUE")));
  EXPECT_THAT(overrides_error({"optim.lr=fast"}), HasSubstr("optim.lr: expected a number, got a string (\"fast\")"));
  EXPECT_THAT(overrides_error({"optim.lr=-1"}),
              AllOf(HasSubstr("--set 'optim.lr=-1'"), HasSubstr("optim.lr: must be > 0, got -1")));
  EXPECT_THAT(overrides_error({"optim.lr=nan"}), HasSubstr("optim.lr: must be a finite number, got nan"));
  EXPECT_THAT(overrides_error({"model.hidden=[1, 0]"}), HasSubstr("model.hidden: element [1] must be >= 1, got 0"));
  EXPECT_THAT(overrides_error({"train.epochs=[1"}),
              HasSubstr("train.epochs: expected an integer, got a string (\"[1\")"));
  EXPECT_THAT(overrides_error({"optim=1"}), AllOf(HasSubstr("'optim' is a table"), HasSubstr("lr")));
  EXPECT_THAT(overrides_error({"data.dataset=mnits"}), HasSubstr("(did you mean 'mnist'?)"));
  EXPECT_THAT(overrides_error({"optim.nesterov=true", "optim.momentum=0"}),
              HasSubstr("optim.nesterov = true requires"));
}

TEST(ConfigOverrides, OverrideErrorsAlsoNameTheFile) {
  const auto path = test::write_toml("[optim]\nnesterov = true\n", "base.toml");
  try {
    load_config(path, {"optim.dampening=0.5"});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), AllOf(HasSubstr("base.toml with --set overrides"), HasSubstr("optim.nesterov")));
  }
}

}  // namespace
}  // namespace sprintnet

namespace sprintnet {
namespace {

// Found by the config fuzzer: a bare-word value in Latin-1 was accepted, then config.toml
// (UTF-8 by definition) could not be read back by resume, eval or predict.
TEST(ConfigOverrideUtf8, InvalidUtf8ValuesAreRejectedNamingTheKey) {
  for (const std::string& bad : {std::string("output.name=\xff"), std::string("output.name=a\xc3"),
                                std::string("output.name=\xed\xa0\x80")}) {
    try {
      config_from_overrides({bad});
      FAIL() << "accepted invalid UTF-8";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("output.name"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("UTF-8"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(config_from_overrides({"output.name=caf\xc3\xa9"}).output.name, "caf\xc3\xa9");
}

// TOML's \u0000 in a string: the paths and names it became ended at it in every C call and message ("data file
// /tmp/data", the rest of the error lost). Refused naming the key, from --set and from a file alike.
TEST(ConfigOverrideNul, ANulCharacterInAStringIsRefusedNamingTheKey) {
  for (const std::string key : {"output.name", "data.dir", "output.dir", "optim.type"}) {
    EXPECT_THAT([&] { config_from_overrides({key + "=\"a\\u0000b\""}); },
                ::testing::ThrowsMessage<Error>(::testing::AllOf(::testing::HasSubstr(key),
                                                                 ::testing::HasSubstr("NUL character"))));
  }
  const std::filesystem::path file = test::temp_dir("config-nul") / "nul.toml";
  write_text_file_atomically(file, "[data]\ndir = \"/tmp/data\\u0000zzz\"\n");
  EXPECT_THAT([&] { load_config(file); },
              ::testing::ThrowsMessage<Error>(::testing::AllOf(::testing::HasSubstr("data.dir"),
                                                               ::testing::HasSubstr("NUL character"))));
}

}  // namespace
}  // namespace sprintnet

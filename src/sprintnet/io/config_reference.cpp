// docs/CONFIG.md, generated from the schema so the reference cannot drift from
// what the loader accepts (tests/io/config_reference_test.cpp keeps the file in step).
#include <fmt/format.h>

#include "sprintnet/io/config.h"
#include "sprintnet/io/config_schema.h"

namespace sprintnet {
namespace {

constexpr std::string_view kIntroduction = R"(# Configuration reference

<!-- Generated from src/sprintnet/io/config_schema.cpp by config_reference_markdown(); do not edit.
     Regenerate with: SPRINTNET_UPDATE_DOCS=1 <build>/tests/io/io_test --gtest_filter='ConfigReference.*' -->

A run is described by a TOML file. Every key is optional: a key left out keeps
the default listed below, so an empty file is a valid configuration.

`--set KEY=VALUE` on the command line (repeatable) overrides a key after the
file is read. KEY is the dotted name (`optim.lr`); VALUE is read as a TOML
value (`0.1`, `true`, `[512, 512]`, `"text"`), and text that is not a TOML
value is taken as a string, so `--set data.dataset=fashion-mnist` works.

Unknown keys and tables are errors, with the closest known key suggested; so
are values of the wrong type and values outside the allowed range. Errors name
the file, the line and the key. Integers are accepted where a float is
expected; NaN and infinity never are. The resolved configuration a run records
lists every key and loads back to the same values.

```toml
seed = 1

[model]
hidden = [512, 256]
activation = "gelu"

[optim]
type = "adamw"
lr = 1e-3
weight_decay = 0.01

[schedule]
type = "onecycle"
```

## The `[sweep]` table

`sprintnet sweep CONFIG` trains the config over a grid (docs/SWEEP.md). The grid
can live in the file: `grid` maps dotted keys to arrays of the values each takes,
`seeds` lists the seeds every grid point runs with. `sprintnet train` ignores the
table; `--grid KEY=V1,V2` on the command line replaces the file's values of KEY.

```toml
[sweep]
grid = { "optim.lr" = [0.1, 0.05, 0.02], "model.hidden" = [[128], [256, 256]] }
seeds = [0, 1, 2]
```
)";

std::string_view type_name(ValueKind kind) {
  switch (kind) {
    case ValueKind::kBool: return "boolean";
    case ValueKind::kInteger: return "integer";
    case ValueKind::kFloat: return "float";
    case ValueKind::kString: return "string";
    case ValueKind::kIntegerList: return "integer array";
  }
  return "value";
}

// A table cell: '|' would end the cell.
std::string cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

// The doc line plus the allowed values: "learning rate. Must be > 0."
std::string meaning(const ConfigKey& key) {
  std::string text(key.doc);
  text += '.';
  if (!key.constraint.choices.empty()) {
    std::vector<std::string> quoted;
    for (std::string_view choice : key.constraint.choices) quoted.push_back(fmt::format("`{}`", choice));
    text += fmt::format(" One of {}.", fmt::join(quoted, ", "));
  } else if (std::string allowed = describe_constraint(key); !allowed.empty()) {
    allowed[0] = static_cast<char>(allowed[0] - 'a' + 'A');
    text += fmt::format(" {}.", allowed);
  }
  return cell(text);
}

}  // namespace

std::string config_reference_markdown() {
  std::string out(kIntroduction);
  for (const ConfigTable& table : config_tables()) {
    out += table.name.empty() ? std::string("\n## Top level\n\n") : fmt::format("\n## [{}]\n\n", table.name);
    out += fmt::format("{}\n\n", table.doc);
    out += "| key | type | default | meaning |\n|---|---|---|---|\n";
    for (const ConfigKey& key : config_schema()) {
      if (key.table() != table.name) continue;
      out += fmt::format("| `{}` | {} | `{}` | {} |\n", key.name, type_name(key.kind),
                         cell(format_toml_value(key.default_value())), meaning(key));
    }
  }
  return out;
}

}  // namespace sprintnet

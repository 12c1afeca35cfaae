#pragma once
// The text of progress lines, kept apart from the clock and the terminal so
// tests can check it exactly.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sprintnet {

// `v` with a NaN's sign cleared: fmt and printf write a negative NaN as "-nan", a sign that means
// nothing (and that R or a spreadsheet reads as text). For the losses of a diverged run.
double unsigned_nan(double v);
// "1 epoch", "2 epochs", "0 runs", "3 classes": the count and the noun, plural unless the count is 1 (`plural`,
// or the noun + "s" when it is empty).
// A loss for people: four decimals ("0.1234"), or four significant digits in scientific form from 1e6 on, where the
// decimals of a loss that grows without bound ran to 39 digits ("274800000000000000000000000000000000000.0000");
// "nan" and "inf" unsigned as unsigned_nan leaves them.
std::string format_loss(double loss);
std::string counted(std::int64_t count, std::string_view noun, std::string_view plural = {});
// Three significant digits with an SI suffix: 523, 52.1k, 1.23M, 4.00G.
std::string format_si(double value);
// Rounded to whole seconds: "0:07", "12:34", "1:02:03"; "--:--" when not finite.
std::string format_duration(double seconds);
// "[#########...........]": `fraction` (clamped to [0, 1]) of `width` characters filled.
std::string format_bar(double fraction, int width);

struct ProgressSnapshot {
  std::int64_t epoch = 1;  // 1-based
  std::int64_t epochs = 1;
  std::int64_t step_in_epoch = 0;  // 1-based; steps done in this epoch
  std::int64_t steps_per_epoch = 1;
  double loss = 0.0;
  double samples_per_s = 0.0;
  std::optional<double> eta_s;  // rest of the whole run; unknown before any step has been timed
};

inline constexpr int kProgressBarWidthChars = 20;

// Bar:   "epoch 3/10 [#########...........] 234/468 loss 0.1234 52.1k samples/s ETA 0:07"
// Plain: "epoch 3/10 step 234/468 loss 0.1234 52.1k samples/s ETA 0:07"
std::string format_progress_line(const ProgressSnapshot& snapshot, bool with_bar);
// The bar line shortened to fit a terminal `columns` wide, one column left free (a line that fills the last
// column wraps on some terminals, and "\r" then redraws on the next line): the bar narrows (down to none),
// then the throughput goes, then the line is cut. columns <= 0: unknown, the full line.
std::string format_progress_line_to_fit(const ProgressSnapshot& snapshot, int columns);

}  // namespace sprintnet

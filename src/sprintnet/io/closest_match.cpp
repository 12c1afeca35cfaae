#include "sprintnet/io/closest_match.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace sprintnet {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // One row of the dynamic-programming table at a time.
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitute});
    }
  }
  return row[b.size()];
}

namespace {

// "learning_rate" -> "lr"; empty when the word has a single part.
std::string initials(std::string_view word) {
  std::string result;
  bool at_part_start = true;
  bool has_separator = false;
  for (char c : word) {
    if (c == '_' || c == '-') {
      at_part_start = true;
      has_separator = true;
    } else if (at_part_start) {
      result += c;
      at_part_start = false;
    }
  }
  return has_separator ? result : std::string();
}

}  // namespace

std::size_t name_distance(std::string_view word, std::string_view candidate) {
  std::size_t distance = edit_distance(word, candidate);
  // Either side may be the abbreviation: "learning_rate" for "lr", or "wd" for "weight_decay".
  if (const std::string abbreviation = initials(word); !abbreviation.empty()) {
    distance = std::min(distance, edit_distance(abbreviation, candidate) + 1);
  }
  if (const std::string abbreviation = initials(candidate); !abbreviation.empty()) {
    distance = std::min(distance, edit_distance(word, abbreviation) + 1);
  }
  // A word that starts the other one is a shortening or an extension: "optimizer" for "optim".
  constexpr std::size_t kMinPrefixChars = 3;
  const std::string_view shorter = word.size() < candidate.size() ? word : candidate;
  const std::string_view longer = word.size() < candidate.size() ? candidate : word;
  if (shorter.size() >= kMinPrefixChars && longer.starts_with(shorter)) distance = std::min<std::size_t>(distance, 1);
  return distance;
}

bool close_enough(std::size_t distance, std::string_view word, std::string_view candidate) {
  // Up to two typos always; for longer words up to about a third of the letters.
  return distance <= std::max<std::size_t>(2, std::max(word.size(), candidate.size()) / 3);
}

std::optional<std::string> closest_match(std::string_view word, std::span<const std::string_view> candidates) {
  std::optional<std::string_view> best;
  std::size_t best_distance = 0;
  for (std::string_view candidate : candidates) {
    const std::size_t distance = name_distance(word, candidate);
    if (!best || distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  if (!best || !close_enough(best_distance, word, *best)) return std::nullopt;
  return std::string(*best);
}

}  // namespace sprintnet

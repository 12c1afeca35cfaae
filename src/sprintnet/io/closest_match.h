#pragma once
// "Did you mean ...?" for misspelt config keys, table names and enum values.
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace sprintnet {

// Levenshtein distance (insertions, deletions, substitutions all cost 1).
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word`, or nothing when even the closest is so far
// away that suggesting it would mislead. An abbreviation by initials counts as
// close ("learning_rate" ~ "lr", "wd" ~ "weight_decay"), because that is how
// ML hyperparameters are usually shortened.
std::optional<std::string> closest_match(std::string_view word, std::span<const std::string_view> candidates);

// The distance closest_match() ranks by: the edit distance, or one more than the
// edit distance when either word is replaced by the initials of its '_'/'-'
// separated parts, or 1 when one word (of 3+ letters) starts the other,
// whichever is smallest.
std::size_t name_distance(std::string_view word, std::string_view candidate);

// Whether a distance is small enough, relative to the words, to suggest.
bool close_enough(std::size_t distance, std::string_view word, std::string_view candidate);

}  // namespace sprintnet

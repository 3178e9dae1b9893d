#pragma once
// "Did you mean ...?" for misspelt keys: edit distance and the closest candidate.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::envspec {

/// Optimal string alignment distance: insertions, deletions, substitutions and swaps of two adjacent
/// characters each cost 1 ("labls" -> "labels" is 1, "cdm" -> "cmd" is 1).
std::size_t edit_distance(std::string_view a, std::string_view b);

/// The candidate closest to `word`, if it is close enough to be a likely typo: at most one edit for
/// short words, at most a third of the word's length otherwise. Ties go to the earlier candidate.
std::optional<std::string> closest_match(std::string_view word,
                                         const std::vector<std::string_view>& candidates);

} // namespace lockstep::envspec

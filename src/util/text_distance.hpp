#pragma once
// Text distance for "did you mean" suggestions. Pure: no I/O, no domain knowledge.
#include <string>
#include <vector>

namespace rc::util {

// Optimal string alignment distance between a and b, in bytes: an insertion, deletion,
// substitution or transposition of two adjacent bytes each count 1 ("wieght" is 1 away from "weight").
int edit_distance(const std::string& a, const std::string& b);

// The candidate within edit distance 2 of word (and nearer than word's own length), or "" when none
// is; the first of equally near candidates wins.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace rc::util

// Algorithm choices a library made without timing (deterministic mode), kept so that a later
// process launches the same algorithms. A library that lists its deterministic algorithms in
// an order that can change between processes (MIOpen's immediate mode sorts by expected time,
// read from a find-db that any non-deterministic run refreshes) records each choice here under
// a key naming the library version, the pass, the dtype and the shape; a resumed run adopts
// the records of its checkpoint before its first step, and the library takes an adopted
// choice whenever it is still offered. The records travel in checkpoints as text: one
// "key<TAB>choice" line each, sorted.
//
// Process-wide and thread-safe (choices depend on the device's library, not on the thread).
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace hg::ops {

using AlgorithmChoices = std::map<std::string, std::string>;  // key -> choice

// Bounds on what is recorded or adopted: keys and choices of printable ASCII without tabs
// (a choice also without spaces), at most these lengths, at most kMaxAlgorithmChoices records.
inline constexpr size_t kMaxAlgorithmChoiceKey = 256;
inline constexpr size_t kMaxAlgorithmChoiceValue = 64;
inline constexpr size_t kMaxAlgorithmChoices = 4096;

// Empty when `key` and `choice` are a valid record (printable ASCII, no tab; the choice also
// without spaces; 1 to max_key / max_choice characters), else what is wrong with them. Shared
// with the tuning cache (tuning_cache.h), whose records have the same form.
std::string algorithm_record_fault(std::string_view key, std::string_view choice,
                                   size_t max_key = kMaxAlgorithmChoiceKey,
                                   size_t max_choice = kMaxAlgorithmChoiceValue);

// Records the choice made for `key` (replacing an earlier one). A record out of the bounds
// above is a programming error (Internal).
void record_algorithm_choice(const std::string& key, const std::string& choice);
// The choice recorded or adopted for `key`, if any.
std::optional<std::string> algorithm_choice(const std::string& key);
// Every record, for a checkpoint.
AlgorithmChoices algorithm_choices();
// Adds `choices` to the records (replacing those of the same keys): a resumed run's first act.
void adopt_algorithm_choices(const AlgorithmChoices& choices);
// Forgets every record (tests).
void clear_algorithm_choices();

// The text form: "key\tchoice\n" per record, in key order; "" for none.
std::string encode_algorithm_choices(const AlgorithmChoices& choices);
// Parses the text form, checking every bound above; InvalidInput naming `where` (the file and
// field it came from), the line and the fault otherwise.
AlgorithmChoices decode_algorithm_choices(std::string_view text, const std::string& where);

}  // namespace hg::ops

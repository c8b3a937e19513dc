#include "hourglass/ops/algorithm_choices.h"

#include <mutex>

#include "hourglass/base/error.h"
#include "hourglass/base/untrusted_text.h"

namespace hg::ops {

namespace {

std::mutex g_mutex;
AlgorithmChoices& records() {
  static auto* r = new AlgorithmChoices();  // never destroyed: libraries may record at exit
  return *r;
}

}  // namespace

std::string algorithm_record_fault(std::string_view key, std::string_view choice, size_t max_key,
                                   size_t max_choice) {
  auto printable = [](std::string_view s, bool spaces) {
    for (const char c : s)
      if (c < (spaces ? ' ' : '!') || c > '~') return false;
    return true;
  };
  if (key.empty() || key.size() > max_key)
    return fmt::format("the key has {} characters (1 to {} allowed)", key.size(), max_key);
  if (!printable(key, true)) return "the key holds a character other than printable ASCII";
  if (choice.empty() || choice.size() > max_choice)
    return fmt::format("the choice has {} characters (1 to {} allowed)", choice.size(), max_choice);
  if (!printable(choice, false))
    return "the choice holds a space or a character other than printable ASCII";
  return {};
}

void record_algorithm_choice(const std::string& key, const std::string& choice) {
  const std::string fault = algorithm_record_fault(key, choice);
  HG_ASSERT(fault.empty(), "algorithm choice '{}' -> '{}': {}", untrusted_excerpt(key),
            untrusted_excerpt(choice), fault);
  std::lock_guard<std::mutex> lock(g_mutex);
  AlgorithmChoices& r = records();
  HG_ASSERT(r.size() < kMaxAlgorithmChoices || r.count(key) > 0,
            "more than {} algorithm choices recorded", kMaxAlgorithmChoices);
  r[key] = choice;
}

std::optional<std::string> algorithm_choice(const std::string& key) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const auto it = records().find(key);
  if (it == records().end()) return std::nullopt;
  return it->second;
}

AlgorithmChoices algorithm_choices() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return records();
}

void adopt_algorithm_choices(const AlgorithmChoices& choices) {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (const auto& [key, choice] : choices) records()[key] = choice;
}

void clear_algorithm_choices() {
  std::lock_guard<std::mutex> lock(g_mutex);
  records().clear();
}

std::string encode_algorithm_choices(const AlgorithmChoices& choices) {
  std::string text;
  for (const auto& [key, choice] : choices) text += key + '\t' + choice + '\n';
  return text;
}

AlgorithmChoices decode_algorithm_choices(std::string_view text, const std::string& where) {
  AlgorithmChoices choices;
  size_t line = 0;
  while (!text.empty()) {
    ++line;
    const size_t end = text.find('\n');
    if (end == std::string_view::npos)
      throw_invalid(fmt::format("{}: line {} of the algorithm choices does not end in a newline",
                                where, line));
    const std::string_view record = text.substr(0, end);
    text.remove_prefix(end + 1);
    const size_t tab = record.find('\t');
    if (tab == std::string_view::npos)
      throw_invalid(
          fmt::format("{}: line {} of the algorithm choices, '{}', is not 'key<TAB>choice'", where,
                      line, untrusted_excerpt(record)));
    const std::string_view key = record.substr(0, tab), choice = record.substr(tab + 1);
    const std::string fault = algorithm_record_fault(key, choice);
    if (!fault.empty())
      throw_invalid(fmt::format("{}: line {} of the algorithm choices, '{}': {}", where, line,
                                untrusted_excerpt(record), fault));
    if (!choices.emplace(std::string(key), std::string(choice)).second)
      throw_invalid(fmt::format("{}: line {} of the algorithm choices repeats the key '{}'", where,
                                line, untrusted_excerpt(key)));
    if (choices.size() > kMaxAlgorithmChoices)
      throw_invalid(fmt::format("{}: more than {} algorithm choices", where, kMaxAlgorithmChoices));
  }
  return choices;
}

}  // namespace hg::ops

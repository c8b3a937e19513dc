#include "hourglass/base/config.h"

#include "hourglass/base/atomic_file.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "hourglass/base/error.h"
#include "hourglass/base/file_check.h"
#include "hourglass/base/untrusted_text.h"

namespace hg {

struct Config::Impl {
  toml::table root;
  std::string source = "<empty>";
  // Dotted key -> how the override that last wrote it (or a table above it) was given
  // ("--set k=v", or a command's own flag).
  std::map<std::string, std::string, std::less<>> overrides;
  std::vector<std::string> override_order;  // the same, for the header of to_toml()
  mutable std::set<std::string, std::less<>> used;
  // Every key a getter or has() asked for, present or not: the keys hourglass knows, among
  // which reject_unused_keys() looks for the one a misspelled key meant.
  mutable std::set<std::string, std::less<>> asked;
};

namespace {

std::vector<std::string_view> split_key(std::string_view key) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = key.find('.', start);
    parts.push_back(key.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) return parts;
    start = dot + 1;
  }
}

std::string_view type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    default: return "nothing";
  }
}

// The value as TOML on one line, shortened: for "found a string "ten"" in messages.
std::string value_text(const toml::node& n) {
  // toml++ prints strings as 'literal strings'; double quotes read more familiarly.
  if (auto str = n.as_string()) {
    // Control bytes (a newline given in --set) as \xNN, so the message stays one line.
    return "\"" + untrusted_excerpt(str->get(), 55) + "\"";
  }
  std::ostringstream os;
  n.visit([&](const auto& v) { os << v; });
  std::string s = os.str();
  for (char& c : s)
    if (c == '\n') c = ' ';
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

bool is_bare_key_part(std::string_view part) {
  if (part.empty()) return false;
  for (char c : part)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  return true;
}

// Refuses a string value holding a control character (a newline, a tab, ...): no hourglass key
// takes one, and toml++ prints a string that starts with a newline as a multi-line literal whose
// first newline TOML drops, so the resolved config.toml would read back as another value.
void check_string(const toml::node& node, const std::string& name, const std::string& source) {
  const auto* str = node.as_string();
  if (str == nullptr) return;
  for (const char c : str->get())
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      const auto line = node.source().begin.line;
      throw_invalid(fmt::format("config key '{}' in {}{} holds a string with a control "
                                "character: \"{}\"",
                                untrusted_excerpt(name), source,
                                line > 0 ? fmt::format(":{}", line) : std::string(),
                                untrusted_excerpt(str->get())),
                    "write the value on one line, without tabs or other control characters");
    }
}

// Refuses keys that are not bare names at any depth of `table` (tables inside arrays too).
// hourglass's keys are all bare; a quoted key with spaces, dots or other characters can only be
// a mistake, and toml++ would print it unquoted, so the resolved config.toml would not read back.
void check_bare_keys(const toml::table& table, const std::string& prefix,
                     const std::string& source) {
  for (const auto& [key, node] : table) {
    const std::string name =
        prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str());
    if (!is_bare_key_part(key.str())) {
      const auto line = key.source().begin.line;
      throw_invalid(
          fmt::format("config key '{}' in {}{} is not a plain name", untrusted_excerpt(name),
                      source, line > 0 ? fmt::format(":{}", line) : std::string()),
          "keys are names of letters, digits, '_' and '-', such as lr in [optim]");
    }
    check_string(node, name, source);
    if (const toml::table* sub = node.as_table()) check_bare_keys(*sub, name, source);
    if (const toml::array* arr = node.as_array())
      for (const toml::node& element : *arr) {
        if (const toml::table* sub = element.as_table())
          check_bare_keys(*sub, name, source);
        else
          check_string(element, name, source);
      }
  }
}

}  // namespace

// ---------------------------------------------------------------- lifetime

Config::Config() : impl_(std::make_unique<Impl>()) {}
Config::~Config() = default;
Config::Config(const Config& other) : impl_(std::make_unique<Impl>(*other.impl_)) {}
Config& Config::operator=(const Config& other) {
  if (this != &other) impl_ = std::make_unique<Impl>(*other.impl_);
  return *this;
}
Config::Config(Config&& other) noexcept = default;
Config& Config::operator=(Config&& other) noexcept = default;

Config Config::parse(std::string_view text, std::string source_name) {
  Config config;
  config.impl_->source = std::move(source_name);
  try {
    config.impl_->root = toml::parse(text, config.impl_->source);
  } catch (const toml::parse_error& e) {
    throw_invalid(fmt::format("cannot parse config {}:{}:{}: {}", config.impl_->source,
                              e.source().begin.line, e.source().begin.column, e.description()),
                  "fix the TOML syntax there; the format is described at https://toml.io");
  }
  check_bare_keys(config.impl_->root, "", config.impl_->source);
  return config;
}

Config Config::load(const std::string& path) {
  const std::string kind = file_kind(path);
  if (kind.empty())
    throw_invalid(fmt::format("config file {} does not exist", path),
                  "check the config path given to the command");
  // Checked before opening: reading a FIFO would wait for a writer, perhaps forever.
  if (kind != "a regular file")
    throw_invalid(fmt::format("config file {} is {}, not a regular file", path, kind),
                  "pass the path of a .toml file");
  // A config is a few KiB: anything past 16 MiB is not one (and is not read whole).
  return parse(read_file_bytes(path, size_t(16) << 20), path);
}

// ---------------------------------------------------------------- lookup

namespace {

// Where the value of `key` came from, for messages: "in run.toml:12" or "from --set k=v".
std::string origin(const Config::Impl& impl, std::string_view key, const toml::node* node) {
  // The longest overridden prefix of key wins: --set a={b=1} covers a.b.
  std::string_view prefix = key;
  while (true) {
    auto it = impl.overrides.find(prefix);
    if (it != impl.overrides.end()) return fmt::format("from {}", untrusted_excerpt(it->second));
    const size_t dot = prefix.rfind('.');
    if (dot == std::string_view::npos) break;
    prefix = prefix.substr(0, dot);
  }
  if (node && node->source().begin.line > 0)
    return fmt::format("in {}:{}", impl.source, node->source().begin.line);
  return fmt::format("in {}", impl.source);
}

// The node at dotted `key`, or null. Descending through a non-table is an error: the key
// cannot mean what the caller thinks.
const toml::node* find_node(const Config::Impl& impl, std::string_view key) {
  const toml::table* table = &impl.root;
  const auto parts = split_key(key);
  for (size_t i = 0; i < parts.size(); ++i) {
    const toml::node* n = table->get(parts[i]);
    if (!n) return nullptr;
    if (i + 1 == parts.size()) return n;
    table = n->as_table();
    if (!table) {
      const std::string_view above =
          key.substr(0, size_t(parts[i].data() + parts[i].size() - key.data()));
      throw_invalid(fmt::format("config key '{}' cannot be read: '{}' {} is {}, not a table", key,
                                above, origin(impl, above, n), type_name(*n)),
                    "rename one of the two keys");
    }
  }
  return nullptr;
}

[[noreturn]] void throw_missing(const Config::Impl& impl, std::string_view key) {
  const size_t dot = key.rfind('.');
  const std::string where = dot == std::string_view::npos
                                ? std::string("at the top of the file")
                                : fmt::format("under [{}]", key.substr(0, dot));
  throw_invalid(fmt::format("config key '{}' is missing from {}", key, impl.source),
                fmt::format("add it {} or pass --set {}=VALUE", where, key));
}

[[noreturn]] void throw_type(const Config::Impl& impl, std::string_view key, const toml::node& n,
                             std::string_view expected, std::string_view found_detail = {}) {
  throw_invalid(
      fmt::format("config key '{}' {} must be {}, found {}", key, origin(impl, key, &n), expected,
                  found_detail.empty() ? fmt::format("{} {}", type_name(n), value_text(n))
                                       : std::string(found_detail)),
      fmt::format("change the value to {}", expected));
}

// One scalar conversion per getter type; `what` names the expected type in messages.
int64_t as_int(const Config::Impl& impl, std::string_view key, const toml::node& n) {
  if (auto v = n.as_integer()) return v->get();
  if (auto f = n.as_floating_point()) {
    const bool whole = std::isfinite(f->get()) && f->get() == std::trunc(f->get());
    throw_invalid(fmt::format("config key '{}' {} must be an integer, found a float {}", key,
                              origin(impl, key, &n), value_text(n)),
                  whole ? "write it without a decimal point" : "use a whole number");
  }
  throw_type(impl, key, n, "an integer");
}

// TOML has nan and inf (and --set parses them); no setting means either, and a NaN passes
// every range check written as a comparison that fails, so they are refused here, for every key.
double as_double(const Config::Impl& impl, std::string_view key, const toml::node& n) {
  if (auto v = n.as_floating_point()) {
    if (!std::isfinite(v->get()))
      throw_invalid(fmt::format("config key '{}' {} must be a finite number, found {}", key,
                                origin(impl, key, &n), value_text(n)),
                    "write a finite number");
    return v->get();
  }
  if (auto v = n.as_integer()) return double(v->get());
  throw_type(impl, key, n, "a number");
}

std::string as_string(const Config::Impl& impl, std::string_view key, const toml::node& n) {
  if (auto v = n.as_string()) return v->get();
  throw_type(impl, key, n, "a string");
}

bool as_bool(const Config::Impl& impl, std::string_view key, const toml::node& n) {
  if (auto v = n.as_boolean()) return v->get();
  throw_type(impl, key, n, "a boolean (true or false)");
}

template <typename T, typename Convert>
std::vector<T> as_list(const Config::Impl& impl, std::string_view key, const toml::node& n,
                       std::string_view expected, Convert convert) {
  const toml::array* array = n.as_array();
  if (!array) throw_type(impl, key, n, expected);
  std::vector<T> out;
  for (size_t i = 0; i < array->size(); ++i) {
    const toml::node& element = (*array)[i];
    const std::string element_key = fmt::format("{}[{}]", key, i);
    try {
      out.push_back(convert(impl, element_key, element));
    } catch (const Error&) {
      throw_type(impl, key, n, expected,
                 fmt::format("element {} {} {}", i, type_name(element), value_text(element)));
    }
  }
  return out;
}

// The one read path of every getter: find the node, mark it used, convert; an absent key
// gives the default, or a "missing" error when there is none (require_*).
template <typename T, typename Convert>
T read_key(const Config::Impl& impl, std::string_view key, const T* default_value,
           Convert convert) {
  impl.asked.emplace(key);
  const toml::node* n = find_node(impl, key);
  if (!n) {
    if (default_value) return *default_value;
    throw_missing(impl, key);
  }
  impl.used.emplace(key);
  return convert(impl, key, *n);
}

std::vector<std::string> as_string_list(const Config::Impl& impl, std::string_view key,
                                        const toml::node& n) {
  return as_list<std::string>(impl, key, n, "an array of strings", as_string);
}
std::vector<int64_t> as_int_list(const Config::Impl& impl, std::string_view key,
                                 const toml::node& n) {
  return as_list<int64_t>(impl, key, n, "an array of integers", as_int);
}
std::vector<double> as_double_list(const Config::Impl& impl, std::string_view key,
                                   const toml::node& n) {
  return as_list<double>(impl, key, n, "an array of numbers", as_double);
}

}  // namespace

bool Config::has(std::string_view key) const {
  impl_->asked.emplace(key);
  return find_node(*impl_, key) != nullptr;
}

std::string Config::origin(std::string_view key) const {
  return hg::origin(*impl_, key, find_node(*impl_, key));
}

int64_t Config::get_int(std::string_view key, int64_t default_value) const {
  return read_key(*impl_, key, &default_value, as_int);
}
double Config::get_double(std::string_view key, double default_value) const {
  return read_key(*impl_, key, &default_value, as_double);
}
std::string Config::get_string(std::string_view key, const std::string& default_value) const {
  return read_key(*impl_, key, &default_value, as_string);
}
bool Config::get_bool(std::string_view key, bool default_value) const {
  return read_key(*impl_, key, &default_value, as_bool);
}
std::vector<std::string> Config::get_string_list(
    std::string_view key, const std::vector<std::string>& default_value) const {
  return read_key(*impl_, key, &default_value, as_string_list);
}
std::vector<int64_t> Config::get_int_list(std::string_view key,
                                          const std::vector<int64_t>& default_value) const {
  return read_key(*impl_, key, &default_value, as_int_list);
}
std::vector<double> Config::get_double_list(std::string_view key,
                                            const std::vector<double>& default_value) const {
  return read_key(*impl_, key, &default_value, as_double_list);
}

int64_t Config::require_int(std::string_view key) const {
  return read_key<int64_t>(*impl_, key, nullptr, as_int);
}
double Config::require_double(std::string_view key) const {
  return read_key<double>(*impl_, key, nullptr, as_double);
}
std::string Config::require_string(std::string_view key) const {
  return read_key<std::string>(*impl_, key, nullptr, as_string);
}
bool Config::require_bool(std::string_view key) const {
  return read_key<bool>(*impl_, key, nullptr, as_bool);
}
std::vector<std::string> Config::require_string_list(std::string_view key) const {
  return read_key<std::vector<std::string>>(*impl_, key, nullptr, as_string_list);
}
std::vector<int64_t> Config::require_int_list(std::string_view key) const {
  return read_key<std::vector<int64_t>>(*impl_, key, nullptr, as_int_list);
}
std::vector<double> Config::require_double_list(std::string_view key) const {
  return read_key<std::vector<double>>(*impl_, key, nullptr, as_double_list);
}

// ---------------------------------------------------------------- overrides

void Config::set_override(const std::string& assignment) {
  set_override(assignment, "--set " + assignment);
}

void Config::set_override(const std::string& assignment, const std::string& given_as) {
  const std::string given = untrusted_excerpt(given_as);
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos)
    throw_invalid(fmt::format("{} is not of the form key=value", given),
                  "write for example --set train.epochs=10");
  const std::string key = trim(std::string_view(assignment).substr(0, eq));
  const std::string text = trim(std::string_view(assignment).substr(eq + 1));
  const auto parts = split_key(key);
  for (std::string_view part : parts)
    if (!is_bare_key_part(part))
      throw_invalid(fmt::format("{}: '{}' is not a valid key", given, key),
                    "keys are dot-separated names of letters, digits, '_' and '-', such as "
                    "train.lr");
  if (text.empty())
    throw_invalid(fmt::format("{} has an empty value", given),
                  "write key=\"\" for an empty string");

  // Parse the value as the right-hand side of a TOML assignment.
  toml::table parsed;
  bool ok = false;
  try {
    parsed = toml::parse("v = " + text);
    ok = parsed.size() == 1;  // e.g. "1\nw = 2" would smuggle in a second key
  } catch (const toml::parse_error& e) {
    const char first = text.front();
    if (first == '"' || first == '\'' || first == '[' || first == '{')
      throw_invalid(fmt::format("{}: the value is not valid TOML: {}", given, e.description()),
                    "quote strings with \"...\" and write arrays as [1, 2]");
  }
  toml::node* value = ok ? parsed.get("v") : nullptr;
  // A bare word is a string; so is a date, which nobody means on a command line
  // (run.name=2024-05-01 would otherwise become a date and fail get_string).
  toml::value<std::string> as_text(text);
  if (!value || value->is_date() || value->is_time() || value->is_date_time()) value = &as_text;

  toml::table* table = &impl_->root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    toml::node* n = table->get(parts[i]);
    if (!n) n = &table->insert(parts[i], toml::table{}).first->second;
    table = n->as_table();
    if (!table) {
      const std::string above(
          std::string_view(key).substr(0, size_t(parts[i].data() + parts[i].size() - key.data())));
      throw_invalid(fmt::format("{}: '{}' {} is {}, not a table", given, above,
                                hg::origin(*impl_, above, n), type_name(*n)),
                    "check the key's spelling");
    }
  }
  const toml::node* existing = table->get(parts.back());
  if (existing && existing->is_table() && !value->is_table())
    throw_invalid(fmt::format("{}: '{}' is a table of settings and cannot become {}", given, key,
                              type_name(*value)),
                  fmt::format("set one of its keys instead, such as {}.NAME", key));
  value->visit([&](auto& v) { table->insert_or_assign(parts.back(), std::move(v)); });

  // Overrides below this key are superseded by it.
  std::erase_if(impl_->overrides, [&](const auto& kv) {
    return kv.first.size() > key.size() && kv.first.compare(0, key.size(), key) == 0 &&
           kv.first[key.size()] == '.';
  });
  impl_->overrides[key] = given_as;
  impl_->override_order.push_back(given_as);
}

// ---------------------------------------------------------------- output

namespace {
void collect_keys(const toml::table& table, const std::string& prefix,
                  std::vector<std::string>& out) {
  for (const auto& [k, node] : table) {
    const std::string key =
        prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (const toml::table* sub = node.as_table())
      collect_keys(*sub, key, out);
    else
      out.push_back(key);
  }
}

// toml++ prints a float with 17 significant digits, 0.05 as 0.050000000000000003. In a copy of
// the tree each finite float becomes a string, `tag` and its number in `floats`, which the
// printed text then trades for the shortest text that reads back to the same double.
void stash_floats(toml::node& node, const std::string& tag, std::vector<double>& floats) {
  const auto stash = [&](double value) {
    floats.push_back(value);
    return tag + std::to_string(floats.size() - 1);
  };
  const auto finite_float = [](const toml::node& n) {
    const toml::value<double>* f = n.as_floating_point();
    return f && std::isfinite(f->get());
  };
  if (toml::table* table = node.as_table()) {
    std::vector<std::string> keys;
    for (auto&& [key, value] : *table) {
      if (finite_float(value))
        keys.emplace_back(key.str());
      else
        stash_floats(value, tag, floats);
    }
    for (const std::string& key : keys)
      table->insert_or_assign(key, stash((*table)[key].as_floating_point()->get()));
  } else if (toml::array* array = node.as_array()) {
    for (size_t i = 0; i < array->size(); ++i) {
      toml::node& element = *array->get(i);
      if (finite_float(element))
        array->replace(array->cbegin() + ptrdiff_t(i), stash(element.as_floating_point()->get()));
      else
        stash_floats(element, tag, floats);
    }
  }
}

// The table as TOML, each float in the shortest form that reads back to the same double (fmt's
// "{}", with ".0" added where that leaves an integer): 0.05, 0.0001, 1e-05, 3.0.
std::string format_toml(const toml::table& root) {
  for (int attempt = 0;; ++attempt) {
    const std::string tag = fmt::format("hourglass-float-{}-", attempt);
    toml::table copy = root;
    std::vector<double> floats;
    stash_floats(copy, tag, floats);
    std::ostringstream os;
    os << toml::toml_formatter(copy);
    std::string text = os.str();
    // A string of the config that holds the tag: try another.
    size_t found = 0;
    for (size_t at = text.find(tag); at != std::string::npos; at = text.find(tag, at + 1)) ++found;
    if (found != floats.size()) continue;
    std::string out;
    size_t from = 0;
    for (size_t at = text.find(tag); at != std::string::npos; at = text.find(tag, from)) {
      // The placeholder, as toml++ quotes it: 'tagN' or "tagN".
      size_t end = at + tag.size();
      while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
      const size_t index = std::stoul(text.substr(at + tag.size(), end - at - tag.size()));
      std::string number = fmt::format("{}", floats.at(index));
      if (number.find_first_of(".eE") == std::string::npos) number += ".0";
      out.append(text, from, at - 1 - from);
      out += number;
      from = end + 1;
    }
    out.append(text, from, std::string::npos);
    return out;
  }
}
}  // namespace

std::string Config::to_toml() const {
  std::ostringstream os;
  os << "# resolved configuration from " << impl_->source << "\n";
  for (const std::string& a : impl_->override_order) {
    std::string line = a;
    for (char& c : line)
      if (c == '\n' || c == '\r') c = ' ';
    os << "# " << line << "\n";
  }
  os << "\n" << format_toml(impl_->root) << "\n";
  return os.str();
}

const std::string& Config::source() const { return impl_->source; }

std::vector<std::string> Config::keys() const {
  std::vector<std::string> out;
  collect_keys(impl_->root, "", out);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> Config::unused_keys() const {
  std::vector<std::string> out;
  for (std::string& k : keys())
    if (!impl_->used.count(k)) out.push_back(std::move(k));
  return out;
}

namespace {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string_view leaf(std::string_view key) {
  const size_t dot = key.rfind('.');
  return dot == std::string_view::npos ? key : key.substr(dot + 1);
}

}  // namespace

std::string Config::closest_known_key(std::string_view key) const {
  // A close spelling first (a few letters off, scaled with the key's length), else the same
  // name in another table (train.lr for optim.lr).
  std::string best;
  size_t best_distance = std::max<size_t>(2, key.size() / 4) + 1;
  for (const std::string& known : impl_->asked) {
    if (known == key) continue;
    if (const size_t d = edit_distance(key, known); d < best_distance) {
      best = known;
      best_distance = d;
    }
  }
  if (!best.empty()) return best;
  for (const std::string& known : impl_->asked)
    if (known != key && leaf(known) == leaf(key)) return known;
  return {};
}

void Config::reject_unused_keys() const {
  const std::vector<std::string> unused = unused_keys();
  if (unused.empty()) return;
  std::string message;
  for (const std::string& key : unused) {
    if (!message.empty()) message += "; ";
    message += fmt::format("unknown config key '{}' {}", key, origin(key));
    if (const std::string guess = closest_known_key(key); !guess.empty())
      message += fmt::format(" (did you mean '{}'?)", guess);
  }
  throw_invalid(message,
                "fix the key's spelling or remove it: hourglass reads no such key, so its setting "
                "would keep the default");
}

}  // namespace hg

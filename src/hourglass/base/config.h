// The run configuration: a TOML file plus command-line overrides (--set key=value).
//
// Keys are dotted paths into the TOML tables: "train.epochs" is `epochs` under `[train]`.
// Getters are strict about types (an integer key holding 3.0 is an error, because TOML
// distinguishes them and silently truncating would hide a typo), except that a float getter
// accepts an integer. Every error is InvalidInput naming the key, where its value came from
// (file and line, or the --set that gave it) and what to do.
//
// The config remembers which keys were read, so that after setup the CLI can refuse keys
// nobody used (almost always a misspelling, which would otherwise run with the default), and
// which keys were asked for, to suggest the one meant. Reading is therefore not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hg {

class Config {
 public:
  Config();  // empty, source "<empty>"
  ~Config();
  Config(const Config& other);
  Config& operator=(const Config& other);
  Config(Config&& other) noexcept;
  Config& operator=(Config&& other) noexcept;

  // Reads a TOML file; errors name the file (and line:column for a syntax error).
  static Config load(const std::string& path);
  // Parses TOML text; `source_name` stands for the file in error messages.
  static Config parse(std::string_view text, std::string source_name);

  // Whether `key` holds a value (does not count as reading it).
  bool has(std::string_view key) const;
  // Where the value of `key` came from, for messages: "in run.toml:12", "from --set k=v", or
  // "in run.toml" for an absent key.
  std::string origin(std::string_view key) const;

  // Typed reads with a default for an absent key.
  int64_t get_int(std::string_view key, int64_t default_value) const;
  double get_double(std::string_view key, double default_value) const;  // integers too
  std::string get_string(std::string_view key, const std::string& default_value) const;
  bool get_bool(std::string_view key, bool default_value) const;
  std::vector<std::string> get_string_list(std::string_view key,
                                           const std::vector<std::string>& default_value) const;
  std::vector<int64_t> get_int_list(std::string_view key,
                                    const std::vector<int64_t>& default_value) const;
  std::vector<double> get_double_list(std::string_view key,
                                      const std::vector<double>& default_value) const;

  // Typed reads of keys that must be present: a missing key is an error naming the key and
  // the file.
  int64_t require_int(std::string_view key) const;
  double require_double(std::string_view key) const;
  std::string require_string(std::string_view key) const;
  bool require_bool(std::string_view key) const;
  std::vector<std::string> require_string_list(std::string_view key) const;
  std::vector<int64_t> require_int_list(std::string_view key) const;
  std::vector<double> require_double_list(std::string_view key) const;

  // Applies "key=value" from --set. The value is parsed as a TOML value (0.1, 3, true, "x",
  // [1, 2], {a = 1}); text that is not valid TOML and does not start with a quote or bracket
  // is taken as a string (so --set data.root=/tmp/x works), as is a date. Missing tables
  // along the key are created. Replacing a table by a non-table, or descending through a
  // non-table, is an error.
  void set_override(const std::string& assignment);
  // The same for a setting a command's own flag gives: `given_as` is how the user wrote it
  // ("--precision bf16"), what messages and to_toml() name instead of "--set ...".
  void set_override(const std::string& assignment, const std::string& given_as);

  // The resolved configuration as TOML (for the run directory); parsing it back gives the
  // same values. Leading comments name the source and the overrides.
  std::string to_toml() const;
  // The file (or name given to parse) the config came from.
  const std::string& source() const;
  // Every key holding a value (tables are not keys; arrays are), sorted.
  std::vector<std::string> keys() const;
  // Keys holding a value that no getter has read yet, sorted.
  std::vector<std::string> unused_keys() const;
  // The key asked for so far (by a getter or has()) that `key` most likely misspells, or "".
  std::string closest_known_key(std::string_view key) const;
  // After every part of hourglass that reads this config has read it: an InvalidInput error
  // naming each unused key, where it came from and the closest known key ("did you mean").
  void reject_unused_keys() const;

  struct Impl;  // opaque: keeps toml++ (linked privately) out of this header

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace hg

// hourglass completion bash|zsh: a completion script written from the command line's own
// definition (the subcommands registered in main.cpp and each one's options), so it lists
// exactly the flags this build accepts. Hidden subcommands (no group) are left out.
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"

namespace hg::cli {
namespace {

// "--name" and "-n" forms of every non-positional option of `app`, --help included.
std::vector<std::string> option_words(const CLI::App& app) {
  std::vector<std::string> words;
  for (const CLI::Option* opt : app.get_options()) {
    for (const std::string& name : opt->get_lnames()) words.push_back("--" + name);
    for (const std::string& name : opt->get_snames()) words.push_back("-" + name);
  }
  return words;
}

// What both scripts offer: the visible subcommands with their flags, the app's own flags (top)
// and those of them that may follow a subcommand (global: --log-level, --color; their values
// are skipped when looking for the subcommand, and after one its own --help stands for the
// app's).
struct Words {
  std::vector<std::string> commands;
  std::vector<std::vector<std::string>> options;  // per command
  std::vector<std::string> top, global;
};

Words words_of(const CLI::App& app) {
  Words w;
  for (const CLI::App* sub :
       app.get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); })) {
    w.commands.push_back(sub->get_name());
    w.options.push_back(option_words(*sub));
  }
  w.top = option_words(app);
  for (const std::string& word : w.top)
    if (word != "--help" && word != "-h" && word != "--version") w.global.push_back(word);
  return w;
}

// One case line per subcommand: `format` with the command's name and its flags.
std::string cases_of(const Words& w, const char* format) {
  std::string cases;
  for (size_t i = 0; i < w.commands.size(); ++i)
    cases += fmt::format(fmt::runtime(format), w.commands[i], fmt::join(w.options[i], " "));
  return cases;
}

std::string bash_script(const CLI::App& app) {
  const Words w = words_of(app);
  const std::string cases = cases_of(w, "    {}) opts=\"{}\" ;;\n");
  const std::vector<std::string>&top = w.top, &global = w.global, &commands = w.commands;
  return fmt::format(
      R"(# bash completion for hourglass, written by `hourglass completion bash` (hourglass {version}).
# Install: hourglass completion bash > ~/.local/share/bash-completion/completions/hourglass
_hourglass() {{
  local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}"
  local cmd="" i skip=0
  for ((i = 1; i < COMP_CWORD; i++)); do
    if ((skip)); then skip=0; continue; fi
    case "${{COMP_WORDS[i]}}" in
      --log-level|--color) skip=1 ;;
      -*) ;;
      *) cmd="${{COMP_WORDS[i]}}"; break ;;
    esac
  done
  case "$prev" in
    --log-level) COMPREPLY=($(compgen -W "debug info warn error off" -- "$cur")); return ;;
    --color) COMPREPLY=($(compgen -W "auto always never" -- "$cur")); return ;;
  esac
  local global="{global}" opts=""
  case "$cmd" in
    "") COMPREPLY=($(compgen -W "{commands} {top}" -- "$cur")); return ;;
{cases}  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$opts $global" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))  # configs, checkpoints, run directories
  fi
}}
complete -o filenames -F _hourglass hourglass
)",
      fmt::arg("version", HOURGLASS_VERSION), fmt::arg("top", fmt::join(top, " ")),
      fmt::arg("global", fmt::join(global, " ")), fmt::arg("commands", fmt::join(commands, " ")),
      fmt::arg("cases", cases));
}

// zsh: the same words through compadd, files where no flag is being typed; installed as
// _hourglass in a folder of $fpath (Debian: /usr/share/zsh/vendor-completions).
std::string zsh_script(const CLI::App& app) {
  const Words w = words_of(app);
  const std::string cases = cases_of(w, "    {}) opts=({}) ;;\n");
  const std::vector<std::string>&top = w.top, &global = w.global, &commands = w.commands;
  return fmt::format(
      R"(#compdef hourglass
# zsh completion for hourglass, written by `hourglass completion zsh` (hourglass {version}).
# Install: hourglass completion zsh > "${{fpath[1]}}/_hourglass" (then compinit)
_hourglass() {{
  local cmd="" i skip=0
  local -a opts global
  global=({global})
  for ((i = 2; i < CURRENT; i++)); do
    if ((skip)); then skip=0; continue; fi
    case "${{words[i]}}" in
      --log-level|--color) skip=1 ;;
      -*) ;;
      *) cmd="${{words[i]}}"; break ;;
    esac
  done
  case "${{words[CURRENT-1]}}" in
    --log-level) compadd -- debug info warn error off; return ;;
    --color) compadd -- auto always never; return ;;
  esac
  if [[ -z "$cmd" ]]; then
    compadd -- {commands} {top}
    return
  fi
  case "$cmd" in
{cases}  esac
  if [[ "${{words[CURRENT]}}" == -* ]]; then
    compadd -- $opts $global
  else
    _files
  fi
}}
_hourglass "$@"
)",
      fmt::arg("version", HOURGLASS_VERSION), fmt::arg("top", fmt::join(top, " ")),
      fmt::arg("global", fmt::join(global, " ")), fmt::arg("commands", fmt::join(commands, " ")),
      fmt::arg("cases", cases));
}

}  // namespace

Runner add_completion(CLI::App& app) {
  auto shell = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand(
      "completion",
      "Print a shell completion script: `source <(hourglass completion bash)`, or save it as "
      "~/.local/share/bash-completion/completions/hourglass; for zsh, `hourglass completion zsh` "
      "saved as _hourglass in a folder of $fpath (an installed hourglass has both, in "
      "/usr/share/bash-completion/completions and /usr/share/zsh/vendor-completions)");
  sub->add_option("shell", *shell, "the shell: bash or zsh")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh"}));
  return [&app, shell] {
    const std::string script = *shell == "zsh" ? zsh_script(app) : bash_script(app);
    std::fwrite(script.data(), 1, script.size(), stdout);
    return 0;
  };
}

}  // namespace hg::cli

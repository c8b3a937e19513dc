#include "hourglass/nn/torch_layout.h"

#include <fmt/format.h>

#include <array>
#include <string_view>
#include <utility>

#include "hourglass/base/error.h"

namespace hg::nn {

namespace {

// hourglass's name part, torchvision's.
constexpr std::array<std::pair<std::string_view, std::string_view>, 4> kResNetNames = {{
    {"stem.conv.", "conv1."},
    {"stem.bn.", "bn1."},
    {".shortcut.conv.", ".downsample.0."},
    {".shortcut.bn.", ".downsample.1."},
}};

bool is_resnet(const std::string& model) {
  return model == "resnet18" || model == "resnet34" || model == "resnet50";
}

std::string replace_first(std::string name, std::string_view from, std::string_view to) {
  const size_t at =
      from.front() == '.' ? name.find(from) : (name.rfind(from, 0) == 0 ? 0 : std::string::npos);
  if (at != std::string::npos) name.replace(at, from.size(), to);
  return name;
}

std::string to_torch_name(const std::string& model, const std::string& name) {
  if (!is_resnet(model)) return name;
  std::string out = name;
  for (const auto& [ours, theirs] : kResNetNames) out = replace_first(out, ours, theirs);
  return out;
}

std::string from_torch_name(const std::string& model, const std::string& name) {
  if (!is_resnet(model)) return name;
  std::string out = name;
  for (const auto& [ours, theirs] : kResNetNames) out = replace_first(out, theirs, ours);
  return out;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

void check_torch_layout_model(const std::string& model_name) {
  HG_CHECK(is_resnet(model_name) || model_name == "mlp",
           "model '{}' has no PyTorch layout here: resnet18, resnet34, resnet50 (torchvision's "
           "names) and mlp do",
           model_name);
}

std::vector<NamedTensor> to_torch_layout(const std::string& model_name,
                                         const std::vector<NamedTensor>& state,
                                         int64_t batches_tracked) {
  check_torch_layout_model(model_name);
  std::vector<NamedTensor> out;
  for (const NamedTensor& t : state) {
    Tensor v = t.tensor.to(Device::cpu());
    if (v.dim() == 4) v = v.permute({0, 3, 1, 2}).contiguous();  // [O,KH,KW,I] -> [O,I,KH,KW]
    const std::string name = to_torch_name(model_name, t.name);
    out.push_back({name, v});
    if (ends_with(name, ".running_var")) {
      const std::string prefix =
          name.substr(0, name.size() - std::string_view("running_var").size());
      out.push_back(
          {prefix + "num_batches_tracked", Tensor::full({}, double(batches_tracked), DType::I64)});
    }
  }
  return out;
}

std::map<std::string, Tensor> from_torch_layout(const std::string& model_name,
                                                const std::vector<NamedTensor>& tensors) {
  check_torch_layout_model(model_name);
  std::map<std::string, Tensor> out;
  for (const NamedTensor& t : tensors) {
    if (ends_with(t.name, ".num_batches_tracked")) continue;
    Tensor v = t.tensor;
    if (v.dim() == 4) v = v.permute({0, 2, 3, 1}).contiguous();  // [O,I,KH,KW] -> [O,KH,KW,I]
    out.emplace(from_torch_name(model_name, t.name), v);
  }
  return out;
}

bool is_torch_layout(const std::vector<NamedTensor>& tensors) {
  for (const NamedTensor& t : tensors)
    if (t.name == "conv1.weight" || ends_with(t.name, ".num_batches_tracked")) return true;
  return false;
}

int64_t init_from_file(Module& model, const std::string& model_name, const std::string& path,
                       const std::vector<std::string>& exclude) {
  const SafetensorsFile file = load_safetensors(path);
  const bool torch = is_torch_layout(file.tensors);
  std::map<std::string, Tensor> state;
  if (torch) {
    state = from_torch_layout(model_name, file.tensors);
  } else {
    for (const NamedTensor& t : file.tensors) state.emplace(t.name, t.tensor);
  }
  auto excluded = [&](const std::string& name) {
    for (const std::string& e : exclude)
      if (name == e || name.rfind(e + ".", 0) == 0) return true;
    return false;
  };
  std::vector<std::string> missing, misshaped;
  std::vector<std::pair<Tensor, Tensor>> copies;  // (model's, file's)
  for (const auto& [name, t] : model.state_dict()) {
    if (excluded(name)) continue;
    auto it = state.find(name);
    if (it == state.end()) {
      missing.push_back(name);
    } else if (it->second.shape() != t.shape() || it->second.dtype() != t.dtype()) {
      misshaped.push_back(fmt::format("{} {} in the file, {} in the model", name,
                                      it->second.describe(), t.describe()));
    } else {
      copies.emplace_back(t, it->second);
    }
  }
  if (!missing.empty() || !misshaped.empty()) {
    auto listed = [](const std::vector<std::string>& v) {
      std::string s;
      for (size_t i = 0; i < v.size() && i < 12; ++i) s += (i ? ", " : "") + v[i];
      if (v.size() > 12) s += fmt::format(" and {} more", v.size() - 12);
      return s;
    };
    std::string what;
    if (!missing.empty()) what += fmt::format("{} missing ({})", missing.size(), listed(missing));
    if (!misshaped.empty())
      what += fmt::format("{}{} of another shape ({})", what.empty() ? "" : "; ", misshaped.size(),
                          listed(misshaped));
    throw_invalid(fmt::format("model.init_from {} ({} layout): the model's tensors {}", path,
                              torch ? "PyTorch" : "hourglass", what),
                  "initialise from weights of this model; name the tensors to keep at their own "
                  "initial values in model.init_exclude, e.g. [\"fc\"] for another number of "
                  "classes");
  }
  for (auto& [dst, src] : copies) const_cast<Tensor&>(dst).copy_(src);
  return int64_t(copies.size());
}

}  // namespace hg::nn

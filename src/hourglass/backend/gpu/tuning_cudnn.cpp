#include "hourglass/backend/gpu/tuning_cudnn.h"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <memory>
#include <mutex>

#include "hourglass/backend/gpu/libraries.h"
#include "hourglass/base/error.h"
#include "hourglass/device/device.h"
#include "hourglass/device/gpu/device_info.h"
#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu::cudnn_tuning {

namespace {

constexpr const char* kLayoutNames[2] = {"nhwc", "nchw"};

// Parses a decimal integer that fills `text` exactly.
std::optional<int64_t> parse_int(std::string_view text) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

std::string make_identity(int device) {
  gpuDeviceProp prop{};
  std::string gpu = fmt::format("gpu {}", device);
  if (gpuGetDeviceProperties(&prop, device) == gpuSuccess)
    gpu = fmt::format("{} sm_{}{} {} SMs", prop.name, prop.major, prop.minor,
                      prop.multiProcessorCount);
  (void)gpuGetLastError();
  const GpuRuntimeInfo rt = runtime_info();
  std::string text = fmt::format("{}; driver {}{}{}; CUDA runtime {}; {}; {}", gpu, rt.driver,
                                 rt.driver_release.empty() ? "" : " ", rt.driver_release,
                                 rt.runtime, dnn_library_version(), blas_library_version());
  for (char& c : text)  // the cache's identities are printable ASCII without tabs
    if (c < ' ' || c > '~') c = '?';
  return text;
}

}  // namespace

std::string encode_choice(const EngineChoice& c) {
  std::string text = fmt::format("{}:{}:", kLayoutNames[c.layout == 1 ? 1 : 0], c.engine);
  for (size_t i = 0; i < c.knobs.size(); ++i)
    text += fmt::format("{}{}={}", i > 0 ? "," : "", c.knobs[i].first, c.knobs[i].second);
  return text;
}

std::optional<EngineChoice> parse_choice(std::string_view text) {
  EngineChoice c;
  const size_t first = text.find(':');
  if (first == std::string_view::npos) return std::nullopt;
  const std::string_view layout = text.substr(0, first);
  if (layout == "nhwc")
    c.layout = 0;
  else if (layout == "nchw")
    c.layout = 1;
  else
    return std::nullopt;
  text.remove_prefix(first + 1);
  const size_t second = text.find(':');
  if (second == std::string_view::npos) return std::nullopt;
  const auto engine = parse_int(text.substr(0, second));
  if (!engine || *engine < 0) return std::nullopt;
  c.engine = *engine;
  text.remove_prefix(second + 1);
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view knob = text.substr(0, comma);
    text.remove_prefix(comma == std::string_view::npos ? text.size() : comma + 1);
    const size_t eq = knob.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    const auto type = parse_int(knob.substr(0, eq));
    const auto value = parse_int(knob.substr(eq + 1));
    if (!type || !value || *type < 0 || c.knobs.size() >= kMaxKnobs) return std::nullopt;
    c.knobs.emplace_back(*type, *value);
    if (comma != std::string_view::npos && text.empty()) return std::nullopt;  // trailing ','
  }
  return c;
}

std::string conv_key(const char* pass, const dnn::ConvGeometry& g, DType dtype, MathMode math,
                     dnn::Determinism det, int64_t alignment, bool nhwc, bool nchw) {
  const Conv2dParams& p = g.params;
  return fmt::format(
      "cudnn conv {} {} {} {} align {} layouts {} {},{},{},{} k {},{},{} stride {},{} pad {},{} "
      "dilation {},{} groups {}",
      pass, dtype_name(dtype), math == MathMode::Tf32 ? "tf32" : "exact",
      det == dnn::Determinism::Required ? "deterministic" : "any", alignment,
      nhwc && nchw ? "nhwc+nchw" : (nchw ? "nchw" : "nhwc"), g.n, g.h, g.w, g.c, g.k, g.r, g.s,
      p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.dilation_h, p.dilation_w, p.groups);
}

const std::string& identity(int device) {
  HG_ASSERT(device >= 0 && device < kMaxDevices, "gpu index {} out of range", device);
  struct Entry {
    std::once_flag once;
    std::string text;
  };
  static auto* entries = new std::array<Entry, kMaxDevices>();  // never destroyed
  Entry& e = (*entries)[size_t(device)];
  std::call_once(e.once, [&] { e.text = make_identity(device); });
  return e.text;
}

cudnnStatus_t make_engine_config(cudnnBackendDescriptor_t graph, const EngineChoice& choice,
                                 cudnnBackendDescriptor_t* engine, cudnnBackendDescriptor_t* config,
                                 std::vector<cudnnBackendDescriptor_t>* knob_choices) {
  *engine = nullptr;
  *config = nullptr;
  knob_choices->clear();
  std::vector<cudnnBackendDescriptor_t>& knobs = *knob_choices;
  auto fail = [&](cudnnStatus_t status) {
    for (cudnnBackendDescriptor_t d : knobs) (void)cudnnBackendDestroyDescriptor(d);
    if (*config != nullptr) (void)cudnnBackendDestroyDescriptor(*config);
    if (*engine != nullptr) (void)cudnnBackendDestroyDescriptor(*engine);
    *engine = *config = nullptr;
    knobs.clear();
    return status;
  };
#define HG_TUNING_TRY(call)                                                        \
  do {                                                                             \
    const cudnnStatus_t hg_tuning_status_ = (call);                                \
    if (hg_tuning_status_ != CUDNN_STATUS_SUCCESS) return fail(hg_tuning_status_); \
  } while (0)
  HG_TUNING_TRY(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, engine));
  HG_TUNING_TRY(cudnnBackendSetAttribute(*engine, CUDNN_ATTR_ENGINE_OPERATION_GRAPH,
                                         CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph));
  const int64_t index = choice.engine;
  HG_TUNING_TRY(cudnnBackendSetAttribute(*engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64,
                                         1, &index));
  HG_TUNING_TRY(cudnnBackendFinalize(*engine));
  for (const auto& [type_value, value] : choice.knobs) {
    cudnnBackendDescriptor_t knob = nullptr;
    HG_TUNING_TRY(cudnnBackendCreateDescriptor(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, &knob));
    knobs.push_back(knob);
    const auto type = cudnnBackendKnobType_t(type_value);
    HG_TUNING_TRY(cudnnBackendSetAttribute(knob, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE,
                                           CUDNN_TYPE_KNOB_TYPE, 1, &type));
    const int64_t v = value;
    HG_TUNING_TRY(
        cudnnBackendSetAttribute(knob, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &v));
    HG_TUNING_TRY(cudnnBackendFinalize(knob));
  }
  HG_TUNING_TRY(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, config));
  HG_TUNING_TRY(cudnnBackendSetAttribute(*config, CUDNN_ATTR_ENGINECFG_ENGINE,
                                         CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, engine));
  if (!knobs.empty())
    HG_TUNING_TRY(cudnnBackendSetAttribute(*config, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(knobs.size()),
                                           knobs.data()));
  HG_TUNING_TRY(cudnnBackendFinalize(*config));
#undef HG_TUNING_TRY
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace hg::gpu::cudnn_tuning

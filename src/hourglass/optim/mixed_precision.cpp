#include "hourglass/optim/mixed_precision.h"

#include "hourglass/base/untrusted_text.h"
#include "hourglass/ops/backend.h"
#include "hourglass/ops/ops.h"

namespace hg::optim {

Precision parse_precision(const std::string& text, const std::string& what) {
  if (text == "fp32") return Precision::FP32;
  if (text == "tf32") return Precision::TF32;
  if (text == "bf16") return Precision::BF16;
  if (text == "fp16") return Precision::FP16;
  throw_invalid(fmt::format("{} = \"{}\" is not a precision", what, untrusted_excerpt(text)),
                "use \"fp32\", \"tf32\", \"bf16\" or \"fp16\"");
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::FP32: return "fp32";
    case Precision::TF32: return "tf32";
    case Precision::BF16: return "bf16";
    case Precision::FP16: return "fp16";
  }
  return "?";
}

autograd::AutocastPolicy autocast_policy(Precision p) {
  switch (p) {
    case Precision::BF16: return {true, DType::BF16};
    case Precision::FP16: return {true, DType::F16};
    default: return {};
  }
}

void require_device_for(Precision p, Device device) {
  if (!device.is_cpu() || p == Precision::FP32) return;
  const std::string problem =
      p == Precision::TF32 ? std::string("tf32 is a mode of GPU tensor cores")
                           : backend_for(device).compute_dtype_problem(autocast_policy(p).compute);
  if (!problem.empty())
    throw_invalid(
        fmt::format("precision = \"{}\" on {}: {}", precision_name(p), device.str(), problem),
        p == Precision::FP16 ? "use precision = \"bf16\" or \"fp32\" on the cpu"
                             : "use precision = \"fp32\" on this cpu, or a GPU");
}

autograd::AutocastPolicy apply_precision(Precision p, Device device) {
  require_device_for(p, device);
  ops::set_allow_tf32(p == Precision::TF32);
  return autocast_policy(p);
}

LossScaler::LossScaler(Device device, LossScalerOptions options) : options_(options) {
  HG_CHECK(options.init_scale > 0 && options.growth >= 1 && options.backoff > 0 &&
               options.backoff <= 1 && options.growth_interval >= 1,
           "loss scaler: needs init_scale > 0, growth >= 1, 0 < backoff <= 1, growth_interval "
           ">= 1");
  state_ =
      Tensor::from_vector<float>({float(options.init_scale), 0.0f, 0.0f}, {ops::kLossScaleState})
          .to(device);
}

Tensor LossScaler::seed() const { return state_.narrow(0, 0, 1).view({}); }

void LossScaler::unscale(const FlatParameters& flat) {
  Tensor grads = flat.grads;
  ops::unscale_grads_(grads, state_);
}

Tensor LossScaler::found_inf() const { return state_.narrow(0, 1, 1); }

void LossScaler::update() {
  ops::update_loss_scale_(state_, options_.growth, options_.backoff, options_.growth_interval);
}

void LossScaler::load_state(const Tensor& state) {
  HG_CHECK(state.numel() == ops::kLossScaleState, "loss scaler state must have {} elements, got {}",
           ops::kLossScaleState, state.describe());
  state_.copy_(state.to(DType::F32).reshape({ops::kLossScaleState}));
}

double LossScaler::scale() const { return state_.narrow(0, 0, 1).item(); }

}  // namespace hg::optim

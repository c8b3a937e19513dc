// Synchronised batch norm (functions.h: batch_norm_synced), built from the batch-norm ops and
// two small all-reduces per layer.
//
// Forward: each rank's mean m_r and variance v_r over its n_r values per channel (the training
// op's own statistics) are combined as sums of n_r m_r, n_r (v_r + m_r^2) and n_r, in f64:
// mean = S1 / N, var = S2 / N - mean^2. The output is the evaluation op with those statistics,
// which is (x - mean) * invstd * w + b.
//
// Backward: the batch-norm backward op with the combined statistics gives this rank's
// dbias_r = sum dy and dweight_r = sum dy * xhat, and an input gradient that subtracts their
// means over this rank's values only:
//   dx_r = a (dy - dbias_r / n) - a invstd dweight_r / n (x - mean),  a = w invstd.
// The right one uses the sums over all ranks (dbias, dweight, N), so the difference,
//   a (dbias_r / n - dbias / N) + a invstd (dweight_r / n - dweight / N) (x - mean),
// is a per-channel s x + t, added by the evaluation op with mean 0, variance 1, eps 0, weight s
// and bias t.
#include <cmath>
#include <vector>

#include "hourglass/autograd/functions.h"

namespace hg::fn {

namespace {

// `values` summed over the ranks, through device memory when the communicator needs it.
void sum_over_ranks(Communicator& comm, std::vector<double>& values, Device device) {
  if (comm.takes_device_buffers()) {
    Tensor t = Tensor::from_vector(values, {int64_t(values.size())}).to(device);
    comm.all_reduce_sum(t.data_ptr(), values.size(), DType::F64);
    values = t.to(Device::cpu()).to_vector<double>();
  } else {
    comm.all_reduce_sum(values.data(), values.size(), DType::F64);
  }
}

Tensor floats_on(const std::vector<double>& values, Device device) {
  std::vector<float> f(values.begin(), values.end());
  return Tensor::from_vector(f, {int64_t(f.size())}).to(device);
}

}  // namespace

Tensor batch_norm_synced(const Tensor& x, const Tensor& weight, const Tensor& bias,
                         Tensor& running_mean, Tensor& running_var, double momentum, double eps,
                         Communicator& comm) {
  const Device device = x.device();
  const int64_t c = x.size(-1);
  const size_t cs = size_t(c);
  const double n = double(x.numel() / c);
  // This rank's statistics (the training op's; its output and running statistics are dropped).
  Tensor scratch_mean = running_mean.clone(), scratch_var = running_var.clone();
  const ops::BatchNormForward local =
      ops::batch_norm_train(x, weight, bias, scratch_mean, scratch_var, momentum, eps);
  const std::vector<float> m = local.mean.to(Device::cpu()).to_vector<float>();
  const std::vector<float> is = local.invstd.to(Device::cpu()).to_vector<float>();
  std::vector<double> sums(2 * cs + 1);
  for (size_t j = 0; j < cs; ++j) {
    const double var = 1.0 / (double(is[j]) * double(is[j])) - eps;
    sums[j] = n * double(m[j]);
    sums[cs + j] = n * (std::max(var, 0.0) + double(m[j]) * double(m[j]));
  }
  sums[2 * cs] = n;
  sum_over_ranks(comm, sums, device);
  const double total = sums[2 * cs];
  std::vector<double> mean(cs), var(cs), unbiased(cs), invstd(cs);
  for (size_t j = 0; j < cs; ++j) {
    mean[j] = sums[j] / total;
    var[j] = std::max(sums[cs + j] / total - mean[j] * mean[j], 0.0);
    unbiased[j] = total > 1 ? var[j] * total / (total - 1) : var[j];
    invstd[j] = 1.0 / std::sqrt(var[j] + eps);
  }
  const Tensor mean_t = floats_on(mean, device), var_t = floats_on(var, device),
               invstd_t = floats_on(invstd, device);
  Tensor y = ops::batch_norm_eval(x, weight, bias, mean_t, var_t, eps);
  ops::mul_scalar_(running_mean, 1 - momentum);
  ops::add_(running_mean, mean_t, momentum);
  ops::mul_scalar_(running_var, 1 - momentum);
  ops::add_(running_var, floats_on(unbiased, device), momentum);

  autograd::Tape& tape = autograd::Tape::current();
  if (tape.should_record({&x, &weight, &bias})) {
    Communicator* group = &comm;
    tape.record(
        "batch_norm_synced", {x, weight, bias}, y,
        [x, weight, mean_t, invstd_t, mean, invstd, n, total, group](const Tensor& dy) {
          ops::BatchNormGrads g = ops::batch_norm_backward(dy, x, weight, mean_t, invstd_t);
          const std::vector<float> dw = g.dweight.to(Device::cpu()).to_vector<float>();
          const std::vector<float> db = g.dbias.to(Device::cpu()).to_vector<float>();
          const std::vector<float> w = weight.to(Device::cpu()).to_vector<float>();
          const size_t channels = dw.size();
          std::vector<double> all(2 * channels);
          for (size_t j = 0; j < channels; ++j) {
            all[j] = dw[j];
            all[channels + j] = db[j];
          }
          sum_over_ranks(*group, all, x.device());
          std::vector<double> s(channels), t(channels), zero(channels, 0.0), one(channels, 1.0);
          for (size_t j = 0; j < channels; ++j) {
            const double a = double(w[j]) * invstd[j];
            s[j] = a * invstd[j] * (double(dw[j]) / n - all[j] / total);
            t[j] = a * (double(db[j]) / n - all[channels + j] / total) - s[j] * mean[j];
          }
          const Device d = x.device();
          const Tensor correction = ops::batch_norm_eval(
              x, floats_on(s, d), floats_on(t, d), floats_on(zero, d), floats_on(one, d), 0.0);
          return std::vector<Tensor>{ops::add(g.dx, correction), g.dweight, g.dbias};
        });
  }
  return y;
}

}  // namespace hg::fn

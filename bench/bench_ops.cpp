// Per-op CPU timings at CIFAR ResNet-18 shapes (batch 64): where a training step's time goes.
//   ./build/bench/bench_ops --benchmark_filter=conv
#include <benchmark/benchmark.h>

#include "hourglass/base/rng.h"
#include "hourglass/ops/ops.h"

namespace hg {
namespace {

Tensor random_tensor(const Shape& shape, uint64_t seed) {
  RandomStream rng(seed, 1);
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (auto& x : v) x = rng.normal();
  return Tensor::from_vector(v, shape);
}

// args: batch, spatial size, in channels, out channels, kernel, stride
void BM_Conv2dForwardBackward(benchmark::State& state) {
  const int64_t n = state.range(0), hw = state.range(1), c = state.range(2), k = state.range(3),
                r = state.range(4), stride = state.range(5);
  Tensor x = random_tensor({n, hw, hw, c}, 1);
  Tensor w = random_tensor({k, r, r, c}, 2);
  Conv2dParams p{stride, stride, r / 2, r / 2};
  Tensor y = ops::conv2d(x, w, Tensor(), p);
  Tensor dy = random_tensor(y.shape(), 3);
  for (auto _ : state) {
    Tensor out = ops::conv2d(x, w, Tensor(), p);
    auto g = ops::conv2d_backward(dy, x, w, false, p, InputGrad::Compute);
    benchmark::DoNotOptimize(g.dw.data_ptr());
  }
  const double flops = 2.0 * double(y.numel()) * double(r * r * c) * 3;  // fwd + 2 bwd
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Conv2dForwardBackward)
    ->Args({64, 32, 64, 64, 3, 1})
    ->Args({64, 32, 64, 128, 3, 2})
    ->Args({64, 16, 128, 128, 3, 1})
    ->Args({64, 8, 256, 256, 3, 1})
    ->Args({64, 4, 512, 512, 3, 1})
    ->Args({64, 32, 64, 128, 1, 2})
    ->Args({64, 32, 3, 64, 3, 1})
    ->Unit(benchmark::kMillisecond);

void BM_BatchNormForwardBackward(benchmark::State& state) {
  const int64_t n = state.range(0), hw = state.range(1), c = state.range(2);
  Tensor x = random_tensor({n, hw, hw, c}, 1);
  Tensor w = Tensor::full({c}, 1.0), b = Tensor::zeros({c});
  Tensor rm = Tensor::zeros({c}), rv = Tensor::full({c}, 1.0);
  Tensor dy = random_tensor(x.shape(), 2);
  for (auto _ : state) {
    auto f = ops::batch_norm_train(x, w, b, rm, rv, 0.1, 1e-5);
    auto g = ops::batch_norm_backward(dy, x, w, f.mean, f.invstd);
    benchmark::DoNotOptimize(g.dx.data_ptr());
  }
  state.counters["GB/s"] = benchmark::Counter(
      double(x.nbytes()) * 5 * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_BatchNormForwardBackward)
    ->Args({64, 32, 64})
    ->Args({64, 4, 512})
    ->Unit(benchmark::kMillisecond);

void BM_Relu(benchmark::State& state) {
  Tensor x = random_tensor({64, 32, 32, 64}, 1);
  for (auto _ : state) benchmark::DoNotOptimize(ops::relu(x).data_ptr());
  state.counters["GB/s"] = benchmark::Counter(
      double(x.nbytes()) * 2 * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Relu)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace hg

// DataLoader throughput on CIFAR-format data (50,000 32x32x3 images, crop 4 + flip, batch 512):
// the host path with 1..16 worker threads, and the dataset on the GPU (where the build has one
// and a device is visible). images/s over whole epochs; the device epochs end with a read of
// the last batch, so their queued kernels are counted.
//   ./build/bench/bench_loader [--benchmark_filter=Device]
#include <benchmark/benchmark.h>

#include <memory>

#include "hourglass/data/loader.h"
#include "hourglass/device/device.h"
#include "hourglass/ops/ops.h"

namespace hg::data {
namespace {

std::shared_ptr<const ImageDataset> cifar_shaped() {
  static const auto ds = std::make_shared<const ImageDataset>(
      make_synthetic(50000, 32, 32, 3, 10, /*seed=*/1, Split::Train));
  return ds;
}

LoaderOptions cifar_options(int workers, Device placement) {
  LoaderOptions o;
  o.batch_size = 512;
  o.seed = 1;
  o.augment = true;
  o.transform = default_transform("cifar10");
  o.workers = workers;
  o.placement = placement;
  return o;
}

void run_epochs(benchmark::State& state, DataLoader& loader) {
  int64_t epoch = 0, images = 0;
  for (auto _ : state) {
    loader.start_epoch(epoch++);
    Tensor last;
    while (auto b = loader.next()) {
      images += b->labels.size(0);
      last = b->labels;
    }
    if (last.device().is_gpu()) benchmark::DoNotOptimize(ops::sum(last).item());
  }
  state.counters["images/s"] = benchmark::Counter(double(images), benchmark::Counter::kIsRate);
}

void BM_HostLoader(benchmark::State& state) {
  DataLoader loader(cifar_shaped(), cifar_options(int(state.range(0)), Device::cpu()));
  run_epochs(state, loader);
}
BENCHMARK(BM_HostLoader)
    ->Arg(1)
    ->Arg(2)
    ->Arg(4)
    ->Arg(8)
    ->Arg(16)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_DeviceLoader(benchmark::State& state) {
  if (gpu_device_count() == 0) {
    state.SkipWithError("no GPU");
    return;
  }
  DataLoader loader(cifar_shaped(), cifar_options(0, Device::gpu(0)));
  run_epochs(state, loader);
}
BENCHMARK(BM_DeviceLoader)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace hg::data

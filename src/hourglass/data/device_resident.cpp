#include "hourglass/data/device_resident.h"

#include "hourglass/base/error.h"
#include "hourglass/data/loader.h"
#include "hourglass/ops/ops.h"

namespace hg::data {

DeviceResidentSet::DeviceResidentSet(const ImageDataset& ds, const ImageTransform& transform,
                                     Device device) {
  images_ =
      Tensor::from_vector(ds.pixels, {ds.size(), ds.height, ds.width, ds.channels}).to(device);
  labels_ = Tensor::from_vector(ds.labels, {ds.size()}).to(device);
  table_ = Tensor::from_vector(transform.table(), {ds.channels, 256}).to(device);
}

void DeviceResidentSet::start_epoch(const std::vector<int64_t>& order,
                                    const ImageTransform& transform, bool augment, bool mirror,
                                    uint64_t seed, int64_t epoch) {
  const auto n = int64_t(order.size());
  order_ = Tensor::from_vector(order, {n}).to(images_.device());
  augment_ = mirror_ = Tensor();
  if (!augment && !mirror) return;
  // Row j: ops::gather_batch's shift_y, shift_x, flip and blanked box of position j's sample.
  constexpr int64_t kRow = 7;
  std::vector<int32_t> draws(size_t(kRow * n), 0), mirrored(mirror ? draws.size() : 0, 0);
  auto put = [&](std::vector<int32_t>& rows, int64_t j, const Augmentation& a) {
    const BlankedBox box = transform.blanked_box(a);
    int32_t* r = rows.data() + kRow * j;
    r[0] = int32_t(a.shift_y);
    r[1] = int32_t(a.shift_x);
    r[2] = a.flip ? 1 : 0;
    r[3] = int32_t(box.y0);
    r[4] = int32_t(box.x0);
    r[5] = int32_t(box.y1);
    r[6] = int32_t(box.x1);
  };
  for (int64_t j = 0; j < n; ++j) {
    // As InMemorySource::write: no augmentation (Augmentation{}) unless augmenting.
    const Augmentation a = augment ? transform.draw(seed, epoch, order[size_t(j)]) : Augmentation{};
    put(draws, j, a);
    if (mirror) put(mirrored, j, transform.mirrored(a));
  }
  if (augment) augment_ = Tensor::from_vector(draws, {n, kRow}).to(images_.device());
  if (mirror) mirror_ = Tensor::from_vector(mirrored, {n, kRow}).to(images_.device());
}

Batch DeviceResidentSet::batch(int64_t epoch, int64_t index, int64_t begin, int64_t count,
                               bool mirror) const {
  HG_ASSERT(order_.defined() && begin >= 0 && count >= 0 && begin + count <= order_.size(0),
            "device batch [{}, {}) outside the epoch's {} samples", begin, begin + count,
            order_.defined() ? order_.size(0) : 0);
  const Tensor indices = order_.narrow(0, begin, count);
  const Tensor augment = augment_.defined() ? augment_.narrow(0, begin, count) : Tensor();
  ops::GatheredBatch g = ops::gather_batch(images_, labels_, indices, augment, table_);
  Batch b;
  if (mirror) {
    HG_ASSERT(mirror_.defined(), "a mirrored batch of an epoch started without mirroring");
    b.mirrored =
        ops::gather_batch(images_, labels_, indices, mirror_.narrow(0, begin, count), table_)
            .images;
  }
  b.images = std::move(g.images);
  b.labels = std::move(g.labels);
  b.epoch = epoch;
  b.index = index;
  return b;
}

}  // namespace hg::data

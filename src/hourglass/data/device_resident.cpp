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
  augment_ = mirror_ = program_ = blank_ = mirror_blank_ = Tensor();
  if (!augment && !mirror) return;
  // With a program, the crop and flip and the blanked box go to two gathers, the program
  // running between them (batch()).
  const int64_t rows = augment ? transform.program_rows() : 0;
  // Row j: ops::gather_batch's shift_y, shift_x, flip and blanked box of position j's sample.
  constexpr int64_t kRow = 7;
  std::vector<int32_t> draws(size_t(kRow * n), 0), mirrored(mirror ? draws.size() : 0, 0);
  std::vector<int32_t> blanks(rows > 0 ? draws.size() : 0, 0);
  std::vector<int32_t> mirror_blanks(rows > 0 ? mirrored.size() : 0, 0);
  std::vector<float> program(size_t(n * rows * kImageOpWidth), 0.0f);
  // Row j of `gather_rows` (and its box in row j of `blank_rows` with a program).
  auto put = [&](std::vector<int32_t>& gather_rows, std::vector<int32_t>& blank_rows, int64_t j,
                 const Augmentation& a) {
    const BlankedBox box = transform.blanked_box(a);
    int32_t* r = gather_rows.data() + kRow * j;
    r[0] = int32_t(a.shift_y);
    r[1] = int32_t(a.shift_x);
    r[2] = a.flip ? 1 : 0;
    int32_t* b = rows > 0 ? blank_rows.data() + kRow * j : r;
    b[3] = int32_t(box.y0);
    b[4] = int32_t(box.x0);
    b[5] = int32_t(box.y1);
    b[6] = int32_t(box.x1);
  };
  for (int64_t j = 0; j < n; ++j) {
    // As InMemorySource::write: no augmentation (Augmentation{}) unless augmenting.
    const Augmentation a = augment ? transform.draw(seed, epoch, order[size_t(j)]) : Augmentation{};
    put(draws, blanks, j, a);
    if (mirror) put(mirrored, mirror_blanks, j, transform.mirrored(a));
    for (int64_t k = 0; k < a.op_count; ++k)
      std::copy(a.ops[size_t(k)].begin(), a.ops[size_t(k)].end(),
                program.begin() + (j * rows + k) * kImageOpWidth);
  }
  const Device device = images_.device();
  if (augment) augment_ = Tensor::from_vector(draws, {n, kRow}).to(device);
  if (mirror) mirror_ = Tensor::from_vector(mirrored, {n, kRow}).to(device);
  if (rows > 0) {
    program_ = Tensor::from_vector(program, {n, rows, kImageOpWidth}).to(device);
    blank_ = Tensor::from_vector(blanks, {n, kRow}).to(device);
    if (mirror) mirror_blank_ = Tensor::from_vector(mirror_blanks, {n, kRow}).to(device);
  }
}

Batch DeviceResidentSet::batch(int64_t epoch, int64_t index, int64_t begin, int64_t count,
                               bool mirror) const {
  HG_ASSERT(order_.defined() && begin >= 0 && count >= 0 && begin + count <= order_.size(0),
            "device batch [{}, {}) outside the epoch's {} samples", begin, begin + count,
            order_.defined() ? order_.size(0) : 0);
  const Tensor indices = order_.narrow(0, begin, count);
  // The batch under augmentation rows `rows` (undefined: none): one gather, or with a program
  // a gather of the crops' pixels, the program, and a gather of its values and blanked boxes.
  auto gather = [&](const Tensor& rows, const Tensor& blank) {
    const Tensor part = rows.defined() ? rows.narrow(0, begin, count) : Tensor();
    if (!program_.defined()) return ops::gather_batch(images_, labels_, indices, part, table_);
    ops::GatheredBatch pixels = ops::gather_batch(images_, labels_, indices, part, Tensor());
    const Tensor augmented = ops::augment_images(pixels.images, program_.narrow(0, begin, count));
    ops::GatheredBatch g =
        ops::gather_batch(augmented, Tensor(), Tensor(), blank.narrow(0, begin, count), table_);
    g.labels = std::move(pixels.labels);
    return g;
  };
  ops::GatheredBatch g = gather(augment_, blank_);
  Batch b;
  if (mirror) {
    HG_ASSERT(mirror_.defined(), "a mirrored batch of an epoch started without mirroring");
    b.mirrored = gather(mirror_, mirror_blank_).images;
  }
  b.images = std::move(g.images);
  b.labels = std::move(g.labels);
  b.epoch = epoch;
  b.index = index;
  return b;
}

}  // namespace hg::data

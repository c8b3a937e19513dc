// The training batch's device-side ops on the GPU (gather_batch_kernels.h), each one kernel
// with no host work but the launch: gather_batch (a batch of a device-resident dataset
// gathered, augmented and normalised), augment_images (torchvision's augmentation ops on uint8
// images) and mix_batch (mixup and cutmix).
#include "hourglass/backend/gpu/augment_images_kernels.h"
#include "hourglass/backend/gpu/gather_batch_kernels.h"
#include "hourglass/backend/gpu/gpu_backend.h"
#include "hourglass/backend/gpu/host_util.h"

namespace hg {

ops::GatheredBatch GpuBackend::gather_batch(const Tensor& images, const Tensor& labels,
                                            const Tensor& indices, const Tensor& augment,
                                            const Tensor& table) {
  const int64_t batch = indices.defined() ? indices.size(0) : images.size(0);
  ops::GatheredBatch out;
  out.images = Tensor::empty({batch, images.size(1), images.size(2), images.size(3)},
                             table.defined() ? DType::F32 : DType::U8, images.device());
  if (labels.defined()) out.labels = Tensor::empty({batch}, DType::I64, images.device());
  gpu::launch_gather_batch(
      static_cast<const uint8_t*>(images.data_ptr()),
      labels.defined() ? static_cast<const uint8_t*>(labels.data_ptr()) : nullptr,
      indices.defined() ? static_cast<const int64_t*>(indices.data_ptr()) : nullptr,
      augment.defined() ? static_cast<const int32_t*>(augment.data_ptr()) : nullptr,
      table.defined() ? static_cast<const float*>(table.data_ptr()) : nullptr, images.size(0),
      images.size(1), images.size(2), images.size(3), batch, out.images.data_ptr(),
      labels.defined() ? static_cast<int64_t*>(out.labels.data_ptr()) : nullptr,
      gpu::stream_for(images));
  return out;
}

Tensor GpuBackend::augment_images(const Tensor& images, const Tensor& program) {
  Tensor out = images.clone();
  const Tensor scratch = Tensor::empty(images.shape(), DType::U8, images.device());
  gpu::launch_augment_images(static_cast<const float*>(program.data_ptr()), images.size(0),
                             program.size(1), images.size(1), images.size(2), images.size(3),
                             static_cast<uint8_t*>(out.data_ptr()),
                             static_cast<uint8_t*>(scratch.data_ptr()), gpu::stream_for(images));
  return out;
}

ops::GatheredBatch GpuBackend::mix_batch(const Tensor& images, const Tensor& labels,
                                         const Tensor& params) {
  ops::GatheredBatch out;
  out.images = Tensor::empty(images.shape(), DType::F32, images.device());
  out.labels = Tensor::empty({images.size(0)}, DType::I64, images.device());
  gpu::launch_mix_batch(
      static_cast<const float*>(images.data_ptr()), static_cast<const int64_t*>(labels.data_ptr()),
      static_cast<const float*>(params.data_ptr()), images.size(0), images.size(1), images.size(2),
      images.size(3), static_cast<float*>(out.images.data_ptr()),
      static_cast<int64_t*>(out.labels.data_ptr()), gpu::stream_for(images));
  return out;
}

}  // namespace hg

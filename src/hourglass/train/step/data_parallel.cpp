#include "hourglass/train/step/data_parallel.h"

#include "hourglass/autograd/tape.h"
#include "hourglass/device/device.h"
#include "hourglass/ops/ops.h"

namespace hg::train {

std::unique_ptr<Communicator> connect_ranks(const LaunchEnv& env, Device& device) {
  if (device.is_gpu()) {
    const int gpus = gpu_device_count();
    device = Device::gpu(gpus == 1 ? 0 : env.local_rank);
    return make_nccl_communicator(env, device.index);
  }
  std::unique_ptr<Communicator> comm = make_mpi_communicator();
  if (comm->size() != env.world_size) {
    throw_invalid(fmt::format("this process is {}, but MPI sees {} process{}: CPU ranks "
                              "communicate through MPI",
                              env.str(), comm->size(), comm->size() == 1 ? "" : "es"),
                  fmt::format("start CPU runs with mpirun -np {} hourglass ... (or srun with MPI "
                              "support), not with hourglass launch or torchrun",
                              env.world_size));
  }
  return comm;
}

DataParallel::DataParallel(Communicator& comm, Device device, int64_t bucket_bytes)
    : comm_(comm), device_(device), bucket_bytes_(bucket_bytes) {
  HG_CHECK(bucket_bytes >= 1, "data parallelism: the bucket size must be positive, got {}",
           bucket_bytes);
  if (comm.takes_device_buffers() != device.is_gpu()) {
    throw_invalid(fmt::format("data parallelism: the {} communicator reduces {} memory, and this "
                              "run trains on {}",
                              comm.backend_name(), comm.takes_device_buffers() ? "GPU" : "host",
                              device.str()),
                  device.is_gpu() ? "GPU runs reduce through NCCL (RCCL on AMD)"
                                  : "CPU runs reduce through MPI: start them with mpirun");
  }
}

void DataParallel::attach(TrainStep& step) {
  step.use_gradient_buckets(bucket_bytes_);
  step.hooks().gradients_ready = [this](GradientBucket& bucket) {
    comm_.all_reduce_sum_start(bucket.grads.data_ptr(), size_t(bucket.grads.numel()),
                               bucket.grads.dtype());
  };
  step.hooks().gradients_done = [this] { comm_.all_reduce_wait(); };
}

void DataParallel::broadcast_parameters(const FlatParameters& flat) {
  for (const Tensor* t : {&flat.params, &flat.buffers})
    if (t->defined() && t->numel() > 0) comm_.broadcast(t->data_ptr(), t->nbytes(), 0);
}

void DataParallel::sync_buffers(const Tensor& buffers) {
  if (!buffers.defined() || buffers.numel() == 0 || size() == 1) return;
  HG_CHECK(buffers.dtype() == DType::F32 && buffers.is_contiguous(),
           "data parallelism: the model's buffers must be one contiguous f32 block");
  comm_.all_reduce_sum(buffers.data_ptr(), size_t(buffers.numel()), DType::F32);
  autograd::NoGradGuard no_grad;
  Tensor b = buffers;
  ops::mul_scalar_(b, 1.0 / double(size()));
}

template <class Fn>
void DataParallel::through_buffer(std::vector<double>& values, Fn&& fn) {
  if (values.empty()) return;
  Tensor host = Tensor::from_vector<double>(values, {int64_t(values.size())});
  Tensor buffer = comm_.takes_device_buffers() ? host.to(device_) : host;
  fn(buffer.data_ptr(), values.size());
  values = buffer.to(Device::cpu()).to_vector<double>();
}

void DataParallel::sum(std::vector<double>& values) {
  through_buffer(values, [&](void* data, size_t n) { comm_.all_reduce_sum(data, n, DType::F64); });
}

void DataParallel::broadcast(std::vector<double>& values) {
  through_buffer(values,
                 [&](void* data, size_t n) { comm_.broadcast(data, n * sizeof(double), 0); });
}

std::string DataParallel::broadcast(const std::string& text) {
  std::vector<double> length{double(text.size())};
  broadcast(length);
  std::vector<double> chars(static_cast<size_t>(length[0]));
  if (rank() == 0)
    for (size_t i = 0; i < chars.size(); ++i) chars[i] = double(uint8_t(text[i]));
  broadcast(chars);
  std::string out(chars.size(), '\0');
  for (size_t i = 0; i < chars.size(); ++i) out[i] = char(uint8_t(chars[i]));
  return out;
}

}  // namespace hg::train

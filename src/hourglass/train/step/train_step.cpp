#include "hourglass/train/step/train_step.h"

#include <optional>

#include "hourglass/autograd/functions.h"
#include "hourglass/device/trace_range.h"
#include "hourglass/nn/layers.h"
#include "hourglass/ops/math_settings.h"
#include "hourglass/ops/op_profile.h"
#include "hourglass/ops/ops.h"
#include "hourglass/optim/clip.h"

namespace hg::train {

const char* step_phase_name(StepPhase phase) {
  switch (phase) {
    case StepPhase::Forward: return "forward";
    case StepPhase::Backward: return "backward";
    case StepPhase::Update: return "update";
  }
  return "?";
}

void TrainStep::phase(StepPhase p, PhaseEdge e) {
  if (e == PhaseEdge::Begin) {
    push_trace_range(step_phase_name(p));
    ops::set_profile_phase(step_phase_name(p));
  }
  if (hooks_.phase) hooks_.phase(p, e);
  if (e == PhaseEdge::End) {
    ops::set_profile_phase("");
    pop_trace_range();
  }
}

TrainStep::TrainStep(nn::Module& model, optim::Optimizer& optimizer, ExecutionContext context,
                     StepOptions options)
    : model_(model),
      optimizer_(optimizer),
      context_(context),
      options_(options),
      plan_(options.micro_batch) {
  context_.validated();
  HG_CHECK(options.clip_grad_norm >= 0, "train step: clip_grad_norm must be non-negative, got {}",
           options.clip_grad_norm);
  HG_CHECK(options.label_smoothing >= 0 && options.label_smoothing < 1,
           "train step: label_smoothing must be in [0, 1), got {}", options.label_smoothing);
  const Device device = optimizer.parameters().params.device();
  HG_CHECK(device == context_.device,
           "train step: the parameters are on {} but the execution context names {}", device.str(),
           context_.device.str());
  recovery_.allocator = &allocator_for(device);
  recovery_.zero_grad = [this] { zero_gradients(); };
  recovery_.batch_norm = has_batch_norm(model);
  if (recovery_.batch_norm) {
    // A retried step must not apply the failed attempt's running-statistics updates.
    buffers_ = std::make_unique<BufferSnapshot>(model, optimizer.parameters().buffers);
    recovery_.rollback = [this] { buffers_->restore(); };
  }
  if (context_.needs_loss_scaling()) {
    scaler_ = std::make_unique<optim::LossScaler>(device);
    optimizer_.set_skip_flag(scaler_->found_inf());
  }
  sums_.loss = Tensor::zeros({}, DType::F32, device);
  sums_.correct = Tensor::zeros({}, DType::F32, device);
  if (options.mixing.enabled()) {
    HG_CHECK(!options.loss, "train step: mixup and cutmix need the cross-entropy loss");
    mix_params_ = Tensor::empty({8}, DType::F32, device);
    mix_batch_params_ = mix_params_.narrow(0, 0, 6);
    mix_own_ = mix_params_.narrow(0, 6, 1).view({});
    mix_partner_ = mix_params_.narrow(0, 7, 1).view({});
    write_mix(-1, Tensor());  // no mixing until the first step's draw
  }
  set_recompute(options.recompute);
  const autograd::AutocastPolicy policy = context_.autocast();
  if (policy.enabled && policy.compute != DType::F32 && context_.engine.arena_weight_cast) {
    const Tensor& params = optimizer.parameters().params;
    compute_params_ = Tensor::empty(params.shape(), policy.compute, device);
    for (const nn::NamedParameter& p : model.named_parameters()) {
      if (!p.tensor.same_storage(params)) continue;  // not in the arena: cast where it is used
      const int64_t offset = p.tensor.storage_offset() - params.storage_offset();
      cast_copies_.emplace(p.tensor.impl_ptr()->id,
                           compute_params_.narrow(0, offset, p.tensor.numel()));
    }
  }
  if (options.graph == GraphMode::Auto && CapturedWork::supported(device)) {
    graph_ = std::make_unique<StepGraph>(device);
    model.for_each_module([this](nn::Module& m) {
      if (auto* d = dynamic_cast<nn::Dropout*>(&m); d != nullptr && d->p() > 0)
        graph_blocker_ = "the model has dropout (its masks are keyed by the step on the host)";
    });
  }
}

std::string TrainStep::eager_reason() const {
  if (!graph_blocker_.empty()) return graph_blocker_;
  if (buckets_ || hooks_.gradients_ready || hooks_.gradients_done)
    return "a gradient hook is installed (data-parallel reductions)";
  if (hooks_.phase) return "a phase hook is installed (per-phase timing)";
  if (hooks_.device_work) return "a device-work hook wraps the step";
  // A profiler that sees graph nodes profiles replays (step_graph.h); others need every op run.
  if (const ops::OpProfiler* p = ops::OpProfiler::current(); p != nullptr && !p->profiles_graphs())
    return "the op profiler times every op";
  std::string synced;
  model_.for_each_module([&](nn::Module& m) {
    if (auto* bn = dynamic_cast<nn::BatchNorm2d*>(&m); bn != nullptr && bn->sync != nullptr)
      synced = "batch norm is synchronised over the ranks on the host";
  });
  return synced;
}

TrainStep::~TrainStep() = default;

const StepSums& TrainStep::run(const Tensor& images, const Tensor& labels, int64_t global_rows) {
  HG_CHECK(images.defined() && labels.defined() && images.dim() >= 1 &&
               (options_.loss ? labels.dim() >= 1 : labels.dim() == 1) &&
               images.size(0) == labels.size(0),
           "train step: images {} and labels {} must hold the same number of rows",
           images.describe(), labels.describe());
  const int64_t n = labels.size(0);
  if (global_rows == 0) global_rows = n;
  HG_CHECK(global_rows > 0 && n <= global_rows && (n > 0 || buckets_),
           "train step: a batch of {} rows cannot be part of a step of {} rows", n, global_rows);
  HG_CHECK(images.device() == context_.device && labels.device() == context_.device,
           "train step: the batch must be on {} (images on {}, labels on {})",
           context_.device.str(), images.device().str(), labels.device().str());
  ExecutionScope scope(context_);
  const int64_t step = optimizer_.step_count();
  if (options_.schedule != nullptr) optimizer_.set_lr(options_.schedule->lr(step));
  if (options_.mixing.enabled()) {
    HG_CHECK(images.dim() == 4, "train step: mixup and cutmix need images [N,H,W,C], got {}",
             images.describe());
    write_mix(step, images);
  }
  auto issue = [&] {
    if (buffers_) buffers_->save();
    if (buckets_) {
      // No retry: see use_gradient_buckets.
      try {
        accumulate(images, labels, step, global_rows);
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::OutOfMemory) throw;
        throw Error(e.kind(),
                    fmt::format("{} (a data-parallel step cannot be retried with a smaller "
                                "micro-batch on one rank)",
                                e.message()),
                    "set train.micro_batch to fewer rows than this rank's part of the batch");
      }
    } else {
      accumulate_with_oom_retry(plan_, recovery_, step, n,
                                [&](int64_t) { accumulate(images, labels, step, global_rows); });
      if (hooks_.gradients_ready) {
        GradientBucket all{optimizer_.parameters().grads, 0};
        hooks_.gradients_ready(all);
      }
    }
    if (hooks_.gradients_done) hooks_.gradients_done();
    update();
  };
  StepShape shape;
  GraphAction action = GraphAction::Eager;
  if (graph_) {
    shape = {images.shape(), images.dtype(), n, global_rows, plan_.micro_batch_size()};
    action = graph_->plan(shape, eager_reason());
  }
  if (action == GraphAction::Replay) {
    TraceRange range("step (graph replay)");
    graph_->replay(images, labels);
    optimizer_.set_step_count(step + 1);  // the update ran on the device
    last_loss_ = graph_->last_loss();     // rewritten by the replay (an eager step may have
    return sums_;                         // pointed last_loss_ elsewhere)
  }
  if (action == GraphAction::Capture && capture(shape, images, labels, step, global_rows))
    return sums_;
  if (hooks_.device_work) {
    hooks_.device_work(issue);
  } else if (graph_ && graph_->wants_trace()) {
    MemoryTrace trace(context_.device);  // lays out the graph captured next (step_graph.h)
    issue();
    graph_->ran_eagerly(shape, trace.finish());
    return sums_;
  } else {
    issue();
  }
  if (graph_) graph_->ran_eagerly(shape);
  return sums_;
}

// The captured work is the eager step's without the out-of-memory retry (a graph is captured
// only after its shape ran eagerly, so its memory is known) and without the batch-norm
// snapshot that only a retry reads.
bool TrainStep::capture(const StepShape& shape, const Tensor& images, const Tensor& labels,
                        int64_t step, int64_t global_rows) {
  const Tensor last_loss = last_loss_;
  const bool captured =
      graph_->capture(shape, images, labels, [&](const Tensor& x, const Tensor& y) {
        accumulate(x, y, step, global_rows);
        update();
      });
  if (!captured) {  // nothing ran: undo the host's side of the recorded step
    autograd::Tape::current().clear();
    optimizer_.set_step_count(step);
    last_loss_ = last_loss;
    return false;
  }
  graph_->keep_last_loss(last_loss_);
  return true;
}

void TrainStep::set_recompute(const std::vector<std::string>& modules) {
  nn::set_recompute_modules(model_, modules, "train.recompute");
  recompute_.clear();
  for (const auto& [name, m] : nn::recompute_candidates(model_))
    if (m->recompute()) recompute_.push_back(name);
}

void TrainStep::use_gradient_buckets(int64_t bucket_bytes) {
  buckets_ = std::make_unique<GradientBuckets>(model_, optimizer_.parameters(), bucket_bytes);
}

// Restartable (an out-of-memory retry runs it again): the sums are per step and zeroed here,
// and the gradients were zeroed by the recovery.
void TrainStep::accumulate(const Tensor& images, const Tensor& labels, int64_t step,
                           int64_t global_rows) {
  const int64_t n = labels.size(0);
  sums_.loss.zero_();
  sums_.correct.zero_();
  // The parameters in the compute dtype for every micro-batch's forward (and recomputation).
  std::optional<autograd::AutocastGuard> with_copies;
  cast_parameters(with_copies);
  // With buckets, the last micro-batch's backward reports them as it produces them.
  const bool report = buckets_ && hooks_.gradients_ready;
  if (report) buckets_->begin(hooks_.gradients_ready);
  const auto leaf_ready = [this](const Tensor& leaf) { buckets_->leaf_ready(leaf); };
  // Mixing takes the whole batch, so the micro-batch split does not change it.
  Tensor inputs = images, partners;
  if (options_.mixing.enabled()) {
    ops::GatheredBatch mixed = ops::mix_batch(images, labels, mix_batch_params_);
    inputs = mixed.images;
    partners = mixed.labels;
  }
  const int64_t parts = n == 0 ? 0 : plan_.micro_batches(n);
  for (int64_t k = 0; k < parts; ++k) {
    const RowRange r = micro_batch_rows(n, parts, k);
    nn::set_dropout_context({context_.seed, uint64_t(step), uint64_t(r.begin)});
    auto rows = [&](const Tensor& t) {
      return parts == 1 || !t.defined() ? t : t.narrow(0, r.begin, r.size());
    };
    const Tensor x = rows(inputs), y = rows(labels);
    phase(StepPhase::Forward, PhaseEdge::Begin);
    Tensor loss;
    if (options_.loss) {
      loss = options_.loss(model_, x, y);
      autograd::NoGradGuard no_grad;
      ops::add_(sums_.loss, loss, double(r.size()));
    } else {
      Tensor logits = model_.forward(x);
      loss = cross_entropy_loss(logits, y, rows(partners));
      autograd::NoGradGuard no_grad;
      ops::add_(sums_.loss, loss, double(r.size()));
      ops::add_(sums_.correct, ops::count_correct(logits, y));
    }
    phase(StepPhase::Forward, PhaseEdge::End);
    phase(StepPhase::Backward, PhaseEdge::Begin);
    // Each micro-batch's mean loss weighted by its share of the step's rows: the accumulated
    // gradient (summed over ranks) equals the whole batch's.
    const Tensor weighted = r.size() == global_rows
                                ? loss
                                : fn::mul_scalar(loss, double(r.size()) / double(global_rows));
    autograd::backward(weighted, scaler_ ? scaler_->seed() : Tensor(),
                       report && k + 1 == parts ? autograd::LeafReadyFn(leaf_ready) : nullptr);
    phase(StepPhase::Backward, PhaseEdge::End);
    last_loss_ = loss;
  }
  if (report) buckets_->finish();
}

void TrainStep::update() {
  phase(StepPhase::Update, PhaseEdge::Begin);
  autograd::NoGradGuard no_grad;
  FlatParameters flat = optimizer_.parameters();
  if (scaler_) scaler_->unscale(flat);
  if (options_.clip_grad_norm > 0) optim::clip_grad_norm_tensor(flat, options_.clip_grad_norm);
  optimizer_.step();
  if (scaler_) scaler_->update();
  zero_gradients();
  phase(StepPhase::Update, PhaseEdge::End);
}

void TrainStep::write_mix(int64_t step, const Tensor& images) {
  mix_ = step < 0
             ? MixDraw{}
             : draw_batch_mix(options_.mixing, context_.seed, step, images.size(1), images.size(2));
  const std::vector<float> params{mix_.outside,    mix_.inside,          float(mix_.y0),
                                  float(mix_.x0),  float(mix_.y1),       float(mix_.x1),
                                  float(mix_.lam), float(1.0 - mix_.lam)};
  mix_params_.copy_(Tensor::from_vector(params, {8}));
}

Tensor TrainStep::cross_entropy_loss(const Tensor& logits, const Tensor& labels,
                                     const Tensor& partner_labels) {
  Tensor own = fn::cross_entropy(logits, labels, options_.label_smoothing);
  if (!partner_labels.defined()) return own;
  return fn::add(
      fn::mul(own, mix_own_),
      fn::mul(fn::cross_entropy(logits, partner_labels, options_.label_smoothing), mix_partner_));
}

void TrainStep::zero_gradients() {
  if (context_.engine.release_gradients)
    optimizer_.zero_grad_releasing_memory();
  else
    optimizer_.zero_grad();
}

void TrainStep::cast_parameters(std::optional<autograd::AutocastGuard>& guard) {
  if (!compute_params_.defined()) return;
  compute_params_.copy_(optimizer_.parameters().params);
  autograd::AutocastPolicy policy = autograd::autocast();
  policy.copies = &cast_copies_;
  guard.emplace(policy);
}

void TrainStep::forward_backward(const Tensor& images, const Tensor& labels) {
  ExecutionScope scope(context_);
  std::optional<autograd::AutocastGuard> with_copies;  // as the step's forward sees its weights
  cast_parameters(with_copies);
  nn::set_dropout_context({context_.seed, uint64_t(optimizer_.step_count()), 0});
  Tensor loss;
  if (options_.loss) {
    loss = options_.loss(model_, images, labels);
  } else if (options_.mixing.enabled()) {  // the last step's draw
    ops::GatheredBatch mixed = ops::mix_batch(images, labels, mix_batch_params_);
    loss = cross_entropy_loss(model_.forward(mixed.images), labels, mixed.labels);
  } else {
    loss = cross_entropy_loss(model_.forward(images), labels, Tensor());
  }
  autograd::backward(loss, scaler_ ? scaler_->seed() : Tensor());
}

}  // namespace hg::train

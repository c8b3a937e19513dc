#include "hourglass/train/step/gradient_buckets.h"

#include <algorithm>

#include "hourglass/base/error.h"

namespace hg::train {

GradientBuckets::GradientBuckets(const nn::Module& model, const FlatParameters& flat,
                                 int64_t bucket_bytes) {
  HG_CHECK(bucket_bytes >= 1, "gradient buckets: the bucket size must be at least 1 byte, got {}",
           bucket_bytes);
  HG_CHECK(flat.grads.defined() && flat.grads.dtype() == DType::F32,
           "gradient buckets: the arena's gradients must be f32");
  const int64_t base = flat.params.storage_offset();
  struct Span {
    int64_t offset, numel;
    const void* data;
  };
  std::vector<Span> spans;
  for (const nn::NamedParameter& p : model.named_parameters()) {
    const Tensor& t = p.tensor;
    HG_CHECK(t.same_storage(flat.params),
             "gradient buckets: parameter {} is not in the flat parameter arena", p.name);
    if (t.numel() == 0) continue;
    spans.push_back({t.storage_offset() - base, t.numel(), t.data_ptr()});
  }
  // From the arena's end backwards: the last parameters come first.
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.offset > b.offset; });
  const int64_t limit = std::max<int64_t>(1, bucket_bytes / int64_t(sizeof(float)));
  size_t i = 0;
  while (i < spans.size()) {
    // Parameters [i, j) form a bucket: contiguous, at most `limit` elements (or one parameter).
    int64_t begin = spans[i].offset, end = spans[i].offset + spans[i].numel;
    size_t j = i + 1;
    // The decay block and the rest (batch-norm parameters and biases of every layer, which
    // become final one layer at a time all through backward) never share a bucket.
    const bool rest = begin >= flat.decay_count;
    while (j < spans.size() && spans[j].offset + spans[j].numel == begin &&
           end - spans[j].offset <= limit && (spans[j].offset >= flat.decay_count) == rest) {
      begin = spans[j].offset;
      ++j;
    }
    const size_t k = buckets_.size();
    for (size_t m = i; m < j; ++m) bucket_of_[spans[m].data] = k;
    buckets_.push_back({flat.grads.narrow(0, begin, end - begin), begin});
    parameters_in_.push_back(int64_t(j - i));
    i = j;
  }
  waiting_ = parameters_in_;
  reported_.assign(buckets_.size(), false);
}

void GradientBuckets::begin(const std::function<void(GradientBucket&)>& ready) {
  ready_ = ready;
  waiting_ = parameters_in_;
  reported_.assign(buckets_.size(), false);
}

void GradientBuckets::complete(size_t k) {
  reported_[k] = true;
  if (ready_) ready_(buckets_[k]);
}

void GradientBuckets::leaf_ready(const Tensor& leaf) {
  auto it = bucket_of_.find(leaf.data_ptr());
  if (it == bucket_of_.end()) return;
  const size_t k = it->second;
  HG_ASSERT(waiting_[k] > 0 && !reported_[k], "gradient bucket {} completed twice", k);
  if (--waiting_[k] == 0) complete(k);
}

void GradientBuckets::finish() {
  for (size_t k = 0; k < buckets_.size(); ++k)
    if (!reported_[k]) complete(k);
  ready_ = nullptr;
}

}  // namespace hg::train

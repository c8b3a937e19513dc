#include "hourglass/data/sample_source.h"

#include "hourglass/base/error.h"

namespace hg::data {

namespace {

const std::shared_ptr<const ImageDataset>& checked(const std::shared_ptr<const ImageDataset>& ds) {
  HG_CHECK(ds != nullptr, "DataLoader: the dataset is null");
  HG_CHECK(ds->height >= 1 && ds->width >= 1 && ds->channels >= 1,
           "DataLoader: dataset '{}' has an empty image shape {}x{}x{}", ds->name, ds->height,
           ds->width, ds->channels);
  HG_CHECK(ds->pixels.size() == size_t(ds->size() * ds->image_bytes()),
           "DataLoader: dataset '{}' holds {} pixel bytes, expected {} for {} images of {}x{}x{}",
           ds->name, ds->pixels.size(), ds->size() * ds->image_bytes(), ds->size(), ds->height,
           ds->width, ds->channels);
  // Labels are checked by the readers, but a dataset built by hand is checked here once, so a
  // bad label is an input error now rather than an out-of-range class in the loss later.
  for (int64_t i = 0; i < ds->size(); ++i) {
    HG_CHECK(ds->labels[size_t(i)] < ds->num_classes,
             "DataLoader: dataset '{}': label {} at index {} is out of range for {} classes",
             ds->name, int(ds->labels[size_t(i)]), i, ds->num_classes);
  }
  return ds;
}

}  // namespace

InMemorySource::InMemorySource(std::shared_ptr<const ImageDataset> dataset)
    : dataset_(checked(dataset)) {}

template <typename T>
bool InMemorySource::write_as(int64_t index, const SampleRequest& request, T* out, T* mirrored,
                              int64_t* label) const {
  const ImageTransform& t = *request.transform;
  const Augmentation aug =
      request.augment ? t.draw(request.seed, request.epoch, index) : Augmentation{};
  t.apply(dataset_->image(index), aug, out);
  if (mirrored != nullptr) t.apply(dataset_->image(index), t.mirrored(aug), mirrored);
  *label = dataset_->labels[size_t(index)];
  return true;
}

bool InMemorySource::write(int64_t index, const SampleRequest& request, float* out, float* mirrored,
                           int64_t* label) const {
  return write_as(index, request, out, mirrored, label);
}

bool InMemorySource::write(int64_t index, const SampleRequest& request, uint8_t* out,
                           uint8_t* mirrored, int64_t* label) const {
  return write_as(index, request, out, mirrored, label);
}

}  // namespace hg::data

// A validation split held out of a training set: seeded and stratified, so that each class
// keeps its share in both parts and the same seed always holds out the same samples.
#pragma once

#include <cstdint>

#include "hourglass/data/dataset.h"

namespace hg::data {

struct HeldOut {
  ImageDataset train;       // what is left to train on, in the original order
  ImageDataset validation;  // the held-out samples, in the original order
};

// Holds out round(fraction x n_c) samples of each class c (n_c samples of it in `ds`), chosen
// by a Fisher-Yates shuffle of that class's indices keyed by (seed, class). fraction must lie
// in [0, 1); 0 holds out nothing. Both parts keep ds's shape, classes and name; their sources
// say which part of ds.source they are.
HeldOut hold_out(const ImageDataset& ds, double fraction, uint64_t seed);

}  // namespace hg::data

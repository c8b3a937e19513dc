// The model zoo and its factory: a model is named in the config ([model] name = "resnet18")
// and built for an input shape and class count.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "hourglass/nn/resnet.h"

namespace hg::nn {

struct ModelSpec {
  std::string name = "small_cnn";  // resnet18|resnet34|resnet50|small_cnn|mlp|tiny_resnet
  std::string stem = "cifar";      // resnets: cifar|imagenet
  int64_t in_channels = 1;
  int64_t height = 28, width = 28;  // input size (small_cnn and mlp flatten it)
  int64_t num_classes = 10;
  std::vector<int64_t> hidden = {512, 512};  // mlp
  double dropout = 0.0;                      // small_cnn and mlp
  double drop_path = 0.0;                    // resnets: stochastic depth (ResNetOptions)
  // resnet18/34/50: the first stage's channels (64 by default), each later stage twice the
  // one before (model.channels). 0: the model's own.
  int64_t base_channels = 0;
};

// Throws InvalidInput naming an unknown model or stem and listing the valid ones.
std::shared_ptr<Module> make_model(const ModelSpec& spec);
// Names make_model accepts.
const std::vector<std::string>& model_names();

// Fills every parameter from `seed`: convolutions Kaiming-normal (fan-out, ReLU gain) as in
// torchvision's ResNets, linear layers uniform(+-1/sqrt(fan_in)) as PyTorch's default, batch-norm
// weight 1, every bias 0.
void initialize(Module& model, uint64_t seed);

// conv3x3(C->32)-BN-ReLU-maxpool2, conv3x3(32->64)-BN-ReLU-maxpool2, flatten,
// linear(64*H/4*W/4 -> 128)-ReLU, [dropout], linear(128 -> classes).
std::shared_ptr<Module> make_small_cnn(int64_t in_channels, int64_t height, int64_t width,
                                       int64_t num_classes, double dropout = 0.0);
// flatten, then linear-ReLU for each hidden size, then linear to classes.
std::shared_ptr<Module> make_mlp(int64_t in_features, const std::vector<int64_t>& hidden,
                                 int64_t num_classes, double dropout = 0.0);

}  // namespace hg::nn

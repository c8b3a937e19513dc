// ResNets (He et al. 2016): BasicBlock (resnet18/34) and Bottleneck (resnet50, stride on the
// 3x3 conv as in torchvision), with a CIFAR stem (3x3 conv, no max-pool) or an ImageNet stem
// (7x7 stride-2 conv + 3x3 stride-2 max-pool), any number of input channels.
#pragma once

#include <vector>

#include "hourglass/nn/layers.h"

namespace hg::nn {

enum class Stem : uint8_t { Cifar, ImageNet };
enum class BlockKind : uint8_t { Basic, Bottleneck };

struct ResNetOptions {
  BlockKind block = BlockKind::Basic;
  std::vector<int> blocks_per_stage = {2, 2, 2, 2};
  std::vector<int64_t> widths = {64, 128, 256, 512};
  Stem stem = Stem::Cifar;
  int64_t in_channels = 3;
  int64_t num_classes = 10;
  // Stochastic depth (model.drop_path): block i of n (in model order) drops its residual branch
  // per sample with probability drop_path * i / (n - 1), as timm's drop_path_rate (0: none).
  double drop_path = 0.0;
};

// conv + batch-norm (+ relu), the unit every ResNet part is made of.
class ConvBn : public Module {
 public:
  ConvBn(const Conv2dOptions& conv, bool relu);
  Tensor forward(const Tensor& x) override;
  // A residual block's end with this (relu-less) unit as its shortcut:
  // relu(last_bn(last) + forward(x)), the two batch norms fused where they can be
  // (BatchNorm2d::forward_relu_pair).
  Tensor add_relu(BatchNorm2d& last_bn, const Tensor& last, const Tensor& x);

 private:
  std::shared_ptr<Conv2d> conv_;
  std::shared_ptr<BatchNorm2d> bn_;
  bool relu_;
};

// conv + batch-norm + relu, then a 3x3 stride-2 max-pool for the ImageNet stem.
class ResNetStem : public Module {
 public:
  ResNetStem(Stem kind, int64_t in_channels, int64_t width);
  Tensor forward(const Tensor& x) override;

 private:
  std::shared_ptr<Conv2d> conv_;
  std::shared_ptr<BatchNorm2d> bn_;
  std::shared_ptr<MaxPool2d> pool_;  // ImageNet stem only
};

class BasicBlock : public Module {
 public:
  static constexpr int64_t expansion = 1;
  // drop_path > 0: the residual branch goes through a DropPath (layer_id keys its draws).
  BasicBlock(int64_t in_channels, int64_t width, int64_t stride, double drop_path = 0.0,
             uint64_t layer_id = 0);
  Tensor forward(const Tensor& x) override;

 private:
  std::shared_ptr<Conv2d> conv1_, conv2_;
  std::shared_ptr<BatchNorm2d> bn1_, bn2_;
  std::shared_ptr<ConvBn> shortcut_;     // null when the identity fits
  std::shared_ptr<DropPath> drop_path_;  // null without stochastic depth
};

class Bottleneck : public Module {
 public:
  static constexpr int64_t expansion = 4;
  Bottleneck(int64_t in_channels, int64_t width, int64_t stride, double drop_path = 0.0,
             uint64_t layer_id = 0);
  Tensor forward(const Tensor& x) override;

 private:
  std::shared_ptr<Conv2d> conv1_, conv2_, conv3_;
  std::shared_ptr<BatchNorm2d> bn1_, bn2_, bn3_;
  std::shared_ptr<ConvBn> shortcut_;
  std::shared_ptr<DropPath> drop_path_;
};

// A residual block's end with stochastic depth active: relu(shortcut + drop_path(bn(last))),
// unfused (the fused batch norm adds the branch whole). `shortcut` is the block's input or its
// projection.
Tensor drop_path_add_relu(DropPath& drop_path, BatchNorm2d& bn, const Tensor& last,
                          const Tensor& shortcut);

class ResNet : public Module {
 public:
  explicit ResNet(const ResNetOptions& o);
  Tensor forward(const Tensor& x) override;

  // The parts, for tests that compare intermediate activations.
  Module& stem() { return *stem_; }
  size_t num_stages() const { return stages_.size(); }
  Module& stage(size_t i) { return *stages_.at(i); }
  Module& fc() { return *fc_; }

 private:
  std::shared_ptr<ResNetStem> stem_;
  std::vector<std::shared_ptr<Sequential>> stages_;
  std::shared_ptr<Linear> fc_;
};

}  // namespace hg::nn

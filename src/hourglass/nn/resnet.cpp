#include "hourglass/nn/resnet.h"

namespace hg::nn {

namespace {
Conv2dOptions conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  return {in, out, kernel, stride, kernel / 2, 1, 1, false};
}
}  // namespace

ConvBn::ConvBn(const Conv2dOptions& c, bool relu) : Module("ConvBn"), relu_(relu) {
  conv_ = register_module("conv", std::make_shared<Conv2d>(c));
  bn_ = register_module("bn", std::make_shared<BatchNorm2d>(c.out_channels));
}

Tensor ConvBn::forward(const Tensor& x) {
  const Tensor y = conv_->forward(x);
  return relu_ ? bn_->forward_relu(y) : bn_->forward(y);
}

Tensor ConvBn::add_relu(BatchNorm2d& last_bn, const Tensor& last, const Tensor& x) {
  HG_CHECK(!relu_, "ConvBn::add_relu: a shortcut unit has no ReLU of its own");
  return last_bn.forward_relu_pair(last, *bn_, conv_->forward(x));
}

ResNetStem::ResNetStem(Stem kind, int64_t in, int64_t width) : Module("ResNetStem") {
  conv_ = register_module("conv",
                          std::make_shared<Conv2d>(kind == Stem::Cifar ? conv(in, width, 3, 1)
                                                                       : conv(in, width, 7, 2)));
  bn_ = register_module("bn", std::make_shared<BatchNorm2d>(width));
  if (kind == Stem::ImageNet) pool_ = register_module("pool", std::make_shared<MaxPool2d>(3, 2, 1));
}

Tensor ResNetStem::forward(const Tensor& x) {
  const Tensor y = bn_->forward_relu(conv_->forward(x));
  return pool_ ? pool_->forward(y) : y;
}

BasicBlock::BasicBlock(int64_t in, int64_t width, int64_t stride, double drop_path,
                       uint64_t layer_id)
    : Module("BasicBlock") {
  conv1_ = register_module("conv1", std::make_shared<Conv2d>(conv(in, width, 3, stride)));
  bn1_ = register_module("bn1", std::make_shared<BatchNorm2d>(width));
  conv2_ = register_module("conv2", std::make_shared<Conv2d>(conv(width, width, 3, 1)));
  bn2_ = register_module("bn2", std::make_shared<BatchNorm2d>(width));
  if (stride != 1 || in != width)
    shortcut_ =
        register_module("shortcut", std::make_shared<ConvBn>(conv(in, width, 1, stride), false));
  if (drop_path > 0)
    drop_path_ = register_module("drop_path", std::make_shared<DropPath>(drop_path, layer_id));
}

Tensor drop_path_add_relu(DropPath& drop_path, BatchNorm2d& bn, const Tensor& last,
                          const Tensor& shortcut) {
  return fn::relu(fn::add(shortcut, drop_path.forward(bn.forward(last))));
}

// The block's batch norms with their ReLU (and the last one with the residual add) go through
// BatchNorm2d::forward_relu: one fused op in training. The last batch norm adds the shortcut:
// the block's input, or a convolution and batch norm of it (ConvBn::add_relu: both batch norms
// one fused op).
Tensor BasicBlock::forward(const Tensor& x) {
  Tensor out = bn1_->forward_relu(conv1_->forward(x));
  out = conv2_->forward(out);
  if (drop_path_ && drop_path_->active())
    return drop_path_add_relu(*drop_path_, *bn2_, out, shortcut_ ? shortcut_->forward(x) : x);
  return shortcut_ ? shortcut_->add_relu(*bn2_, out, x) : bn2_->forward_relu(out, x);
}

Bottleneck::Bottleneck(int64_t in, int64_t width, int64_t stride, double drop_path,
                       uint64_t layer_id)
    : Module("Bottleneck") {
  const int64_t out = width * expansion;
  conv1_ = register_module("conv1", std::make_shared<Conv2d>(conv(in, width, 1, 1)));
  bn1_ = register_module("bn1", std::make_shared<BatchNorm2d>(width));
  conv2_ = register_module("conv2", std::make_shared<Conv2d>(conv(width, width, 3, stride)));
  bn2_ = register_module("bn2", std::make_shared<BatchNorm2d>(width));
  conv3_ = register_module("conv3", std::make_shared<Conv2d>(conv(width, out, 1, 1)));
  bn3_ = register_module("bn3", std::make_shared<BatchNorm2d>(out));
  if (stride != 1 || in != out)
    shortcut_ =
        register_module("shortcut", std::make_shared<ConvBn>(conv(in, out, 1, stride), false));
  if (drop_path > 0)
    drop_path_ = register_module("drop_path", std::make_shared<DropPath>(drop_path, layer_id));
}

Tensor Bottleneck::forward(const Tensor& x) {
  Tensor out = bn1_->forward_relu(conv1_->forward(x));
  out = bn2_->forward_relu(conv2_->forward(out));
  out = conv3_->forward(out);
  if (drop_path_ && drop_path_->active())
    return drop_path_add_relu(*drop_path_, *bn3_, out, shortcut_ ? shortcut_->forward(x) : x);
  return shortcut_ ? shortcut_->add_relu(*bn3_, out, x) : bn3_->forward_relu(out, x);
}

ResNet::ResNet(const ResNetOptions& o) : Module("ResNet") {
  HG_CHECK(!o.widths.empty() && o.widths.size() == o.blocks_per_stage.size(),
           "ResNet: {} widths for {} stages", o.widths.size(), o.blocks_per_stage.size());
  HG_CHECK(o.in_channels > 0 && o.num_classes > 0,
           "ResNet: in_channels and num_classes must be positive");
  const int64_t stem_width = o.widths[0];
  stem_ = register_module("stem", std::make_shared<ResNetStem>(o.stem, o.in_channels, stem_width));
  HG_CHECK(o.drop_path >= 0 && o.drop_path < 1, "ResNet: drop_path must be in [0, 1), got {}",
           o.drop_path);
  int64_t in = stem_width;
  int blocks = 0, block = 0;
  for (int n : o.blocks_per_stage) blocks += n;
  for (size_t s = 0; s < o.widths.size(); ++s) {
    auto stage = std::make_shared<Sequential>();
    for (int b = 0; b < o.blocks_per_stage[s]; ++b, ++block) {
      const int64_t stride = (s > 0 && b == 0) ? 2 : 1;
      // timm's linear rule: 0 for the first block, drop_path for the last.
      const double p = blocks > 1 ? o.drop_path * double(block) / double(blocks - 1) : 0.0;
      const auto layer_id = uint64_t(block);
      if (o.block == BlockKind::Basic) {
        stage->add(std::make_shared<BasicBlock>(in, o.widths[s], stride, p, layer_id));
        in = o.widths[s] * BasicBlock::expansion;
      } else {
        stage->add(std::make_shared<Bottleneck>(in, o.widths[s], stride, p, layer_id));
        in = o.widths[s] * Bottleneck::expansion;
      }
    }
    stages_.push_back(register_module("layer" + std::to_string(s + 1), stage));
  }
  fc_ = register_module("fc", std::make_shared<Linear>(in, o.num_classes));
}

Tensor ResNet::forward(const Tensor& x) {
  Tensor y = stem_->forward(x);
  for (auto& stage : stages_) y = stage->forward(y);
  return fc_->forward(fn::global_avg_pool(y));
}

}  // namespace hg::nn

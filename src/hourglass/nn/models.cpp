#include "hourglass/nn/models.h"

#include <cmath>

#include "hourglass/base/untrusted_text.h"
#include "hourglass/nn/init.h"

namespace hg::nn {

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = {"resnet18",  "resnet34", "resnet50",
                                                 "small_cnn", "mlp",      "tiny_resnet"};
  return names;
}

static std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

std::shared_ptr<Module> make_small_cnn(int64_t in_channels, int64_t height, int64_t width,
                                       int64_t num_classes, double dropout) {
  HG_CHECK(height >= 4 && width >= 4, "small_cnn needs inputs of at least 4x4, got {}x{}", height,
           width);
  auto net = std::make_shared<Sequential>();
  net->add(std::make_shared<Conv2d>(Conv2dOptions{in_channels, 32, 3, 1, 1}));
  net->add(std::make_shared<BatchNorm2d>(32));
  net->add(std::make_shared<ReLU>());
  net->add(std::make_shared<MaxPool2d>(2, 2));
  net->add(std::make_shared<Conv2d>(Conv2dOptions{32, 64, 3, 1, 1}));
  net->add(std::make_shared<BatchNorm2d>(64));
  net->add(std::make_shared<ReLU>());
  net->add(std::make_shared<MaxPool2d>(2, 2));
  net->add(std::make_shared<Flatten>());
  net->add(std::make_shared<Linear>(64 * (height / 4) * (width / 4), 128));
  net->add(std::make_shared<ReLU>());
  if (dropout > 0) net->add(std::make_shared<Dropout>(dropout, net->size()));
  net->add(std::make_shared<Linear>(128, num_classes));
  return net;
}

std::shared_ptr<Module> make_mlp(int64_t in_features, const std::vector<int64_t>& hidden,
                                 int64_t num_classes, double dropout) {
  auto net = std::make_shared<Sequential>();
  net->add(std::make_shared<Flatten>());
  int64_t in = in_features;
  for (int64_t h : hidden) {
    net->add(std::make_shared<Linear>(in, h));
    net->add(std::make_shared<ReLU>());
    if (dropout > 0) net->add(std::make_shared<Dropout>(dropout, net->size()));
    in = h;
  }
  net->add(std::make_shared<Linear>(in, num_classes));
  return net;
}

std::shared_ptr<Module> make_model(const ModelSpec& spec) {
  HG_CHECK(spec.in_channels > 0 && spec.num_classes > 1,
           "model: in_channels ({}) must be positive and num_classes ({}) at least 2",
           spec.in_channels, spec.num_classes);
  Stem stem = Stem::Cifar;
  if (spec.stem == "imagenet")
    stem = Stem::ImageNet;
  else if (spec.stem != "cifar")
    throw_invalid(fmt::format("model.stem: unknown stem '{}'", untrusted_excerpt(spec.stem)),
                  "use \"cifar\" (3x3 conv, no max-pool) or \"imagenet\" (7x7/2 conv + max-pool)");
  ResNetOptions r;
  r.stem = stem;
  r.in_channels = spec.in_channels;
  r.num_classes = spec.num_classes;
  HG_CHECK(spec.drop_path == 0 || spec.name.find("resnet") != std::string::npos,
           "model.drop_path applies to the resnets, not {}", spec.name);
  r.drop_path = spec.drop_path;
  const int64_t base = spec.base_channels;
  HG_CHECK(base == 0 || spec.name.starts_with("resnet"),
           "model.channels applies to resnet18, resnet34 and resnet50, not {}", spec.name);
  HG_CHECK(base >= 0 && base <= 4096, "model.channels must be in [1, 4096], got {}", base);
  if (base > 0) r.widths = {base, 2 * base, 4 * base, 8 * base};
  if (spec.name == "resnet18") {
    r.blocks_per_stage = {2, 2, 2, 2};
    return std::make_shared<ResNet>(r);
  }
  if (spec.name == "resnet34") {
    r.blocks_per_stage = {3, 4, 6, 3};
    return std::make_shared<ResNet>(r);
  }
  if (spec.name == "resnet50") {
    r.block = BlockKind::Bottleneck;
    r.blocks_per_stage = {3, 4, 6, 3};
    return std::make_shared<ResNet>(r);
  }
  if (spec.name == "tiny_resnet") {
    r.blocks_per_stage = {1, 1};
    r.widths = {8, 16};
    return std::make_shared<ResNet>(r);
  }
  if (spec.name == "small_cnn")
    return make_small_cnn(spec.in_channels, spec.height, spec.width, spec.num_classes,
                          spec.dropout);
  if (spec.name == "mlp")
    return make_mlp(spec.in_channels * spec.height * spec.width, spec.hidden, spec.num_classes,
                    spec.dropout);
  throw_invalid(fmt::format("model.name: unknown model '{}'", untrusted_excerpt(spec.name)),
                "use one of " + joined(model_names()));
}

void initialize(Module& model, uint64_t seed) {
  uint64_t index = 0;
  const double relu_gain = std::sqrt(2.0);
  for (auto& p : model.named_parameters()) {
    RandomStream rng(seed, mix_stream(index++, 0x1417));
    Tensor& t = p.tensor;
    const bool is_bias = p.name.ends_with("bias");
    if (t.dim() == 4) {
      // KRSC: fan-out = K * R * S.
      kaiming_normal_(t, t.size(0) * t.size(1) * t.size(2), relu_gain, rng);
    } else if (t.dim() == 2) {
      uniform_(t, 1.0 / std::sqrt(double(t.size(1))), rng);
    } else {
      // Biases start at zero; batch-norm weights at one.
      t.fill_(is_bias ? 0.0 : 1.0);
    }
  }
  for (auto& [name, t] : model.named_buffers()) {
    const_cast<Tensor&>(t).fill_(name.ends_with("running_var") ? 1.0 : 0.0);
  }
}

}  // namespace hg::nn

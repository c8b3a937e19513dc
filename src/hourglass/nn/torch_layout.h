// A model's tensors in PyTorch's layout and under torchvision's names, and back: what
// `hourglass export --format torch` writes and what `model.init_from` reads.
//
// Layout: hourglass keeps convolution weights as [out, kh, kw, in] (NHWC convolutions);
// PyTorch's are [out, in, kh, kw]. Linear weights ([out, in]), biases and batch-norm vectors are
// the same in both.
//
// Names: the ResNets (resnet18/34/50) take torchvision's: the stem's convolution and batch norm
// are "conv1" and "bn1" ("stem.conv" and "stem.bn" in hourglass), a downsampling block's
// shortcut is "downsample.0" and "downsample.1" ("shortcut.conv", "shortcut.bn"), everything
// else ("layerN.M.convK", "layerN.M.bnK", "fc") is named alike; every batch norm also gets
// torchvision's "num_batches_tracked" (i64, no dimensions). With model.stem = "imagenet" the
// tensors are torchvision's resnet18/34/50 exactly (its load_state_dict takes them); with the
// CIFAR stem "conv1.weight" is 3x3 and there is no max-pool, the usual CIFAR variant. The MLP
// keeps hourglass's names. The small CNN and the tiny ResNet have no PyTorch counterpart here
// (the small CNN flattens channels-last feature maps, whose order a PyTorch linear layer reads
// differently) and are refused.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "hourglass/nn/module.h"
#include "hourglass/tensor/safetensors.h"
#include "hourglass/tensor/tensor.h"

namespace hg::nn {

// Whether `model_name` (model.name) has a PyTorch layout; the error names the ones that do.
void check_torch_layout_model(const std::string& model_name);

// `state` (a model's state dict: parameters and buffers, hourglass's names) in PyTorch's layout,
// in `state`'s order, each batch norm's num_batches_tracked set to `batches_tracked`.
std::vector<NamedTensor> to_torch_layout(const std::string& model_name,
                                         const std::vector<NamedTensor>& state,
                                         int64_t batches_tracked);

// Tensors in PyTorch's layout (a file of to_torch_layout's, or torchvision's weights) under
// hourglass's names and in its layout; num_batches_tracked left out.
std::map<std::string, Tensor> from_torch_layout(const std::string& model_name,
                                                const std::vector<NamedTensor>& tensors);

// Whether `tensors` are in PyTorch's layout: they hold torchvision's stem ("conv1.weight") or a
// num_batches_tracked, which hourglass's own files never do.
bool is_torch_layout(const std::vector<NamedTensor>& tensors);

}  // namespace hg::nn

namespace hg::nn {

// Copies the tensors of the safetensors file `path` into `model` (model.init_from): an hourglass
// file (final.safetensors or a checkpoint of the same model) or one in PyTorch's layout
// (torchvision's ResNet weights converted to safetensors, or `hourglass export --format torch`'s),
// recognised by is_torch_layout. Every parameter and buffer of the model whose name starts with
// none of `exclude` (e.g. {"fc"} for a classifier of another number of classes) must be in the
// file with the model's shape; the file's other tensors are left unused. Throws InvalidInput
// naming the file and every missing or mis-shaped tensor (nothing is copied then). Returns how
// many tensors were copied.
int64_t init_from_file(Module& model, const std::string& model_name, const std::string& path,
                       const std::vector<std::string>& exclude);

}  // namespace hg::nn

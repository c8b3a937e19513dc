// Uses the installed library end to end: a tensor, an op through the CPU backend, a layer with
// autograd, and a config parsed from text. Prints what it computed.
#include <cstdio>

#include "hourglass/autograd/functions.h"
#include "hourglass/base/config.h"
#include "hourglass/ops/ops.h"

int main() {
  using namespace hg;
  const Tensor a = Tensor::from_vector<float>({1, 2, 3}, {3});
  const Tensor b = ops::add(a, a);
  Tensor x = Tensor::from_vector<float>({-1, 2, -3, 4}, {4});
  x.set_requires_grad(true);
  Tensor loss = fn::sum(fn::relu(x));
  autograd::backward(loss);
  const Config config = Config::parse("[train]\nepochs = 3\n", "consumer.toml");
  std::printf("add %g %g %g; relu sum %g, grad %g %g %g %g; epochs %lld\n", b.to_vector<float>()[0],
              b.to_vector<float>()[1], b.to_vector<float>()[2], loss.item(),
              x.grad().to_vector<float>()[0], x.grad().to_vector<float>()[1],
              x.grad().to_vector<float>()[2], x.grad().to_vector<float>()[3],
              static_cast<long long>(config.get_int("train.epochs", 0)));
  return 0;
}

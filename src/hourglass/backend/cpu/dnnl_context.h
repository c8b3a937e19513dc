// The oneDNN engine and stream of the CPU backend, tensor wrapping, and a cache of primitives
// keyed by their shapes (creating a oneDNN primitive costs far more than running a small one).
#pragma once

#include <dnnl.hpp>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "hourglass/tensor/tensor.h"

namespace hg::cpu {

dnnl::engine& engine();
dnnl::stream& stream();

// A oneDNN memory object over a CPU tensor's data (no copy).
dnnl::memory wrap(const Tensor& t, const dnnl::memory::desc& md);

dnnl::memory::dims dims(std::initializer_list<int64_t> values);

// Process-wide cache from a string key to any object (primitives, primitive descriptors,
// reordered weights). make() runs once per key.
class PrimitiveCache {
 public:
  static PrimitiveCache& instance();

  template <typename T>
  T& get(const std::string& key, const std::function<T()>& make) {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(key);
    if (it == entries_.end())
      it = entries_
               .emplace(key, std::shared_ptr<void>(new T(make()),
                                                   [](void* p) { delete static_cast<T*>(p); }))
               .first;
    return *static_cast<T*>(it->second.get());
  }
  void clear();
  size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<void>> entries_;
};

}  // namespace hg::cpu

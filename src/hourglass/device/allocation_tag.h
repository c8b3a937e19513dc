// What the calling thread's device memory requests are for: a name (an op's, set around every
// op call by ops::OpScope) that an allocation trace records with each request, so that a memory
// report can say which op holds what at a peak. A thread-local pointer: setting it costs a
// store, and nothing reads it unless a trace is recording.
#pragma once

namespace hg {

namespace detail {
inline thread_local const char* t_allocation_tag = "";
}

// The calling thread's tag ("" outside every op).
inline const char* allocation_tag() { return detail::t_allocation_tag; }

// Sets the thread's tag for the scope's lifetime (`tag` lives for the program: a literal).
class AllocationTagScope {
 public:
  explicit AllocationTagScope(const char* tag) : was_(detail::t_allocation_tag) {
    detail::t_allocation_tag = tag;
  }
  ~AllocationTagScope() { detail::t_allocation_tag = was_; }
  AllocationTagScope(const AllocationTagScope&) = delete;
  AllocationTagScope& operator=(const AllocationTagScope&) = delete;

 private:
  const char* was_;
};

}  // namespace hg

// A stand-in for libMIOpen and the GPU runtime calls of backend/gpu/dnn_miopen.cpp, so that
// file (compiled against ROCm 6.2's real miopen.h) runs on a machine without an AMD GPU and a
// test can see which MIOpen calls it makes: above all, whether it times anything (Find). The
// convolutions compute nothing; launches only record the algorithm or solution they were given.
#pragma once

#include <miopen/miopen.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace hg::test::fake_miopen {

enum Pass { kForward = 0, kBackwardData = 1, kBackwardFilter = 2 };

struct State {
  // What Get*Solution lists per pass, in the order given (MIOpen's: expected time).
  std::vector<miopenConvSolution_t> solutions[3];
  std::map<std::string, int> calls;   // function name (without "miopen") -> times called
  std::vector<uint64_t> compiled[3];  // solution ids given to *CompileSolution
  std::vector<uint64_t> launched[3];  // solution ids given to *Immediate
  int deterministic_attribute = 0;    // the last MIOPEN_CONVOLUTION_ATTRIB_DETERMINISTIC set
};

// The fake's state (reset() empties it).
State& state();
void reset();
// Calls of the Find functions: the ones that time algorithms.
int timing_calls();

}  // namespace hg::test::fake_miopen

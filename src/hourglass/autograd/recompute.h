// Activation recomputation (gradient checkpointing) of one block of a network.
//
// fn::recompute runs a block's forward pass without recording (so none of its intermediate
// values is kept alive by the tape) and records ONE node that keeps only the block's input.
// That node's backward runs the block's forward again, recording on a nested tape of its own
// with autograd::recomputing() true, then backpropagates the incoming gradient through it:
// the block's parameter gradients accumulate into their leaves as in a plain backward (the
// arena's gradient views), and the input's gradient is handed to the outer tape. The block's
// activations therefore live only while its own backward runs, at the price of a second
// forward pass.
//
// The results are those of the plain pass bit for bit when the forward pass is deterministic:
// the autocast policy in force when the block ran is put back for the second pass, batch norm
// computes the same batch statistics but leaves its running statistics alone while
// recomputing (they were updated once, by the first pass), and dropout masks are keyed by
// (seed, step, layer, row), which the second pass repeats.
//
// The block's parameters are inputs of the recorded node, so a leaf-ready callback
// (tape.h: LeafReadyFn, data-parallel buckets) reports them when the node has run, which is
// when their gradients are final. A block whose forward has side effects other than batch
// norm's running statistics (a random draw outside dropout's keyed masks, a collective
// operation that must run once) must not be recomputed; batch norm synchronised over ranks is
// recomputed with a second pair of all-reduces, which every rank issues alike.
#pragma once

#include <functional>
#include <vector>

#include "hourglass/autograd/tape.h"

namespace hg::fn {

using BlockForward = std::function<Tensor(const Tensor& x)>;

// forward(x) with its activations recomputed during backward. `parameters` are the leaves
// forward uses (the block's parameters). Without recording (grad mode off, or neither x nor a
// parameter requires a gradient) it is forward(x).
Tensor recompute(const BlockForward& forward, const Tensor& x,
                 const std::vector<Tensor>& parameters);

}  // namespace hg::fn

// Gradients of custom ops by symbolic differentiation of the compute.
//
// The gradient op of input x ("<Op>Grad<k>" for input k) takes the forward
// op's inputs, then the incoming gradient of each output ("d<output>"), and
// computes "dx", shaped and typed like x. For an output y[I] = E and each
// place x[J] is read (J distinct index variables),
//
//   dx[J] += sum over the variables of I and of the sums around x[J] that are
//            not in J of  dy[I] * dE/dx[J]
//
// where dE/dx[J] is the product of the local derivatives on the path from
// the root of E to that read (reverse mode over the expression tree); a sum
// on the path passes the gradient through. max/min reductions and repeated
// indices (x[i, i]) are not derived: such an input needs a declared
// <gradient input="x">dx[...] = ...</gradient>.
#pragma once

#include <string>

#include "ops/custom/ast.h"
#include "support/error.h"

namespace kiln::ops::custom {

std::string gradientOpName(const std::string &op, int input);
// "d<output>": the name the gradient op gives the incoming gradient of output k.
std::string outputGradientName(const Program &forward, int output);

// The gradient op's program without its statement: inputs, ranks, its output
// "d<input>" and the forward attributes. Errors when a gradient input's name
// ("dy") is taken by an input of the forward op.
Expected<Program> gradientProgram(const Program &forward, int input);

// The derived statement of `gradientProgram(forward, input)`; an error says
// why the gradient cannot be derived, pointing at the offending place.
Expected<Statement> deriveGradient(const Program &forward, int input);

// The kind a derived op's statement has: elementwise when every input is
// read at the output's indices, broadcast when at a subsequence of them,
// reduce with a reduction, injective otherwise.
std::string_view statementKind(const Statement &stmt);

} // namespace kiln::ops::custom

// Loading an artifact to run it: checking that this process may (the same
// kiln, code-generation sources, LLVM and host CPU as the compile), then
// rebuilding a bucket's kernels from its graph with this kiln and proving
// their keys equal the stored ones. Nothing is compiled: the objects come
// from the file.
#pragma once

#include <cstdint>
#include <string>

#include "compiler/artifact/artifact.h"
#include "compiler/codegen/kernel_compiler.h"
#include "ir/graph.h"
#include "support/error.h"

namespace kiln::artifact {

// "kiln compile <model> [--training] --batch B --seq 8,16 <job flags> -o <file>".
std::string recompileHint(const Artifact &artifact);

// Ok when this process may run `artifact`; otherwise says what differs
// (kiln version, LLVM version, host CPU and its features, kiln's
// code-generation sources) and how to recompile.
Status checkCompatible(const Artifact &artifact);

// Ok when this user trusts the key that signed `artifact` (its own key, or
// one in trusted_keys: artifact_signing.h), or when `trust_anyway`
// (--trust-artifact). The error says who signed it, what is trusted and how
// to trust the key.
Status checkTrustedSigner(const Artifact &artifact, bool trust_anyway);

// The bucket compiled for `seq`, or an error listing the seqs there are.
Expected<const Bucket *> selectBucket(const Artifact &artifact, int64_t seq);

struct LoadedBucket {
  Graph graph;
  codegen::CompiledKernels kernels; // for runtime::Executor, objects of this bucket only
};

// checkCompatible, then the bucket's kernels re-derived from its graph; a
// kernel whose recomputed key is not the stored one (naming the key part that
// differs) refuses the load.
Expected<LoadedBucket> loadBucket(const Artifact &artifact, const Bucket &bucket);

} // namespace kiln::artifact

// The whole-program cache of `kiln compile`, in the spirit of Inductor's
// FxGraphCache: one entry per model request holds the compiled program
// (program_payload.h) under a key of the model file's bytes, the request,
// the resolved job and the files it names, the target, the host and kiln's
// build (cache/program_key.h). A hit skips building the graph, the passes
// and kernel planning; the program's kernels are read from their own entries
// in the same cache, so an entry is small and a kernel is stored once.
//
// Entries live beside the kernels' (cache/kernel_cache.h), in the same
// authenticated format: a tampered or unreadable program entry is a warning,
// an eviction and a compile, never an error, and so is a program whose
// kernel entry is gone.
#pragma once

#include <optional>
#include <string>

#include "compiler/cache/kernel_cache.h"
#include "compiler/driver/compile.h"
#include "compiler/driver/kernels.h"
#include "compiler/driver/program_payload.h"

namespace kiln::driver {

// The key of compiling `model` under `job` and `settings`. An error when the
// model file or a file the job names cannot be read: then the compile runs
// uncached and says what is wrong itself.
Expected<cache::CacheKey> programKey(const ModelRequest &model, const ResolvedJob &job,
                                     const KernelSettings &settings);

// The program of `key` with every object's code and key parts read from its
// kernel entry; nullopt on a miss, counted as one. `why_missed`, when not
// null, receives why (the changed key parts against the nearest program
// entry, or which kernel entry is gone).
std::optional<CompiledProgram> lookupProgram(cache::KernelCache &cache, const cache::CacheKey &key,
                                             std::string *why_missed = nullptr);

// Stores `program` under `key` (its objects' code stays in the kernel entries).
Status storeProgram(cache::KernelCache &cache, const cache::CacheKey &key,
                    const CompiledProgram &program);

} // namespace kiln::driver

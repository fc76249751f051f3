// A graph's kernels re-derived and keyed as the kernel compiler does.
#include "compiler/artifact/kernel_derivation.h"

#include "compiler/codegen/kernel_compiler.h"
#include "passes/fusion/fusion_group_util.h"

namespace kiln::artifact {

Expected<std::vector<DerivedKernel>> deriveKernels(const Graph &graph, const target::Target &target,
                                                   const codegen::ObjectOptions &options) {
  const cache::CacheKeyInputs base = codegen::baseKeyInputs(target, options);
  const passes::FusionView view(graph);
  std::vector<DerivedKernel> kernels;
  for (codegen::KernelSpec &spec : codegen::partitionKernels(graph)) {
    DerivedKernel k;
    auto build = codegen::buildKernel(graph, spec);
    if (!build)
      return Error("kernel '" + spec.name + "' does not lower: " + build.message());
    k.build = std::move(*build);
    std::vector<codegen::KernelDiagnostic> diagnostics =
        codegen::checkKernel(view, spec, k.build, target, k.tiling);
    if (!diagnostics.empty())
      return Error("kernel '" + spec.name + "' does not fit " + target.name + ": " +
                   diagnostics.front().toString());
    cache::CacheKeyInputs in = base;
    in.kernel_name = spec.name;
    in.kernel_ir = codegen::canonicalKernelText(graph, spec);
    k.key = cache::makeCacheKey(in);
    k.spec = std::move(spec);
    kernels.push_back(std::move(k));
  }
  return kernels;
}

} // namespace kiln::artifact

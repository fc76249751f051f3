#include "compiler/codegen/kernel_dump.h"

#include <filesystem>
#include <system_error>

#include "compiler/cache/sha256.h"
#include "ir/graph_extract.h"
#include "ir/printer.h"
#include "support/file_io.h"
#include "support/file_names.h"

namespace kiln::codegen {

Expected<std::string> writeKernelDump(const std::string &dir, const Graph &graph,
                                      const KernelSpec &kernel, const KernelBuild *build,
                                      const std::vector<KernelDiagnostic> &problems) {
  const std::string canonical = canonicalKernelText(graph, kernel);
  std::string text = "# kernel '" + kernel.name + "' (" + kernel.kind;
  if (!kernel.formed_by.empty())
    text += ", formed by " + kernel.formed_by;
  text += ")\n";
  for (const KernelDiagnostic &d : problems)
    text += "# " + d.code + ": " + d.constraint + "\n";
  text += "\n## member ops\n";
  auto piece = extractSubgraph(graph, kernel.members, kernel.inputs, kernel.outputs, kernel.name);
  text += piece ? graphToText(*piece) : "(cannot be cut out: " + piece.message() + ")\n";
  text += "\n## kernel program\n";
  text += build ? programToString(build->program) : "(not built: see the diagnostic)\n";
  text += "\n## canonical text (hashed into the kernel-cache key)\n" + canonical + "\n";

  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return Error("kernel dump folder '" + dir + "': " + ec.message());
  const std::string path =
      dir + "/" + fileStem(kernel.name) + "." + cache::sha256Hex(canonical).substr(0, 12) + ".txt";
  KILN_RETURN_IF_ERROR(writeFileAtomic(path, text));
  return path;
}

} // namespace kiln::codegen

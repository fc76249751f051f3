#include "compiler/driver/compile_run.h"

#include <algorithm>
#include <set>
#include <utility>

#include "compiler/artifact/artifact_signing.h"
#include "compiler/driver/job_json.h"

namespace kiln::driver {

Status checkCompileLengths(const std::vector<int64_t> &seqs, bool to_artifact, bool passes_only,
                           const std::string &output) {
  for (size_t i = 0; i < seqs.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (seqs[i] == seqs[j])
        return Error("--seq lists " + std::to_string(seqs[i]) + " twice");
  if (seqs.size() > 1 && !to_artifact)
    return Error("--seq lists " + std::to_string(seqs.size()) +
                 " sequence lengths: only an artifact holds several (write one with -o FILE.kiln)");
  if (to_artifact && passes_only)
    return Error("--passes-only compiles no kernels, but an artifact (" + output +
                 ") holds them; drop one of the two");
  return Status::ok();
}

nlohmann::json reportWithError(nlohmann::json report, const Error &error) {
  if (report.is_null())
    report = nlohmann::json::object();
  nlohmann::json e = {{"message", error.message()}};
  if (!error.code().empty())
    e["code"] = error.code();
  if (!error.location().empty())
    e["location"] = error.location();
  report["error"] = std::move(e);
  return report;
}

Status compileRun(const CompileRunRequest &request, const ResolvedJob &job, CompileRun &run,
                  const std::function<Status(const ProgramCompile &, int64_t)> &on_compiled) {
  const std::vector<int64_t> seqs = request.seqs.empty() ? std::vector<int64_t>{0} : request.seqs;
  const bool several = seqs.size() > 1;
  nlohmann::json reports = nlohmann::json::array();
  auto reportOf = [&] { return several ? nlohmann::json{{"buckets", reports}} : reports.back(); };
  for (int64_t seq : seqs) {
    ProgramRequest one = request.program;
    one.model.seq = seq;
    nlohmann::json failure_report;
    auto compiled = compileProgram(one, job, &failure_report);
    if (!compiled) {
      // The report still says which kernels failed, with every diagnostic.
      if (failure_report.is_null())
        failure_report = nlohmann::json::object();
      if (several)
        failure_report["seq"] = seq;
      reports.push_back(std::move(failure_report));
      run.report = reportWithError(reportOf(), compiled.error());
      return compiled.error();
    }
    KILN_RETURN_IF_ERROR(on_compiled(*compiled, seq));
    if (request.report) {
      KILN_ASSIGN_OR_RETURN(nlohmann::json report, compiled->report());
      if (several)
        report["seq"] = seq;
      reports.push_back(std::move(report));
    }
    if (!request.program.for_artifact)
      continue;
    if (compiled->program.bucket.text.empty())
      return Error(request.artifact + ": " + compiled->bucket_error);
    if (!run.manifest) {
      codegen::ObjectOptions object; // as driver::compileJobKernels compiles
      object.overflow = job.overflow;
      run.manifest = makeManifest(job, object,
                                  {one.model.model, compiled->program.summary.graph,
                                   one.model.training, compiled->program.bucket.batch});
    }
    run.buckets.push_back(std::move(compiled->program.bucket));
  }
  if (request.report)
    run.report = reportOf();
  return Status::ok();
}

Expected<SignedArtifact> signArtifact(const artifact::Manifest &manifest,
                                      std::vector<artifact::EncodedBucket> buckets,
                                      const std::string &path) {
  SignedArtifact signed_artifact;
  std::set<std::string> objects;
  for (const artifact::EncodedBucket &b : buckets) {
    signed_artifact.kernels += static_cast<size_t>(b.kernels);
    signed_artifact.seqs.push_back(b.seq);
    for (const artifact::ArtifactObject &o : b.objects)
      objects.insert(o.key);
  }
  std::sort(signed_artifact.seqs.begin(), signed_artifact.seqs.end());
  signed_artifact.objects = objects.size();
  signed_artifact.buckets = buckets.size();
  KILN_ASSIGN_OR_RETURN(artifact::SigningKey key, artifact::SigningKey::loadOrCreate());
  auto bytes = artifact::encodeArtifact(manifest, std::move(buckets), key);
  if (!bytes)
    return bytes.error().withContext(path);
  signed_artifact.bytes = std::move(*bytes);
  signed_artifact.key_fingerprint = artifact::keyFingerprint(key.publicKey());
  return signed_artifact;
}

} // namespace kiln::driver

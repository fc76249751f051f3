// Encoding and reading a program entry's payload (format in program_payload.h).
#include "compiler/driver/program_payload.h"

#include "compiler/artifact/json_fields.h"
#include "support/file_io.h"

namespace kiln::driver {
namespace {

using artifact::JsonFields;
using nlohmann::json;

constexpr size_t kSizesBytes = 16;

void putU64(std::string &out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out.push_back(char(uint8_t(v >> (8 * i))));
}
uint64_t getU64(std::string_view bytes, size_t offset) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= uint64_t(uint8_t(bytes[offset + i])) << (8 * i);
  return v;
}

json summaryToJson(const ProgramSummary &s) {
  json passes = json::array();
  for (const PassLine &p : s.passes)
    passes.push_back(
        {{"name", p.name}, {"match_times", p.match_times}, {"effect_times", p.effect_times}});
  json settings = json::array();
  for (const passes::SettingMatch &m : s.settings)
    settings.push_back({{"setting", m.setting},
                        {"source", m.source},
                        {"entry", m.entry},
                        {"op_types", m.op_types},
                        {"nodes", m.nodes}});
  return {{"graph", s.graph},
          {"nodes_before", s.nodes_before},
          {"nodes", s.nodes},
          {"groups", s.groups},
          {"passes", std::move(passes)},
          {"settings", std::move(settings)},
          {"kernels", s.kernels},
          {"unique_kernels", s.unique_kernels}};
}

Expected<ProgramSummary> summaryFromJson(const json &j) {
  const JsonFields f(j, "summary");
  ProgramSummary s;
  KILN_ASSIGN_OR_RETURN(s.graph, f.string("graph"));
  KILN_ASSIGN_OR_RETURN(s.nodes_before, f.integer("nodes_before"));
  KILN_ASSIGN_OR_RETURN(s.nodes, f.integer("nodes"));
  KILN_ASSIGN_OR_RETURN(s.groups, f.integer("groups"));
  KILN_ASSIGN_OR_RETURN(s.kernels, f.integer("kernels"));
  KILN_ASSIGN_OR_RETURN(s.unique_kernels, f.integer("unique_kernels"));
  KILN_ASSIGN_OR_RETURN(const json *passes, f.array("passes"));
  for (const json &p : *passes) {
    const JsonFields pf(p, "summary: passes");
    PassLine line;
    KILN_ASSIGN_OR_RETURN(line.name, pf.string("name"));
    KILN_ASSIGN_OR_RETURN(line.match_times, pf.integer("match_times"));
    KILN_ASSIGN_OR_RETURN(line.effect_times, pf.integer("effect_times"));
    s.passes.push_back(std::move(line));
  }
  KILN_ASSIGN_OR_RETURN(const json *settings, f.array("settings"));
  for (const json &m : *settings) {
    const JsonFields mf(m, "summary: settings");
    passes::SettingMatch match;
    KILN_ASSIGN_OR_RETURN(match.setting, mf.string("setting"));
    KILN_ASSIGN_OR_RETURN(match.source, mf.string("source"));
    KILN_ASSIGN_OR_RETURN(match.entry, mf.string("entry"));
    KILN_ASSIGN_OR_RETURN(match.op_types, mf.stringArray("op_types"));
    KILN_ASSIGN_OR_RETURN(match.nodes, mf.integer("nodes"));
    s.settings.push_back(std::move(match));
  }
  return s;
}

json bucketHeadToJson(const artifact::EncodedBucket &b) {
  json objects = json::array();
  for (const artifact::ArtifactObject &o : b.objects)
    objects.push_back({{"key", o.key}, {"symbol", o.symbol}, {"kind", o.kind}});
  json custom_ops = json::array();
  for (const ops::OpSourceFile &file : b.custom_ops)
    custom_ops.push_back({{"path", file.path}, {"xml", file.xml}});
  return {{"seq", b.seq},
          {"batch", b.batch},
          {"kernels", b.kernels},
          {"objects", std::move(objects)},
          {"custom_ops", std::move(custom_ops)}};
}

Status bucketHeadFromJson(const json &j, artifact::EncodedBucket &b) {
  const JsonFields f(j, "bucket");
  KILN_ASSIGN_OR_RETURN(b.seq, f.integer("seq"));
  KILN_ASSIGN_OR_RETURN(b.batch, f.integer("batch"));
  KILN_ASSIGN_OR_RETURN(b.kernels, f.integer("kernels"));
  KILN_ASSIGN_OR_RETURN(const json *objects, f.array("objects"));
  for (const json &o : *objects) {
    const JsonFields of(o, "bucket: objects");
    artifact::ArtifactObject object;
    KILN_ASSIGN_OR_RETURN(object.key, of.string("key"));
    KILN_ASSIGN_OR_RETURN(object.symbol, of.string("symbol"));
    KILN_ASSIGN_OR_RETURN(object.kind, of.string("kind"));
    b.objects.push_back(std::move(object));
  }
  KILN_ASSIGN_OR_RETURN(const json *custom_ops, f.array("custom_ops"));
  for (const json &c : *custom_ops) {
    const JsonFields cf(c, "bucket: custom_ops");
    ops::OpSourceFile file;
    KILN_ASSIGN_OR_RETURN(file.path, cf.string("path"));
    KILN_ASSIGN_OR_RETURN(file.xml, cf.string("xml"));
    b.custom_ops.push_back(std::move(file));
  }
  return Status::ok();
}

} // namespace

Expected<std::string> encodeProgramPayload(const CompiledProgram &program) {
  const json head = {{"format_version", kProgramPayloadVersion},
                     {"summary", summaryToJson(program.summary)},
                     {"bucket", bucketHeadToJson(program.bucket)}};
  // A setting written in a file as Latin-1 is no JSON: an error, not an exception.
  KILN_ASSIGN_OR_RETURN(const std::string head_text, jsonText(head, "the program's summary"));
  std::string out;
  out.reserve(kSizesBytes + head_text.size() + program.report.size() + program.bucket.text.size());
  putU64(out, head_text.size());
  putU64(out, program.report.size());
  out += head_text;
  out += program.report;
  out += program.bucket.text;
  return out;
}

Expected<CompiledProgram> decodeProgramPayload(std::string_view payload) {
  if (payload.size() < kSizesBytes)
    return Error("truncated: " + std::to_string(payload.size()) +
                 " bytes is shorter than any program payload");
  const uint64_t head_size = getU64(payload, 0);
  const uint64_t report_size = getU64(payload, 8);
  const uint64_t room = payload.size() - kSizesBytes;
  if (head_size > room || report_size > room - head_size)
    return Error("truncated: the sizes promise " + std::to_string(head_size) + "+" +
                 std::to_string(report_size) + " bytes, the payload has " + std::to_string(room));
  KILN_ASSIGN_OR_RETURN(json head,
                        parseJson(payload.substr(kSizesBytes, head_size), "malformed head"));
  const JsonFields f(head, "head");
  KILN_ASSIGN_OR_RETURN(int64_t version, f.integer("format_version"));
  if (version != kProgramPayloadVersion)
    return Error("unknown program payload version " + std::to_string(version) +
                 " (this kiln reads " + std::to_string(kProgramPayloadVersion) + ")");
  CompiledProgram program;
  KILN_ASSIGN_OR_RETURN(const json *summary, f.object("summary"));
  KILN_ASSIGN_OR_RETURN(program.summary, summaryFromJson(*summary));
  KILN_ASSIGN_OR_RETURN(const json *bucket, f.object("bucket"));
  KILN_RETURN_IF_ERROR(bucketHeadFromJson(*bucket, program.bucket));
  program.report = std::string(payload.substr(kSizesBytes + head_size, report_size));
  program.bucket.text = std::string(payload.substr(kSizesBytes + head_size + report_size));
  return program;
}

} // namespace kiln::driver

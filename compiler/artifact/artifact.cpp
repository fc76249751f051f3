// Encoding and checking artifact files (format in artifact.h).
#include "compiler/artifact/artifact.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <unordered_set>

#include "compiler/artifact/json_fields.h"
#include "compiler/cache/cache_key.h"
#include "compiler/cache/sha256.h"
#include "compiler/frontend/custom_ops.h"
#include "formats/graph_json.h"
#include "ops/op_verifier.h"
#include "support/file_io.h"
#include "support/file_names.h"
#include "support/little_endian.h"
#include "support/printable_text.h"

namespace kiln::artifact {

using nlohmann::json;

namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'A', 'R', 'T', '\0'};

void putSection(std::string &out, std::string_view section) {
  putLE(out, section.size(), 8);
  out += section;
}

json plannedKernelToJson(const PlannedKernel &k) {
  return {{"name", k.name},       {"kind", k.kind},     {"formed_by", k.formed_by},
          {"grouped", k.grouped}, {"key", k.key},       {"symbol", k.symbol},
          {"object", k.object},   {"inputs", k.inputs}, {"outputs", k.outputs}};
}

json bucketToJson(int64_t seq, int64_t batch, const Graph &graph,
                  const std::vector<PlannedKernel> &planned, const executable::MemoryPlan &memory) {
  json kernels = json::array();
  for (const PlannedKernel &k : planned)
    kernels.push_back(plannedKernelToJson(k));
  return {{"seq", seq},
          {"batch", batch},
          {"graph", graphToJson(graph)},
          {"kernels", std::move(kernels)},
          {"memory", executable::memoryPlanToJson(memory)}};
}

// Reads the sections after the header, each a u64 size and its bytes.
class SectionReader {
public:
  SectionReader(std::string_view bytes, size_t begin, size_t end)
      : bytes_(bytes), pos_(begin), end_(end) {}
  Expected<std::string_view> next(const std::string &what) {
    if (end_ - pos_ < 8)
      return Error("truncated: the file ends before the size of " + what);
    const uint64_t size = getLE(bytes_, pos_, 8);
    pos_ += 8;
    if (size > end_ - pos_)
      return Error("truncated: " + what + " promises " + std::to_string(size) +
                   " bytes, the file has " + std::to_string(end_ - pos_) + " left");
    std::string_view section = bytes_.substr(pos_, size);
    pos_ += size;
    return section;
  }
  size_t left() const { return end_ - pos_; }

private:
  std::string_view bytes_;
  size_t pos_, end_;
};

struct Header {
  uint32_t buckets = 0;
  uint32_t objects = 0;
  uint64_t manifest_size = 0;
};

// `trailer`: the bytes that must follow the header at least.
Expected<Header> parseHeader(std::string_view bytes, size_t trailer) {
  if (bytes.size() >= sizeof(kMagic) && std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    return Error("bad magic: not a kiln artifact (.kiln, written by kiln compile -o FILE.kiln)");
  if (bytes.size() < kArtifactHeaderSize + trailer)
    return Error("truncated: " + std::to_string(bytes.size()) +
                 " bytes is shorter than any artifact");
  const uint32_t version = uint32_t(getLE(bytes, 8, 4));
  if (version != kArtifactFormatVersion)
    return Error("unknown artifact format version " + std::to_string(version) +
                 " (this kiln reads " + std::to_string(kArtifactFormatVersion) +
                 "); recompile it with this kiln's kiln compile ... -o FILE.kiln");
  if (getLE(bytes, 20, 4) != 0)
    return Error("malformed header: the reserved field is not zero");
  return Header{uint32_t(getLE(bytes, 12, 4)), uint32_t(getLE(bytes, 16, 4)), getLE(bytes, 24, 8)};
}

Expected<ArtifactObject> parseObjectEntry(const json &entry, size_t index) {
  const JsonFields f(entry, "manifest: objects[" + std::to_string(index) + "]");
  ArtifactObject o;
  KILN_ASSIGN_OR_RETURN(o.key, f.string("key"));
  if (!cache::isKeyHex(o.key))
    return f.error("key", "must be 64 lower-case hex digits");
  KILN_ASSIGN_OR_RETURN(o.symbol, f.string("symbol"));
  if (o.symbol.empty())
    return f.error("symbol", "must not be empty");
  KILN_ASSIGN_OR_RETURN(o.kind, f.string("kind"));
  KILN_ASSIGN_OR_RETURN(const json *parts, f.array("parts"));
  for (const json &part : *parts) {
    if (!part.is_array() || part.size() != 2 || !part[0].is_string() || !part[1].is_string())
      return f.error("parts", "must be [name, digest] pairs");
    o.parts.emplace_back(part[0].get<std::string>(), part[1].get<std::string>());
  }
  return o;
}

Expected<Bucket> parseBucket(std::string_view text, size_t index,
                             const std::vector<ArtifactObject> &objects,
                             const std::shared_ptr<const ops::OpRegistry> &vocabulary) {
  const std::string where = "bucket " + std::to_string(index);
  // parseJson refuses deep nesting, which copying the graph would recurse into.
  KILN_ASSIGN_OR_RETURN(json j, parseJson(text, where + ": malformed"));
  if (!j.is_object())
    return Error(where + ": malformed: not a JSON object");
  const JsonFields f(j, where);
  Bucket b;
  KILN_ASSIGN_OR_RETURN(b.seq, f.integer("seq"));
  KILN_ASSIGN_OR_RETURN(b.batch, f.integer("batch"));
  const std::string named = where + " (seq " + std::to_string(b.seq) + ")";
  KILN_ASSIGN_OR_RETURN(const json *graph, f.object("graph"));
  auto parsed = graphFromJson(*graph, named + ": graph");
  if (!parsed)
    return parsed.error();
  b.graph = std::move(*parsed);
  b.graph.setVocabulary(vocabulary);
  // Every op known and every type what the op infers: the loader lowers it.
  Status verified = ops::verifyGraph(b.graph);
  if (!verified)
    return verified.error().withContext(named + ": graph");

  std::unordered_set<std::string> values;
  for (ValueId v = 0; v < static_cast<ValueId>(b.graph.numValues()); ++v)
    values.insert(b.graph.valueName(v));
  KILN_ASSIGN_OR_RETURN(const json *kernels, f.array("kernels"));
  for (size_t i = 0; i < kernels->size(); ++i) {
    const JsonFields k((*kernels)[i], named + ": kernel " + std::to_string(i));
    PlannedKernel p;
    KILN_ASSIGN_OR_RETURN(p.name, k.string("name"));
    const JsonFields kn((*kernels)[i], named + ": kernel '" + p.name + "'");
    KILN_ASSIGN_OR_RETURN(p.kind, kn.string("kind"));
    KILN_ASSIGN_OR_RETURN(p.formed_by, kn.string("formed_by"));
    KILN_ASSIGN_OR_RETURN(p.grouped, kn.boolean("grouped"));
    KILN_ASSIGN_OR_RETURN(p.key, kn.string("key"));
    KILN_ASSIGN_OR_RETURN(p.symbol, kn.string("symbol"));
    KILN_ASSIGN_OR_RETURN(int64_t object, kn.integer("object"));
    if (object < 0 || object >= static_cast<int64_t>(objects.size()))
      return Error(kn.where() + ": object index " + std::to_string(object) +
                   " out of range (the artifact has " + std::to_string(objects.size()) +
                   " objects)");
    p.object = static_cast<int>(object);
    if (p.key != objects[p.object].key)
      return Error(kn.where() + ": key " + p.key.substr(0, 16) + "... is not that of object " +
                   std::to_string(object) + " (" + objects[p.object].key.substr(0, 16) + "...)");
    if (p.symbol != objects[p.object].symbol)
      return Error(kn.where() + ": symbol '" + p.symbol + "' is not that of object " +
                   std::to_string(object) + " ('" + objects[p.object].symbol + "')");
    KILN_ASSIGN_OR_RETURN(p.inputs, kn.stringArray("inputs"));
    KILN_ASSIGN_OR_RETURN(p.outputs, kn.stringArray("outputs"));
    for (const auto *list : {&p.inputs, &p.outputs})
      for (const std::string &v : *list)
        if (!values.count(v))
          return Error(kn.where() + ": value '" + v + "' is not in the bucket's graph");
    b.kernels.push_back(std::move(p));
  }

  KILN_ASSIGN_OR_RETURN(const json *memory, f.object("memory"));
  KILN_ASSIGN_OR_RETURN(b.memory, executable::memoryPlanFromJson(*memory, named + ": memory plan"));
  if (b.memory.kernels != static_cast<int>(b.kernels.size()))
    return Error(named + ": memory plan is for " + std::to_string(b.memory.kernels) +
                 " kernels, the bucket has " + std::to_string(b.kernels.size()));
  for (const executable::BufferPlacement &p : b.memory.buffers)
    if (!values.count(p.value))
      return Error(named + ": memory plan: value '" + p.value + "' is not in the bucket's graph");
  return b;
}

// The header and the sections of `bytes`, whose last `trailer` bytes follow
// the last object: sizes only, nothing parsed.
struct Layout {
  Header header;
  std::vector<std::string_view> buckets, objects;
};

Expected<Layout> layoutOf(std::string_view bytes, size_t trailer) {
  Layout l;
  KILN_ASSIGN_OR_RETURN(l.header, parseHeader(bytes, trailer));
  const size_t body = bytes.size() - trailer;
  if (l.header.manifest_size > body - kArtifactHeaderSize)
    return Error("truncated: the header promises a manifest of " +
                 std::to_string(l.header.manifest_size) + " bytes, the file has " +
                 std::to_string(body - kArtifactHeaderSize));
  SectionReader sections(bytes, kArtifactHeaderSize + l.header.manifest_size, body);
  for (uint32_t i = 0; i < l.header.buckets; ++i) {
    KILN_ASSIGN_OR_RETURN(std::string_view s, sections.next("bucket " + std::to_string(i)));
    l.buckets.push_back(s);
  }
  for (uint32_t i = 0; i < l.header.objects; ++i) {
    KILN_ASSIGN_OR_RETURN(std::string_view s, sections.next("object " + std::to_string(i)));
    l.objects.push_back(s);
  }
  if (sections.left() != 0)
    return Error("trailing bytes: " + std::to_string(sections.left()) + " after the last object");
  return l;
}

Expected<Artifact> decode(std::string_view bytes) {
  KILN_ASSIGN_OR_RETURN(Layout layout, layoutOf(bytes, kArtifactChecksumSize));
  const Header &h = layout.header;
  const std::vector<std::string_view> &bucket_bytes = layout.buckets,
                                      &object_bytes = layout.objects;
  const size_t body = bytes.size() - kArtifactChecksumSize;
  const cache::Sha256::Digest sum = cache::sha256(bytes.substr(0, body));
  if (std::memcmp(sum.data(), bytes.data() + body, kArtifactChecksumSize) != 0)
    return Error("checksum mismatch: the file is corrupt (its SHA-256 is not the stored one)");

  // parseJson refuses deep nesting, which copying the job settings would recurse into.
  KILN_ASSIGN_OR_RETURN(json manifest, parseJson(bytes.substr(kArtifactHeaderSize, h.manifest_size),
                                                 "malformed manifest"));
  if (!manifest.is_object())
    return Error("malformed manifest: not a JSON object");
  const JsonFields f(manifest, "malformed manifest");
  KILN_ASSIGN_OR_RETURN(std::string format, f.string("format"));
  if (format != "kiln.artifact")
    return f.error("format", "must be \"kiln.artifact\"");
  KILN_ASSIGN_OR_RETURN(int64_t version, f.integer("format_version"));
  if (version != kArtifactFormatVersion)
    return f.error("format_version", "is " + std::to_string(version) + ", the header says " +
                                         std::to_string(kArtifactFormatVersion));
  Artifact a;
  auto parsed = manifestFromJson(manifest);
  if (!parsed)
    return Error("malformed " + parsed.message());
  a.manifest = std::move(*parsed);

  KILN_ASSIGN_OR_RETURN(const json *objects, f.array("objects"));
  if (objects->size() != h.objects)
    return Error("malformed manifest: it lists " + std::to_string(objects->size()) +
                 " objects, the header " + std::to_string(h.objects));
  std::map<std::string, size_t> object_of_key;
  for (size_t i = 0; i < h.objects; ++i) {
    auto o = parseObjectEntry((*objects)[i], i);
    if (!o)
      return Error("malformed " + o.message());
    auto [it, fresh] = object_of_key.emplace(o->key, i);
    if (!fresh)
      return Error("malformed manifest: objects " + std::to_string(it->second) + " and " +
                   std::to_string(i) + " have the same key " + o->key.substr(0, 16) + "...");
    o->code = std::string(object_bytes[i]);
    a.objects.push_back(std::move(*o));
  }

  // Custom ops before the graphs that use them.
  KILN_ASSIGN_OR_RETURN(const json *custom_ops, f.array("custom_ops"));
  for (size_t i = 0; i < custom_ops->size(); ++i) {
    const JsonFields entry((*custom_ops)[i],
                           "malformed manifest: custom_ops[" + std::to_string(i) + "]");
    ops::OpSourceFile file;
    KILN_ASSIGN_OR_RETURN(file.path, entry.string("path"));
    // The writer keeps the file name only (artifact_builder.cpp); a name that
    // could lead out of a folder is a tampered or foreign file.
    if (std::string why = plainFileNameProblem(file.path); !why.empty())
      return entry.error("path", "'" + printableName(file.path) + "' " + why);
    KILN_ASSIGN_OR_RETURN(file.xml, entry.string("xml"));
    a.custom_ops.push_back(std::move(file));
  }
  std::vector<ops::OpSourceFile> embedded = a.custom_ops;
  for (ops::OpSourceFile &file : embedded)
    file.path = "custom op file '" + file.path + "'";
  KILN_ASSIGN_OR_RETURN(a.ops, frontend::loadCustomOpSources(embedded));

  KILN_ASSIGN_OR_RETURN(const json *buckets, f.array("buckets"));
  if (buckets->size() != h.buckets)
    return Error("malformed manifest: it lists " + std::to_string(buckets->size()) +
                 " buckets, the header " + std::to_string(h.buckets));
  if (h.buckets == 0)
    return Error("malformed manifest: the artifact has no bucket");
  std::set<int64_t> seqs;
  for (size_t i = 0; i < h.buckets; ++i) {
    const JsonFields entry((*buckets)[i], "malformed manifest: buckets[" + std::to_string(i) + "]");
    KILN_ASSIGN_OR_RETURN(int64_t seq, entry.integer("seq"));
    KILN_ASSIGN_OR_RETURN(Bucket b, parseBucket(bucket_bytes[i], i, a.objects, a.ops));
    if (b.seq != seq)
      return Error("bucket " + std::to_string(i) + " holds seq " + std::to_string(b.seq) +
                   ", the manifest lists seq " + std::to_string(seq));
    if (!seqs.insert(b.seq).second)
      return Error("duplicate bucket for seq " + std::to_string(b.seq));
    if (!a.buckets.empty() && a.buckets.back().seq > b.seq)
      return Error("buckets are not sorted by seq (" + std::to_string(a.buckets.back().seq) +
                   " before " + std::to_string(b.seq) + ")");
    a.buckets.push_back(std::move(b));
  }
  return a;
}

} // namespace

const Bucket *Artifact::findBucket(int64_t seq) const {
  for (const Bucket &b : buckets)
    if (b.seq == seq)
      return &b;
  return nullptr;
}

std::string Artifact::seqList() const {
  std::string s;
  for (const Bucket &b : buckets)
    s += (s.empty() ? "" : ", ") + std::to_string(b.seq);
  return s;
}

namespace {

struct BucketHead {
  int64_t seq = 0, batch = 1, kernels = 0;
};

// The file: header, manifest, the bucket sections as given, the objects,
// the checksum and the signature.
Expected<std::string> assemble(const Manifest &m, const std::vector<BucketHead> &heads,
                               const std::vector<const std::string *> &bucket_texts,
                               const std::vector<ArtifactObject> &object_list,
                               const std::vector<ops::OpSourceFile> &custom_op_list,
                               const SigningKey &key) {
  json manifest = manifestToJson(m);
  manifest["format"] = "kiln.artifact";
  manifest["format_version"] = kArtifactFormatVersion;
  json buckets = json::array();
  for (const BucketHead &b : heads)
    buckets.push_back({{"seq", b.seq}, {"batch", b.batch}, {"kernels", b.kernels}});
  manifest["buckets"] = std::move(buckets);
  json objects = json::array();
  for (const ArtifactObject &o : object_list) {
    // An array keeps the parts in key order (a JSON object would sort them).
    json parts = json::array();
    for (const auto &[name, hex] : o.parts)
      parts.push_back({name, hex});
    objects.push_back(
        {{"key", o.key}, {"symbol", o.symbol}, {"kind", o.kind}, {"parts", std::move(parts)}});
  }
  manifest["objects"] = std::move(objects);
  json custom_ops = json::array();
  for (const ops::OpSourceFile &file : custom_op_list)
    custom_ops.push_back({{"path", file.path}, {"xml", file.xml}});
  manifest["custom_ops"] = std::move(custom_ops);
  // A name that is not UTF-8 (a Latin-1 keep_dtype line, a model path) cannot
  // be JSON: an error naming it, not nlohmann's exception.
  KILN_ASSIGN_OR_RETURN(const std::string manifest_text, jsonText(manifest, "the manifest"));

  std::string out(kMagic, sizeof(kMagic));
  putLE(out, kArtifactFormatVersion, 4);
  putLE(out, heads.size(), 4);
  putLE(out, object_list.size(), 4);
  putLE(out, 0, 4);
  putLE(out, manifest_text.size(), 8);
  size_t size = out.size() + manifest_text.size() + kArtifactChecksumSize + kArtifactSignatureSize;
  for (const std::string *text : bucket_texts)
    size += 8 + text->size();
  for (const ArtifactObject &o : object_list)
    size += 8 + o.code.size();
  out.reserve(size);
  out += manifest_text;
  for (const std::string *text : bucket_texts)
    putSection(out, *text);
  for (const ArtifactObject &o : object_list)
    putSection(out, o.code);
  const cache::Sha256::Digest sum = cache::sha256(out);
  out.append(reinterpret_cast<const char *>(sum.data()), sum.size());
  KILN_ASSIGN_OR_RETURN(std::string signature, key.sign(out));
  out += key.publicKey();
  out += signature;
  return out;
}

} // namespace

Expected<std::string> encodeBucketText(int64_t seq, int64_t batch, const Graph &graph,
                                       const std::vector<PlannedKernel> &kernels,
                                       const executable::MemoryPlan &memory) {
  return jsonText(bucketToJson(seq, batch, graph, kernels, memory),
                  "bucket seq " + std::to_string(seq));
}

Expected<std::string> encodeArtifact(const Artifact &artifact, const SigningKey &key) {
  std::vector<BucketHead> heads;
  std::vector<std::string> texts;
  for (const Bucket &b : artifact.buckets) {
    heads.push_back({b.seq, b.batch, static_cast<int64_t>(b.kernels.size())});
    KILN_ASSIGN_OR_RETURN(std::string text,
                          encodeBucketText(b.seq, b.batch, b.graph, b.kernels, b.memory));
    texts.push_back(std::move(text));
  }
  std::vector<const std::string *> text_ptrs;
  for (const std::string &t : texts)
    text_ptrs.push_back(&t);
  return assemble(artifact.manifest, heads, text_ptrs, artifact.objects, artifact.custom_ops, key);
}

Expected<std::string> encodeArtifact(const Manifest &manifest, std::vector<EncodedBucket> buckets,
                                     const SigningKey &key) {
  std::sort(buckets.begin(), buckets.end(),
            [](const EncodedBucket &a, const EncodedBucket &b) { return a.seq < b.seq; });
  std::vector<BucketHead> heads;
  std::vector<const std::string *> texts;
  std::vector<ArtifactObject> objects;
  std::vector<ops::OpSourceFile> custom_ops;
  std::map<std::string, int> object_of_key;
  for (size_t i = 0; i < buckets.size(); ++i) {
    EncodedBucket &b = buckets[i];
    if (i > 0 && buckets[i - 1].seq == b.seq)
      return Error("two buckets for seq " + std::to_string(b.seq));
    std::vector<int> global(b.objects.size());
    bool renumber = false;
    for (size_t j = 0; j < b.objects.size(); ++j) {
      auto [it, fresh] = object_of_key.emplace(b.objects[j].key, static_cast<int>(objects.size()));
      if (fresh)
        objects.push_back(std::move(b.objects[j]));
      global[j] = it->second;
      renumber |= global[j] != static_cast<int>(j);
    }
    if (renumber) {
      // Only a bucket after the first can share objects: read its kernel table again.
      const std::string where = "bucket seq " + std::to_string(b.seq);
      KILN_ASSIGN_OR_RETURN(json j, parseJson(b.text, where));
      for (json &k : j["kernels"]) {
        const int64_t local = k.value("object", int64_t(-1));
        if (local < 0 || local >= static_cast<int64_t>(global.size()))
          return Error(where + ": object index " + std::to_string(local) + " out of range");
        k["object"] = global[static_cast<size_t>(local)];
      }
      KILN_ASSIGN_OR_RETURN(b.text, jsonText(j, where));
    }
    for (ops::OpSourceFile &file : b.custom_ops)
      if (std::find(custom_ops.begin(), custom_ops.end(), file) == custom_ops.end())
        custom_ops.push_back(std::move(file));
    heads.push_back({b.seq, b.batch, b.kernels});
    texts.push_back(&b.text);
  }
  return assemble(manifest, heads, texts, objects, custom_ops, key);
}

namespace {

// The signature first: nothing of a file changed after it was signed is
// parsed. Only the section sizes are walked before, so that a cut or a
// longer file is named as such.
Expected<Artifact> verifyAndDecode(std::string_view bytes) {
  KILN_RETURN_IF_ERROR(layoutOf(bytes, kArtifactChecksumSize + kArtifactSignatureSize).status());
  const std::string_view is_signed = bytes.substr(0, bytes.size() - kArtifactSignatureSize);
  const std::string_view signer = bytes.substr(is_signed.size(), kPublicKeySize);
  const std::string_view signature = bytes.substr(is_signed.size() + kPublicKeySize);
  if (!verifySignature(signer, is_signed, signature))
    return Error("signature does not verify: the file was changed after key " +
                 keyFingerprint(signer) + " signed it, or it is corrupt");
  KILN_ASSIGN_OR_RETURN(Artifact artifact, decode(is_signed));
  artifact.signer = std::string(signer);
  return artifact;
}

} // namespace

Expected<Artifact> decodeArtifact(std::string_view bytes, const std::string &source) {
  auto artifact = verifyAndDecode(bytes);
  if (!artifact)
    return artifact.error().withContext(source);
  artifact->source = source;
  return artifact;
}

Status writeArtifact(const std::string &path, const Artifact &artifact, const SigningKey &key) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, encodeArtifact(artifact, key));
  return writeFileAtomic(path, bytes);
}

Expected<Artifact> readArtifact(const std::string &path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, readFile(path));
  return decodeArtifact(bytes, path);
}

} // namespace kiln::artifact

// An artifact (*.kiln): one self-contained, self-checking, signed file holding a
// compiled job — its manifest, one bucket per sequence length (the compiled
// graph, the kernels in execution order, the memory plan) and the kernel
// objects, each stored once however many kernels and buckets share it.
// `kiln run job.kiln` runs it without compiling anything.
//
// Artifact format (all integers little-endian):
//
//   artifact := header manifest bucket{bucket_count} object{object_count} checksum signature
//   header   := magic[8] = "KILNART\0"  version:u32  bucket_count:u32
//               object_count:u32  reserved:u32 = 0  manifest_size:u64        (32 bytes)
//   manifest := manifest_size bytes of JSON: the fields of manifest.h, plus
//               "format": "kiln.artifact", "format_version": version,
//               "buckets": [{"seq", "batch", "kernels"}]          (file order)
//               "objects": [{"key", "symbol", "kind", "parts": [[part, hex], ...]}]
//               "custom_ops": [{"path", "xml"}]: the custom op files the graphs use
//   bucket   := size:u64  then size bytes of JSON:
//               {"seq", "batch", "graph": kiln graph JSON (formats/graph_json.h),
//                "kernels": [{"name", "kind", "formed_by", "grouped", "key", "symbol",
//                             "object": index into objects,
//                             "inputs": [value name], "outputs": [value name]}],
//                "memory": the memory plan (executable/memory_plan.h)}
//   object   := size:u64  then size bytes: the relocatable object file defining
//               the symbol of its entry in "objects"
//   checksum := SHA-256 of every byte before it                              (32 bytes)
//   signature:= signer:32 bytes (Ed25519 public key)  ed25519:64 bytes, the
//               signature of every byte before the signer by its key     (96 bytes)
//
// Buckets are sorted by seq, which is unique. Reading rejects bad magic, an
// unknown version, truncation, trailing bytes, a bad checksum, a signature
// that does not verify under the key it names, a malformed
// manifest or bucket, counts that disagree with the header, a duplicate
// bucket or object key, and a kernel whose object index is out of range or
// whose key or symbol is not its object's, each with its own message naming
// the file. Whether this kiln and host may run it, and whether its signer is
// trusted (artifact_signing.h), is artifact_loader.h's.
//
// Format versions:
//   1 (2026-12-02): first version.
//   2 (2026-12-02): "custom_ops" in the manifest; reading registers them.
//   3 (2026-12-03): the signature; kernels take a float-status word.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/artifact/artifact_signing.h"
#include "compiler/artifact/manifest.h"
#include "executable/memory_plan.h"
#include "ir/graph.h"
#include "ops/op_registry.h"
#include "support/error.h"

namespace kiln::artifact {

inline constexpr uint32_t kArtifactFormatVersion = 3;
inline constexpr size_t kArtifactHeaderSize = 32;
inline constexpr size_t kArtifactChecksumSize = 32;
inline constexpr size_t kArtifactSignatureSize = 96; // signer + Ed25519 signature

// One kernel of a bucket's execution plan.
struct PlannedKernel {
  std::string name; // the fusion group's name, or the node's
  std::string kind; // the group's kernel kind, or the op
  std::string formed_by;
  bool grouped = false;
  std::string key;                  // cache key, hex
  std::string symbol;               // its entry point in the object
  int object = -1;                  // index into Artifact::objects
  std::vector<std::string> inputs;  // value names, as the kernel reads them
  std::vector<std::string> outputs; // value names, as it stores them
};

struct Bucket {
  int64_t seq = 0;
  int64_t batch = 1;
  Graph graph; // after the job's passes
  std::vector<PlannedKernel> kernels;
  executable::MemoryPlan memory;
};

struct ArtifactObject {
  std::string key; // the cache key it was compiled under
  std::string symbol;
  std::string kind; // of the first kernel using it, for listings
  // The key's parts (cache_key.h), so a mismatch on load can name the part.
  std::vector<std::pair<std::string, std::string>> parts;
  std::string code; // the object file
};

struct Artifact {
  std::string source; // the file it was read from, for messages
  std::string signer; // the Ed25519 public key that signed it (raw), once read
  Manifest manifest;
  std::vector<Bucket> buckets; // by seq
  std::vector<ArtifactObject> objects;
  // The custom op definitions the buckets' graphs use. Reading an artifact
  // loads them into `ops`, the vocabulary its graphs are read in (null: the
  // built-in ops only); nothing is registered process-wide.
  std::vector<ops::OpSourceFile> custom_ops;
  std::shared_ptr<const ops::OpRegistry> ops;

  const Bucket *findBucket(int64_t seq) const;
  // "8, 16" for messages.
  std::string seqList() const;
};

// Signed by `key`.
Expected<std::string> encodeArtifact(const Artifact &artifact, const SigningKey &key);

// One bucket encoded once, as its section of an artifact, with the objects
// its kernels use: what the program cache keeps, so that a cached compile
// writes an artifact without reading its graph back.
struct EncodedBucket {
  int64_t seq = 0;
  int64_t batch = 1;
  int64_t kernels = 0; // in its plan
  // The bucket's JSON (the grammar above); "object" indexes `objects`.
  std::string text;
  std::vector<ArtifactObject> objects;       // in first use; code may be filled later
  std::vector<ops::OpSourceFile> custom_ops; // the files its graph's ops come from
};

// The JSON text of a bucket, as an artifact holds it.
Expected<std::string> encodeBucketText(int64_t seq, int64_t batch, const Graph &graph,
                                       const std::vector<PlannedKernel> &kernels,
                                       const executable::MemoryPlan &memory);

// An artifact of `buckets` (each with its objects' code), signed by `key`:
// buckets sorted by seq, objects stored once per key in the order the buckets
// first use them, a later bucket's object indices renumbered to match. Equal
// inputs give equal bytes (with SOURCE_DATE_EPOCH, manifest.h).
Expected<std::string> encodeArtifact(const Manifest &manifest, std::vector<EncodedBucket> buckets,
                                     const SigningKey &key);
// `source` names the file in every error.
Expected<Artifact> decodeArtifact(std::string_view bytes, const std::string &source);

// Written atomically: a reader sees the old file or the new one.
Status writeArtifact(const std::string &path, const Artifact &artifact, const SigningKey &key);
Expected<Artifact> readArtifact(const std::string &path);

} // namespace kiln::artifact

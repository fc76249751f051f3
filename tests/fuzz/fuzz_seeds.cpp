// Writes the seed corpus of every fuzz target: `fuzz_seeds SOURCE_DIR OUT_DIR`
// fills OUT_DIR/<target>/ with the repository's own examples and data, plus
// small files this program builds with kiln's writers (a safetensors file, a
// graph, an artifact compiled for a one-layer Qwen, cache entries, a manifest).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "compiler/artifact/artifact.h"
#include "compiler/artifact/artifact_builder.h"
#include "compiler/cache/cache_entry.h"
#include "compiler/codegen/kernel_compiler.h"
#include "compiler/driver/compile.h"
#include "compiler/driver/job_json.h"
#include "formats/graph_json.h"
#include "formats/safetensors.h"
#include "tests/fuzz/checksum_fixup.h"
#include "tests/fuzz/small_tokenizer.h"

namespace fs = std::filesystem;
using namespace kiln;

namespace {

fs::path out_root;

void write(const std::string &target, const std::string &name, std::string_view bytes) {
  fs::create_directories(out_root / target);
  std::ofstream(out_root / target / name, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Copies the files of `dir` (relative to the source root) ending in `ext`.
void copyAll(const fs::path &source, const std::string &target, const std::string &dir,
             const std::string &ext, const std::string &skip = "") {
  std::error_code ec;
  for (fs::recursive_directory_iterator it(source / dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    const fs::path &p = it->path();
    if (!it->is_regular_file() || p.extension() != ext || p.filename() == skip)
      continue;
    fs::create_directories(out_root / target);
    std::string name = fs::relative(p, source).string();
    for (char &c : name)
      c = c == '/' ? '_' : c;
    fs::copy_file(p, out_root / target / name, fs::copy_options::overwrite_existing);
  }
}

void fail(const std::string &what) {
  std::fprintf(stderr, "fuzz_seeds: %s\n", what.c_str());
  std::exit(1);
}

constexpr const char *kMicroConfig = R"({
  "architectures": ["QWenLMHeadModel"], "hidden_size": 16, "intermediate_size": 32,
  "num_attention_heads": 2, "kv_channels": 8, "num_hidden_layers": 1, "vocab_size": 32,
  "seq_length": 4, "max_position_embeddings": 8, "layer_norm_epsilon": 1e-06,
  "rotary_emb_base": 10000, "rotary_pct": 1.0, "no_bias": true,
  "tie_word_embeddings": false, "use_logn_attn": false, "use_dynamic_ntk": false,
  "scale_attn_weights": true, "fp16": false, "bf16": false, "fp32": true
})";

void safetensorsSeeds() {
  SafetensorsFile file;
  file.tensors["a.weight"] = Tensor::fromFloats(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  file.tensors["b"] = Tensor::fromFloats(DType::F16, {2}, {0.5f, -1});
  file.tensors["c"] = Tensor::fromFloats(DType::BF16, {1, 1}, {3});
  file.tensors["ids"] = Tensor::fromInts(DType::I32, {3}, {1, 2, 3});
  file.tensors["big"] = Tensor::fromInts(DType::I64, {2}, {-1, 1});
  file.tensors["mask"] = Tensor::fromInts(DType::Bool, {2, 2}, {0, 1, 1, 0});
  file.tensors["scalar"] = Tensor::fromFloats(DType::F32, {}, {7});
  file.tensors["empty"] = Tensor(TensorType{DType::F32, {0, 4}});
  file.metadata["format"] = "pt";
  write("safetensors", "mixed.safetensors", serializeSafetensors(file));
  write("safetensors", "empty.safetensors", serializeSafetensors(SafetensorsFile{}));
  SafetensorsFile one;
  one.tensors["x"] = Tensor::fromFloats(DType::F32, {1}, {1});
  write("safetensors", "one.safetensors", serializeSafetensors(one));
}

// A checkpoint as kiln train writes it, and token files of each format
// (after token_data's format byte: 0 uint16, 1 uint32, 2 safetensors).
void trainingSeeds() {
  SafetensorsFile ckpt;
  ckpt.metadata = {{"format", "kiln.checkpoint"},
                   {"step", "3"},
                   {"updates", "2"},
                   {"loss_scale", "65536"},
                   {"good_steps", "1"},
                   {"overflows_in_a_row", "0"},
                   {"seed", "7"}};
  ckpt.tensors["w"] = Tensor::fromFloats(DType::F32, {2}, {1, 2});
  ckpt.tensors["adam.m.w"] = Tensor::fromFloats(DType::F32, {2}, {0.5f, 0});
  ckpt.tensors["adam.v.w"] = Tensor::fromFloats(DType::F32, {2}, {0.25f, 0});
  write("checkpoint", "step-000003.safetensors", serializeSafetensors(ckpt));
  std::string u16(1, '\0'), u32(1, '\1');
  for (int i = 0; i < 12; ++i) {
    u16 += std::string{static_cast<char>(i * 37 % 256), static_cast<char>(i % 2)};
    u32 += std::string{static_cast<char>(i * 41 % 256), static_cast<char>(i % 2), 0, 0};
  }
  write("token_data", "u16.bin", u16);
  write("token_data", "u32.bin", u32);
  SafetensorsFile ids;
  ids.tensors["input_ids"] = Tensor::fromInts(DType::I64, {2, 4}, {1, 2, 3, 4, 5, 6, 7, 511});
  write("token_data", "ids.safetensors", std::string(1, '\2') + serializeSafetensors(ids));
  // The tokenizer: a tokenizer.json (format byte 0), and text (any other).
  write("tokenizer", "small.json", std::string(1, '\0') + fuzz::smallTokenizerJson());
  write("tokenizer", "text.txt",
        "\1The theme's 42 \xE4\xB8\x96\xE7\x95\x8C <|end|> <t> aaaa\r\n\n  x\xC3");
}

// The one-layer Qwen's graph, its artifact, manifest and cache entries.
void compiledSeeds() {
  const std::string config = (out_root / "qwen_config" / "micro.json").string();
  write("qwen_config", "micro.json", kMicroConfig);
  driver::JobSettings flags;
  flags.source = "fuzz_seeds";
  auto job = driver::resolveJob(std::nullopt, flags, DType::F16);
  if (!job)
    fail(job.message());
  for (bool training : {false, true}) {
    auto graph = driver::buildModelGraph({config, training, 1, 4}, *job);
    if (!graph)
      fail(graph.message());
    write("graph_json", training ? "micro_train.json" : "micro.json", graphToJson(*graph).dump(1));
  }
  auto graph = driver::buildModelGraph({config, false, 1, 4}, *job);
  if (!graph || !driver::compileGraph(*graph, *job))
    fail("cannot compile the one-layer model");
  write("graph_json", "micro_fused.json", graphToJson(*graph).dump(1));
  codegen::KernelCompileOptions options;
  options.object.overflow = job->overflow;
  options.threads = 1;
  auto kernels = codegen::compileKernels(*graph, job->target, options);
  if (!kernels)
    fail(kernels.message());
  artifact::ArtifactBuilder builder(
      driver::makeManifest(*job, options.object, {config, graph->name(), false, 1}));
  if (!builder.addBucket(4, 1, *graph, *kernels))
    fail("cannot add the artifact's bucket");
  artifact::Artifact a = std::move(builder).finish();
  write("manifest", "micro.json", artifact::manifestToJson(a.manifest).dump(1));
  // The reader never looks inside the objects: short stand-ins keep the
  // seed small, so mutations land in the headers and JSON.
  for (size_t i = 0; i < a.objects.size(); ++i) {
    const artifact::ArtifactObject &o = a.objects[i];
    cache::CacheEntry entry{o.key, o.symbol, o.parts, {{"kind", o.kind}}, 1764633600, o.code};
    if (i < 3)
      write("cache_entry", "entry" + std::to_string(i) + ".kce",
            cache::encodeEntry(entry, fuzz::kCacheSecret));
    entry.object = "\x7f"
                   "ELF";
    write("cache_entry", "short" + std::to_string(i) + ".kce",
          cache::encodeEntry(entry, fuzz::kCacheSecret));
    a.objects[i].code = "obj" + std::to_string(i);
  }
  write("artifact", "micro.kiln", *artifact::encodeArtifact(a, fuzz::signingKey()));
}

void keySeeds() {
  const artifact::SigningKey &key = fuzz::signingKey();
  write("key_files", "trusted_keys",
        "# trusted signers\n" + artifact::publicKeyHex(key.publicKey()) + " colleague\n\n");
  write("key_files", "signing.key", *key.toPem());
  const std::string message = "a message";
  write("key_files", "signed.bin", key.publicKey() + *key.sign(message) + message);
}

void textSeeds() {
  write("switch_lines", "simple.cfg",
        "# switch file\nTbeMatmulFixPipeFusionPass:off\nSoftmaxFusionPass : on\n");
  write("switch_lines", "unknown.cfg", "NoSuchPass:off\n\n  # comment\nMatMulBiasAddFusionPass:on");
  write("switch_json", "all_off.json",
        R"({"Switch":{"GraphFusion":{"ALL":"off","MatMulBiasAddFusionPass":"on"},)"
        R"("UBFusion":{"ALL":"on","TbeMatmulFixPipeFusionPass":"off"}}})");
  write("switch_json", "lines.cfg", "TbeEltwiseFusionPass:off\n");
  write("custom_op_expr", "swish.txt",
        "z[i, j] = x[i, j] * sigmoid(y[i, j]); w[i] = sum(j, x[i, j])");
  write("custom_op_expr", "cond.txt",
        "z[i] = alpha * x[i] + (x[i] > 0) * n\nw[i] = max(j, y[i, j] / (1 + exp(-x[i])))");
  write("custom_op_expr", "pow.txt",
        "z[i,j,k] = pow(x[i,j,k], 2) - log(abs(y[k]) + 1)\n"
        "w[i] = -min(j, sqrt(x[i, j, j]))");
  write("job", "full.json", R"({"format": "kiln.job", "version": 1, "name": "fuzz",
    "target": "ascend910", "precision": {"dtype": "f16", "overflow_mode": "saturation",
    "precision_mode": "allow_mix_precision", "attention_fp32_layers": [0, 3]},
    "fusion_switch": {"Switch": {"UBFusion": {"ALL": "off"}}},
    "enable_passes": ["AttentionFp32CastPass"], "disable_passes": ["SoftmaxFusionPass"],
    "allow_unknown_passes": true})");
}

// A few of ONNX's own node-test models (Debian's libonnx-testdata, which
// scripts/setup.sh installs): elementwise, matmul, shape arithmetic.
void onnxSeeds() {
  const fs::path node = "/usr/share/libonnx-testdata/data/node";
  for (const char *test :
       {"test_add", "test_matmul_2d", "test_softmax_axis_1", "test_reshape_reduced_dims",
        "test_gather_0", "test_layer_normalization_2d_axis0", "test_expand_dim_changed",
        "test_where_example", "test_cast_FLOAT_to_FLOAT16"}) {
    std::error_code ec;
    fs::create_directories(out_root / "onnx_model");
    fs::copy_file(node / test / "model.onnx",
                  out_root / "onnx_model" / (std::string(test) + ".onnx"),
                  fs::copy_options::overwrite_existing, ec);
  }
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 3)
    fail("usage: fuzz_seeds SOURCE_DIR OUT_DIR");
  const fs::path source = argv[1];
  out_root = argv[2];
  copyAll(source, "qwen_config", "examples", ".json");
  copyAll(source, "qwen_config", "tests/compiler/data", ".json");
  copyAll(source, "graph_json", "examples", ".json");
  copyAll(source, "job", "examples", ".json");
  copyAll(source, "switch_json", "fusion_rules", ".json");
  copyAll(source, "fusion_rule", "fusion_rules", ".json", "fusion_switch.json");
  copyAll(source, "fusion_rule", "examples", ".json");
  copyAll(source, "op_xml", "ops/defs", ".xml");
  copyAll(source, "custom_op_file", "examples", ".xml");
  copyAll(source, "target", "target/data", ".json");
  onnxSeeds();
  safetensorsSeeds();
  trainingSeeds();
  textSeeds();
  keySeeds();
  compiledSeeds();
  return 0;
}

#include "modelgen/make_model.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "engine/gguf/gguf_file.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/kernels/compute_pool.h"
#include "engine/kernels/ref/quants_ref.h"
#include "modelgen/rng.h"
#include "modelgen/row_runner.h"
#include "modelgen/synthetic_vocab.h"

namespace lifeline::modelgen {
namespace {

constexpr std::string_view kTokenizerPrefix = "tokenizer.";

void AddGeneralKvs(const MakeModelOptions& o, GgufWriter* w) {
  const ModelShape& s = o.shape;
  w->AddString("general.architecture", s.arch);
  w->AddString("general.name", o.name.empty() ? "synthetic-" + s.arch + "-" +
                                                    std::to_string(s.dim) + "x" +
                                                    std::to_string(s.n_layers)
                                              : o.name);
  w->AddUint32("general.file_type", static_cast<uint32_t>(o.ftype));
  w->AddUint32("general.quantization_version", kQuantizationVersion);
}

void AddArchKvs(const ModelShape& s, GgufWriter* w) {
  const std::string a = s.arch + ".";
  if (!s.pooling.empty()) {  // llama.cpp's numbering: mean 1, cls 2, last 3, rank 4
    const uint32_t p = s.pooling == "mean" ? 1 : s.pooling == "cls" ? 2 : s.pooling == "last" ? 3 : 4;
    w->AddUint32(a + "pooling_type", p);
  }
  const double rope_base = s.rope_base > 0 ? s.rope_base : DefaultRopeBase(s.arch);
  w->AddUint32(a + "context_length", static_cast<uint32_t>(s.ctx));
  w->AddUint32(a + "embedding_length", static_cast<uint32_t>(s.dim));
  w->AddUint32(a + "block_count", static_cast<uint32_t>(s.n_layers));
  w->AddUint32(a + "feed_forward_length", static_cast<uint32_t>(s.ffn));
  w->AddUint32(a + "attention.head_count", static_cast<uint32_t>(s.n_head));
  w->AddUint32(a + "attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  // The converters of these families always state the head size; elsewhere only when it is
  // not dim / heads (Mistral Nemo: 128 with 5120 / 32).
  if (s.head_dim_flag > 0 || s.arch == "qwen3" || IsGemmaFamily(s.arch)) {
    w->AddUint32(a + "attention.key_length", static_cast<uint32_t>(s.head_dim()));
    w->AddUint32(a + "attention.value_length", static_cast<uint32_t>(s.head_dim()));
  }
  w->AddUint32(a + "rope.dimension_count", static_cast<uint32_t>(s.rotary_dim()));
  w->AddFloat32(a + "attention.layer_norm_rms_epsilon", DefaultRmsEps(s.arch));
  w->AddFloat32(a + "rope.freq_base", static_cast<float>(rope_base));
  if (s.arch == "gemma2") {
    w->AddFloat32(a + "attn_logit_softcapping",
                  static_cast<float>(s.attn_softcap > 0 ? s.attn_softcap : 50.0));
    w->AddFloat32(a + "final_logit_softcapping",
                  static_cast<float>(s.final_softcap > 0 ? s.final_softcap : 30.0));
  }
  if (const int64_t window = SlidingWindowOf(s); window > 0) {
    w->AddUint32(a + "attention.sliding_window", static_cast<uint32_t>(window));
  }
  if (s.swa_pattern > 0) {
    w->AddUint32(a + "attention.sliding_window_pattern", static_cast<uint32_t>(s.swa_pattern));
  }
  if (s.rope_base_swa > 0) w->AddFloat32(a + "rope.freq_base_swa", static_cast<float>(s.rope_base_swa));
  if (s.n_expert > 0) {
    w->AddUint32(a + "expert_count", static_cast<uint32_t>(s.n_expert));
    w->AddUint32(a + "expert_used_count", static_cast<uint32_t>(s.n_expert_used));
    if (IsMoeArch(s.arch)) {
      w->AddUint32(a + "expert_feed_forward_length", static_cast<uint32_t>(s.expert_width()));
    }
    if (s.arch == "qwen2moe") {
      w->AddUint32(a + "expert_shared_feed_forward_length",
                   static_cast<uint32_t>(s.shared_width()));
    }
  }
  if (s.arch == "phi3" && s.rope_orig_ctx > 0) {
    w->AddUint32(a + "rope.scaling.original_context_length",
                 static_cast<uint32_t>(s.rope_orig_ctx));
    w->AddFloat32(a + "rope.scaling.attn_factor", static_cast<float>(LongRopeAttnFactor(s)));
  }
}

void AddSyntheticVocab(const SpmVocab& v, const std::string& arch, GgufWriter* w) {
  w->AddString("tokenizer.ggml.model", "llama");
  w->AddStringArray("tokenizer.ggml.tokens", v.tokens);
  w->AddFloat32Array("tokenizer.ggml.scores", v.scores);
  w->AddInt32Array("tokenizer.ggml.token_type", v.types);
  w->AddUint32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(v.unk_id));
  w->AddUint32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos_id));
  w->AddUint32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos_id));
  w->AddBool("tokenizer.ggml.add_bos_token", true);
  w->AddBool("tokenizer.ggml.add_eos_token", false);
  // Gemma's SentencePiece model does not prefix the text with a space.
  if (IsGemmaFamily(arch)) w->AddBool("tokenizer.ggml.add_space_prefix", false);
}

// Opens --vocab-from and returns its vocabulary size (the length of tokenizer.ggml.tokens).
Result<int64_t> VocabSizeOf(const GgufFile& f, const std::string& path) {
  const GgufKv* kv = f.FindKv("tokenizer.ggml.tokens");
  if (kv == nullptr) {
    return InvalidArgument("--vocab-from " + path + ": no tokenizer.ggml.tokens key");
  }
  if (kv->value.type != GgufValueType::kArray ||
      kv->value.array_type != GgufValueType::kString) {
    return InvalidArgument("--vocab-from " + path +
                           ": tokenizer.ggml.tokens is not an array of strings");
  }
  return static_cast<int64_t>(kv->value.array_count);
}

// Writes one tensor's rows into dst ([rows, row_bytes]), rows split over the pool's threads.
Status FillTensor(const PlannedTensor& t, uint64_t seed, ComputePool* pool, uint8_t* dst,
                  uint64_t size_bytes) {
  const int64_t n = t.ne[0];
  const int64_t rows = t.rows();
  const auto row_bytes = RowBytes(t.type, n);
  if (!row_bytes || *row_bytes * static_cast<uint64_t>(rows) != size_bytes) {
    return Internal("tensor '" + t.name + "': writer buffer of " + std::to_string(size_bytes) +
                    " bytes does not match the plan");
  }
  const uint64_t name_hash = HashName(t.name);
  RunRows(pool, rows, n, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(n));  // [n] f32 values before encoding
    for (int64_t r = begin; r < end; ++r) {
      if (t.init == InitKind::kOnes) {
        std::fill(row.begin(), row.end(), 1.0f);
      } else if (t.init == InitKind::kValues) {
        std::copy(t.values.begin(), t.values.end(), row.begin());
      } else {
        Xoshiro256pp rng(RowSeed(seed, name_hash, static_cast<uint64_t>(r)));
        FillNormal(&rng, t.std_dev, row.data(), n);
        if (t.init == InitKind::kOnePlusNormal) {
          for (float& v : row) v += 1.0f;
        }
      }
      ref::QuantizeRow(t.type, row.data(), dst + static_cast<uint64_t>(r) * *row_bytes, n);
    }
  });
  return Status::Ok();
}

}  // namespace

Status MakeModel(const MakeModelOptions& opts) {
  if (opts.threads < 1 || opts.threads > kMaxToolThreads) {
    return InvalidArgument("--threads " + std::to_string(opts.threads) + " is outside [1, " +
                           std::to_string(kMaxToolThreads) + "]");
  }
  if (opts.out_path.empty()) return InvalidArgument("-o: output path is empty");

  MakeModelOptions o = opts;
  std::unique_ptr<GgufFile> vocab_file;
  if (!o.vocab_from.empty()) {
    auto opened = GgufFile::Open(o.vocab_from);
    if (!opened.ok()) {
      const std::string& m = opened.status().message();
      return Status(opened.status().code(),
                    "--vocab-from: " + (m.find(o.vocab_from) == std::string::npos
                                            ? o.vocab_from + ": " + m
                                            : m));
    }
    vocab_file = std::move(opened).value();
    LL_ASSIGN_OR_RETURN(o.shape.vocab, VocabSizeOf(*vocab_file, o.vocab_from));
  }
  LL_RETURN_IF_ERROR(ValidateModelShape(o.shape, o.ftype));

  SpmVocab vocab;
  if (!vocab_file) {
    LL_ASSIGN_OR_RETURN(vocab, BuildSyntheticSpmVocab(o.shape.vocab));
    if (o.shape.arch == "phi3") {
      // llama.cpp looks "<|endoftext|>" up (and fails to load without it) in the vocabulary
      // of every model whose general.name says phi3; Phi-3's own vocabulary has it as a
      // control token. It takes the last generated piece's place.
      vocab.tokens.back() = "<|endoftext|>";
      vocab.scores.back() = 0.0f;
      vocab.types.back() = static_cast<int32_t>(SpmTokenType::kControl);
    }
  }

  const std::vector<PlannedTensor> plan = PlanTensors(o.shape, o.ftype);
  if (!PlannedDataBytes(plan)) return InvalidArgument("model size overflows 64 bits");
  for (const auto& t : plan) {
    if (!ref::CanQuantize(t.type)) {
      return Unimplemented("tensor '" + t.name + "': cannot encode type " +
                           std::string(TypeTraits(t.type).name));
    }
  }

  GgufWriter w;
  AddGeneralKvs(o, &w);
  AddArchKvs(o.shape, &w);
  if (vocab_file) {
    for (const auto& kv : vocab_file->kvs()) {
      if (kv.key.compare(0, kTokenizerPrefix.size(), kTokenizerPrefix) == 0) {
        w.CopyKv(*vocab_file, kv);
      }
    }
  } else {
    AddSyntheticVocab(vocab, o.shape.arch, &w);
  }
  if (!o.shape.rerank_template.empty()) {
    w.AddString("tokenizer.chat_template.rerank", o.shape.rerank_template);
  }
  for (const auto& t : plan) w.AddTensor(t.name, t.type, t.ne);

  ComputePool pool(o.threads);
  return w.Write(o.out_path, [&](size_t index, uint8_t* dst, uint64_t size_bytes) -> Status {
    if (index >= plan.size()) return Internal("writer asked for tensor " + std::to_string(index));
    return FillTensor(plan[index], o.seed, &pool, dst, size_bytes);
  });
}

}  // namespace lifeline::modelgen

#include "engine/model/llama_weights.h"

#include <string>

#include "base/checked_math.h"
#include "engine/kernels/ref/quants_ref.h"

namespace lifeline {
namespace {

std::string ShapeString(const GgufTensorInfo& t) {
  std::string s = "[";
  for (int d = 0; d < t.n_dims; ++d) {
    if (d > 0) s += ", ";
    s += std::to_string(t.ne[d]);
  }
  return s + "]";
}

Status CheckType(const GgufTensorInfo& t) {
  if (!ref::CanDequantize(t.type)) {
    return Unimplemented("tensor " + t.name + ": type " + std::string(TypeTraits(t.type).name) +
                         " is not supported as a weight");
  }
  return Status::Ok();
}

// Checks `t` is exactly [ne0, ne1] (ggml order; ne1 == 1 allows a 1-D tensor).
Status CheckShape(const GgufTensorInfo& t, int64_t ne0, int64_t ne1, const char* meaning) {
  const bool dims_ok = t.n_dims == 2 || (t.n_dims == 1 && ne1 == 1);
  if (!dims_ok || t.ne[0] != ne0 || t.ne[1] != ne1 || t.ne[2] != 1 || t.ne[3] != 1) {
    // Appended piecewise: GCC 12 at -O3 warns falsely (-Wrestrict) on "[" + to_string(...).
    std::string want = "[";
    want += std::to_string(ne0);
    if (ne1 != 1 || t.n_dims != 1) want += ", " + std::to_string(ne1);
    want += "]";
    return DataLoss("tensor " + t.name + ": shape " + ShapeString(t) + " does not match the " +
                    "model config, expected " + want + " (" + meaning + ")");
  }
  return Status::Ok();
}

const GgufTensorInfo* Find(const GgufFile& f, const std::string& name) {
  return f.FindTensor(name);
}

Result<WeightMatrix> BindMatrix(const GgufFile& f, const std::string& name, int64_t rows,
                                int64_t cols, const char* meaning) {
  const GgufTensorInfo* t = Find(f, name);
  if (t == nullptr) return NotFound("required tensor " + name + " is missing");
  LL_RETURN_IF_ERROR(CheckShape(*t, cols, rows, meaning));
  LL_RETURN_IF_ERROR(CheckType(*t));
  const std::optional<uint64_t> row_bytes = RowBytes(t->type, cols);
  uint64_t total = 0;
  if (!row_bytes || !CheckedMul(*row_bytes, static_cast<uint64_t>(rows), &total) ||
      total > t->size_bytes) {
    return DataLoss("tensor " + name + ": " + std::to_string(rows) + " rows of " +
                    std::to_string(cols) + " " + std::string(TypeTraits(t->type).name) +
                    " values do not fit its " + std::to_string(t->size_bytes) + " bytes");
  }
  WeightMatrix w;
  w.type = t->type;
  w.data = t->data;
  w.rows = rows;
  w.cols = cols;
  w.row_bytes = *row_bytes;
  return w;
}

// Binds a 1-D vector of n values, dequantized into an owned float copy. An absent optional
// tensor yields an empty vector.
Result<std::vector<float>> BindVector(const GgufFile& f, const std::string& name, int64_t n,
                                      bool required, const char* meaning) {
  const GgufTensorInfo* t = Find(f, name);
  if (t == nullptr) {
    if (required) return NotFound("required tensor " + name + " is missing");
    return std::vector<float>();
  }
  LL_RETURN_IF_ERROR(CheckShape(*t, n, 1, meaning));
  LL_RETURN_IF_ERROR(CheckType(*t));
  std::vector<float> v(static_cast<size_t>(n));  // [n]
  ref::DequantizeRow(t->type, t->data, v.data(), n);
  return v;
}

// A [cols, rows, n_expert] tensor (ggml order) as one matrix of rows * n_expert rows: expert
// e is rows [e * rows, (e + 1) * rows).
Result<WeightMatrix> BindExperts(const GgufFile& f, const std::string& name, int64_t rows,
                                 int64_t cols, int64_t n_expert, const char* meaning) {
  const GgufTensorInfo* t = Find(f, name);
  if (t == nullptr) return NotFound("required tensor " + name + " is missing");
  if (t->n_dims != 3 || t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != n_expert ||
      t->ne[3] != 1) {
    return DataLoss("tensor " + name + ": shape " + ShapeString(*t) + " does not match the " +
                    "model config, expected [" + std::to_string(cols) + ", " +
                    std::to_string(rows) + ", " + std::to_string(n_expert) + "] (" + meaning +
                    ")");
  }
  LL_RETURN_IF_ERROR(CheckType(*t));
  const std::optional<uint64_t> row_bytes = RowBytes(t->type, cols);
  uint64_t total = 0;
  if (!row_bytes || !CheckedMul(*row_bytes, static_cast<uint64_t>(rows * n_expert), &total) ||
      total > t->size_bytes) {
    return DataLoss("tensor " + name + ": " + std::to_string(rows * n_expert) + " rows of " +
                    std::to_string(cols) + " values do not fit its " +
                    std::to_string(t->size_bytes) + " bytes");
  }
  WeightMatrix w;
  w.type = t->type;
  w.data = t->data;
  w.rows = rows * n_expert;
  w.cols = cols;
  w.row_bytes = *row_bytes;
  return w;
}

// Rows [r0, r0 + n) of w, as a matrix of their own (a view: same bytes).
WeightMatrix RowView(const WeightMatrix& w, int64_t r0, int64_t n) {
  WeightMatrix v = w;
  v.data = w.data + static_cast<uint64_t>(r0) * w.row_bytes;
  v.rows = n;
  return v;
}

Status BindQkNorms(const GgufFile& f, const ModelConfig& c, const std::string& p,
                   LlamaLayerWeights* l);

Status BindAttention(const GgufFile& f, const ModelConfig& c, const std::string& p,
                     LlamaLayerWeights* l) {
  if (Find(f, p + "attn_qkv.weight") != nullptr) {
    // phi3: Q, K and V stacked in one tensor, Q rows first.
    LL_ASSIGN_OR_RETURN(const WeightMatrix qkv,
                        BindMatrix(f, p + "attn_qkv.weight", c.q_dim() + c.k_dim() + c.v_dim(),
                                   c.n_embd, "n_embd, q_dim + k_dim + v_dim"));
    l->wq = RowView(qkv, 0, c.q_dim());
    l->wk = RowView(qkv, c.q_dim(), c.k_dim());
    l->wv = RowView(qkv, c.q_dim() + c.k_dim(), c.v_dim());
    if (Find(f, p + "attn_qkv.bias") != nullptr) {
      LL_ASSIGN_OR_RETURN(const std::vector<float> b,
                          BindVector(f, p + "attn_qkv.bias", c.q_dim() + c.k_dim() + c.v_dim(),
                                     true, "q_dim + k_dim + v_dim"));
      l->bq.assign(b.begin(), b.begin() + c.q_dim());
      l->bk.assign(b.begin() + c.q_dim(), b.begin() + c.q_dim() + c.k_dim());
      l->bv.assign(b.begin() + c.q_dim() + c.k_dim(), b.end());
      return BindQkNorms(f, c, p, l);
    }
  } else {
    LL_ASSIGN_OR_RETURN(l->wq, BindMatrix(f, p + "attn_q.weight", c.q_dim(), c.n_embd,
                                          "n_embd, n_head * head_dim"));
    LL_ASSIGN_OR_RETURN(l->wk, BindMatrix(f, p + "attn_k.weight", c.k_dim(), c.n_embd,
                                          "n_embd, n_head_kv * head_dim"));
    LL_ASSIGN_OR_RETURN(l->wv, BindMatrix(f, p + "attn_v.weight", c.v_dim(), c.n_embd,
                                          "n_embd, n_head_kv * head_dim_v"));
  }
  LL_ASSIGN_OR_RETURN(l->wo, BindMatrix(f, p + "attn_output.weight", c.n_embd, c.attn_out_dim(),
                                        "n_head * head_dim_v, n_embd"));
  const bool bias = c.qkv_bias_required;
  LL_ASSIGN_OR_RETURN(l->bq, BindVector(f, p + "attn_q.bias", c.q_dim(), bias,
                                        "n_head * head_dim"));
  LL_ASSIGN_OR_RETURN(l->bk, BindVector(f, p + "attn_k.bias", c.k_dim(), bias,
                                        "n_head_kv * head_dim"));
  LL_ASSIGN_OR_RETURN(l->bv, BindVector(f, p + "attn_v.bias", c.v_dim(), bias,
                                        "n_head_kv * head_dim_v"));
  return BindQkNorms(f, c, p, l);
}

Status BindQkNorms(const GgufFile& f, const ModelConfig& c, const std::string& p,
                   LlamaLayerWeights* l) {
  if (c.qk_norm) {
    LL_ASSIGN_OR_RETURN(l->attn_q_norm, BindVector(f, p + "attn_q_norm.weight", c.head_dim_k,
                                                   true, "head_dim_k"));
    LL_ASSIGN_OR_RETURN(l->attn_k_norm, BindVector(f, p + "attn_k_norm.weight", c.head_dim_k,
                                                   true, "head_dim_k"));
  }
  return Status::Ok();
}

Status BindFeedForward(const GgufFile& f, const ModelConfig& c, const std::string& p,
                       LlamaLayerWeights* l) {
  if (Find(f, p + "ffn_gate.weight") == nullptr && Find(f, p + "ffn_up.weight") != nullptr) {
    // phi3: gate and up stacked in ffn_up, gate rows first (llama.cpp's LLM_FFN_SWIGLU split).
    LL_ASSIGN_OR_RETURN(const WeightMatrix gate_up,
                        BindMatrix(f, p + "ffn_up.weight", 2 * c.n_ff, c.n_embd,
                                   "n_embd, 2 * n_ff (gate | up: there is no ffn_gate)"));
    l->w_gate = RowView(gate_up, 0, c.n_ff);
    l->w_up = RowView(gate_up, c.n_ff, c.n_ff);
  } else {
    LL_ASSIGN_OR_RETURN(l->w_gate, BindMatrix(f, p + "ffn_gate.weight", c.n_ff, c.n_embd,
                                              "n_embd, n_ff"));
    LL_ASSIGN_OR_RETURN(l->w_up, BindMatrix(f, p + "ffn_up.weight", c.n_ff, c.n_embd,
                                            "n_embd, n_ff"));
  }
  LL_ASSIGN_OR_RETURN(l->w_down, BindMatrix(f, p + "ffn_down.weight", c.n_embd, c.n_ff,
                                            "n_ff, n_embd"));
  return Status::Ok();
}

Status BindExpertFfns(const GgufFile& f, const ModelConfig& c, const std::string& p,
                      LlamaLayerWeights* l) {
  const int64_t e = c.n_expert, ff = c.n_ff_exp;
  LL_ASSIGN_OR_RETURN(l->ffn_gate_inp, BindMatrix(f, p + "ffn_gate_inp.weight", e, c.n_embd,
                                                  "n_embd, n_expert"));
  l->experts.resize(static_cast<size_t>(e));
  if (Find(f, p + "ffn_gate_up_exps.weight") != nullptr) {
    LL_ASSIGN_OR_RETURN(const WeightMatrix gu,
                        BindExperts(f, p + "ffn_gate_up_exps.weight", 2 * ff, c.n_embd, e,
                                    "n_embd, 2 * n_ff_exp, n_expert"));
    for (int64_t i = 0; i < e; ++i) {
      l->experts[static_cast<size_t>(i)].w_gate = RowView(gu, 2 * ff * i, ff);
      l->experts[static_cast<size_t>(i)].w_up = RowView(gu, 2 * ff * i + ff, ff);
    }
  } else {
    LL_ASSIGN_OR_RETURN(const WeightMatrix gate, BindExperts(f, p + "ffn_gate_exps.weight", ff,
                                                             c.n_embd, e,
                                                             "n_embd, n_ff_exp, n_expert"));
    LL_ASSIGN_OR_RETURN(const WeightMatrix up, BindExperts(f, p + "ffn_up_exps.weight", ff,
                                                           c.n_embd, e,
                                                           "n_embd, n_ff_exp, n_expert"));
    for (int64_t i = 0; i < e; ++i) {
      l->experts[static_cast<size_t>(i)].w_gate = RowView(gate, ff * i, ff);
      l->experts[static_cast<size_t>(i)].w_up = RowView(up, ff * i, ff);
    }
  }
  LL_ASSIGN_OR_RETURN(const WeightMatrix down, BindExperts(f, p + "ffn_down_exps.weight",
                                                           c.n_embd, ff, e,
                                                           "n_ff_exp, n_embd, n_expert"));
  for (int64_t i = 0; i < e; ++i) {
    l->experts[static_cast<size_t>(i)].w_down = RowView(down, c.n_embd * i, c.n_embd);
  }
  if (c.n_ff_shexp > 0) {
    const int64_t sh = c.n_ff_shexp;
    LL_ASSIGN_OR_RETURN(l->ffn_gate_inp_shexp, BindVector(f, p + "ffn_gate_inp_shexp.weight",
                                                          c.n_embd, true, "n_embd"));
    LL_ASSIGN_OR_RETURN(l->shexp.w_gate, BindMatrix(f, p + "ffn_gate_shexp.weight", sh,
                                                    c.n_embd, "n_embd, n_ff_shexp"));
    LL_ASSIGN_OR_RETURN(l->shexp.w_up, BindMatrix(f, p + "ffn_up_shexp.weight", sh, c.n_embd,
                                                  "n_embd, n_ff_shexp"));
    LL_ASSIGN_OR_RETURN(l->shexp.w_down, BindMatrix(f, p + "ffn_down_shexp.weight", c.n_embd,
                                                    sh, "n_ff_shexp, n_embd"));
  }
  return Status::Ok();
}

Status BindLayer(const GgufFile& f, const ModelConfig& c, int64_t il, LlamaLayerWeights* l) {
  const std::string p = "blk." + std::to_string(il) + ".";
  LL_ASSIGN_OR_RETURN(l->attn_norm, BindVector(f, p + "attn_norm.weight", c.n_embd, true,
                                               "n_embd"));
  LL_RETURN_IF_ERROR(BindAttention(f, c, p, l));
  LL_ASSIGN_OR_RETURN(l->ffn_norm, BindVector(f, p + "ffn_norm.weight", c.n_embd, true,
                                              "n_embd"));
  if (c.post_norms) {
    LL_ASSIGN_OR_RETURN(l->attn_post_norm, BindVector(f, p + "post_attention_norm.weight",
                                                      c.n_embd, true, "n_embd"));
    LL_ASSIGN_OR_RETURN(l->ffn_post_norm, BindVector(f, p + "post_ffw_norm.weight", c.n_embd,
                                                     true, "n_embd"));
  }
  return c.is_moe() ? BindExpertFfns(f, c, p, l) : BindFeedForward(f, c, p, l);
}

// A small matrix as row-major floats (the classifier head: read once per sequence).
Result<std::vector<float>> DenseMatrix(const GgufFile& f, const std::string& name, int64_t rows,
                                       int64_t cols, const char* meaning) {
  LL_ASSIGN_OR_RETURN(const WeightMatrix m, BindMatrix(f, name, rows, cols, meaning));
  std::vector<float> out(static_cast<size_t>(rows * cols));  // [rows, cols]
  for (int64_t r = 0; r < rows; ++r) {
    ref::DequantizeRow(m.type, m.data + static_cast<uint64_t>(r) * m.row_bytes,
                       out.data() + r * cols, cols);
  }
  return out;
}

Status BindClassifier(const GgufFile& f, const ModelConfig& c, LlamaWeights* w) {
  if (c.n_cls_out == 0) return Status::Ok();
  if (f.FindTensor("cls.weight") != nullptr) {
    LL_ASSIGN_OR_RETURN(w->cls, DenseMatrix(f, "cls.weight", c.n_embd, c.n_embd,
                                            "n_embd, n_embd"));
    LL_ASSIGN_OR_RETURN(w->cls_b, BindVector(f, "cls.bias", c.n_embd, false, "n_embd"));
  }
  LL_ASSIGN_OR_RETURN(w->cls_out, DenseMatrix(f, "cls.output.weight", c.n_cls_out, c.n_embd,
                                              "n_embd, n_cls_out"));
  LL_ASSIGN_OR_RETURN(w->cls_out_b, BindVector(f, "cls.output.bias", c.n_cls_out, false,
                                               "n_cls_out"));
  return Status::Ok();
}

}  // namespace

Result<LlamaWeights> BindLlamaWeights(const GgufFile& file, const ModelConfig& c) {
  LlamaWeights w;
  LL_ASSIGN_OR_RETURN(w.token_embd, BindMatrix(file, "token_embd.weight", c.n_vocab, c.n_embd,
                                               "n_embd, n_vocab"));
  LL_ASSIGN_OR_RETURN(w.output_norm, BindVector(file, "output_norm.weight", c.n_embd, true,
                                                "n_embd"));
  if (c.output == OutputTensor::kOptional && file.FindTensor("output.weight") != nullptr) {
    LL_ASSIGN_OR_RETURN(w.output, BindMatrix(file, "output.weight", c.n_vocab, c.n_embd,
                                             "n_embd, n_vocab"));
  } else {
    w.output = w.token_embd;
    w.output_tied = true;
  }
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int64_t il = 0; il < c.n_layer; ++il) {
    LL_RETURN_IF_ERROR(BindLayer(file, c, il, &w.layers[static_cast<size_t>(il)]));
  }
  LL_RETURN_IF_ERROR(BindClassifier(file, c, &w));
  return w;
}

}  // namespace lifeline

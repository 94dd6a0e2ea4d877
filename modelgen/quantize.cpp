#include "modelgen/quantize.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "engine/gguf/gguf_file.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/kernels/compute_pool.h"
#include "engine/kernels/ref/quants_ref.h"
#include "modelgen/make_model.h"
#include "modelgen/row_runner.h"

namespace lifeline::modelgen {
namespace {

constexpr std::string_view kFileTypeKey = "general.file_type";
constexpr std::string_view kQuantVersionKey = "general.quantization_version";

struct TensorJob {
  const GgufTensorInfo* src = nullptr;
  GgmlType dst_type = GgmlType::kF32;
  bool copy = true;  // same type: bytes copied
};

bool IsBlockQuantized(GgmlType t) {
  return t != GgmlType::kF32 && t != GgmlType::kF16 && t != GgmlType::kBF16 &&
         TypeTraits(t).block_elems > 1;
}

// What the policy needs from the input: layer and head counts, whether output.weight exists.
ModelTypeContext ContextOf(const GgufFile& f) {
  ModelTypeContext ctx;
  const auto arch = f.GetString("general.architecture");
  const std::string prefix = arch.ok() ? std::string(*arch) + "." : std::string();
  int64_t max_layer = -1;
  for (const auto& t : f.tensors()) {
    if (const auto layer = LayerOfTensor(t.name); layer && *layer > max_layer) max_layer = *layer;
  }
  const auto n_layers = f.GetUint(prefix + "block_count");
  ctx.n_layers = n_layers.ok() ? static_cast<int64_t>(*n_layers) : max_layer + 1;
  const auto n_head = f.GetUint(prefix + "attention.head_count");
  ctx.n_head = n_head.ok() ? static_cast<int64_t>(*n_head) : 1;
  const auto n_head_kv = f.GetUint(prefix + "attention.head_count_kv");
  ctx.n_head_kv = n_head_kv.ok() ? static_cast<int64_t>(*n_head_kv) : ctx.n_head;
  ctx.has_output = f.FindTensor("output.weight") != nullptr;
  return ctx;
}

Result<std::vector<TensorJob>> PlanJobs(const GgufFile& f, FileType ftype, QuantizeStats* st) {
  const ModelTypeContext ctx = ContextOf(f);
  std::vector<TensorJob> jobs;
  jobs.reserve(f.tensors().size());
  for (const auto& t : f.tensors()) {
    TensorJob job;
    job.src = &t;
    job.dst_type = IsQuantizableTensor(t.name, t.n_dims)
                       ? ChooseTensorType(ctx, ftype, t.name, t.ne[0])
                       : t.type;
    job.copy = job.dst_type == t.type;
    if (!job.copy) {
      if (!ref::CanDequantize(t.type)) {
        return Unimplemented("tensor '" + t.name + "': cannot decode type " +
                             std::string(TypeTraits(t.type).name));
      }
      if (!ref::CanQuantize(job.dst_type)) {
        return Unimplemented("tensor '" + t.name + "': cannot encode type " +
                             std::string(TypeTraits(job.dst_type).name));
      }
      // Block-quantized to block-quantized compounds two rounding errors; decoding to a
      // float type does not.
      if (IsBlockQuantized(t.type) && IsBlockQuantized(job.dst_type)) ++st->tensors_requantized;
      ++st->tensors_converted;
    } else {
      ++st->tensors_copied;
    }
    jobs.push_back(job);
  }
  return jobs;
}

void CopyKvs(const GgufFile& f, FileType ftype, GgufWriter* w) {
  bool have_ftype = false, have_qver = false;
  for (const auto& kv : f.kvs()) {
    if (kv.key == kFileTypeKey) {
      w->AddUint32(kv.key, static_cast<uint32_t>(ftype));
      have_ftype = true;
    } else if (kv.key == kQuantVersionKey) {
      w->AddUint32(kv.key, kQuantizationVersion);
      have_qver = true;
    } else {
      w->CopyKv(f, kv);
    }
  }
  if (!have_ftype) w->AddUint32(std::string(kFileTypeKey), static_cast<uint32_t>(ftype));
  if (!have_qver) w->AddUint32(std::string(kQuantVersionKey), kQuantizationVersion);
}

// Converts one tensor row by row: [rows, ne0] in the source type -> [rows, ne0] in dst_type.
Status ConvertTensor(const TensorJob& job, ComputePool* pool, uint8_t* dst, uint64_t size_bytes) {
  const GgufTensorInfo& t = *job.src;
  const int64_t n = t.ne[0];
  const int64_t rows = static_cast<int64_t>(t.n_elements() / static_cast<uint64_t>(n));
  const auto src_row = RowBytes(t.type, n);
  const auto dst_row = RowBytes(job.dst_type, n);
  if (!src_row || !dst_row || *dst_row * static_cast<uint64_t>(rows) != size_bytes) {
    return Internal("tensor '" + t.name + "': writer buffer of " + std::to_string(size_bytes) +
                    " bytes does not match " + std::to_string(rows) + " rows");
  }
  RunRows(pool, rows, n, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(n));  // [n] one row in f32
    for (int64_t r = begin; r < end; ++r) {
      const uint64_t ur = static_cast<uint64_t>(r);
      ref::DequantizeRow(t.type, t.data + ur * *src_row, row.data(), n);
      ref::QuantizeRow(job.dst_type, row.data(), dst + ur * *dst_row, n);
    }
  });
  return Status::Ok();
}

// Drops the input pages of a tensor that has been written: they are clean file-backed pages
// of a read-only mapping, so the kernel re-reads them if ever touched again. Keeps resident
// memory near one tensor instead of growing to the whole input file. Advisory: errors ignored.
void ReleaseSourcePages(const uint8_t* data, uint64_t size_bytes) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<uintptr_t>(data) + page - 1) & ~(page - 1);
  const auto end = (reinterpret_cast<uintptr_t>(data) + size_bytes) & ~(page - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

bool SameFile(const std::string& a, const std::string& b) {
  std::error_code ec;
  return std::filesystem::equivalent(a, b, ec) && !ec;
}

}  // namespace

Result<QuantizeStats> QuantizeModel(const QuantizeOptions& opts) {
  if (opts.threads < 1 || opts.threads > kMaxToolThreads) {
    return InvalidArgument("--threads " + std::to_string(opts.threads) + " is outside [1, " +
                           std::to_string(kMaxToolThreads) + "]");
  }
  if (opts.out_path.empty()) return InvalidArgument("output path is empty");
  if (SameFile(opts.in_path, opts.out_path)) {
    return InvalidArgument("output " + opts.out_path + " is the input file; write elsewhere");
  }
  auto opened = GgufFile::Open(opts.in_path);
  if (!opened.ok()) {
    // Name the input once: the reader's messages usually start with the path already.
    const std::string& m = opened.status().message();
    return Status(opened.status().code(), m.find(opts.in_path) == std::string::npos
                                              ? opts.in_path + ": " + m
                                              : m);
  }
  const std::unique_ptr<GgufFile> in = std::move(opened).value();

  QuantizeStats stats;
  LL_ASSIGN_OR_RETURN(std::vector<TensorJob> jobs, PlanJobs(*in, opts.ftype, &stats));
  if (stats.tensors_requantized > 0 && opts.warn) {
    opts.warn(std::to_string(stats.tensors_requantized) +
              " weight tensors are already block-quantized; re-encoding them adds a second "
              "rounding error");
  }

  GgufWriter w;
  if (const auto align = in->GetUint("general.alignment"); align.ok()) {
    w.SetAlignment(static_cast<uint32_t>(*align));
  }
  CopyKvs(*in, opts.ftype, &w);
  for (const auto& job : jobs) {
    std::vector<int64_t> ne(job.src->ne, job.src->ne + job.src->n_dims);
    w.AddTensor(job.src->name, job.dst_type, std::move(ne));
  }

  ComputePool pool(opts.threads);
  LL_RETURN_IF_ERROR(
      w.Write(opts.out_path, [&](size_t index, uint8_t* dst, uint64_t size_bytes) -> Status {
        if (index >= jobs.size()) {
          return Internal("writer asked for tensor " + std::to_string(index));
        }
        const TensorJob& job = jobs[index];
        if (!job.copy) {
          LL_RETURN_IF_ERROR(ConvertTensor(job, &pool, dst, size_bytes));
        } else if (size_bytes != job.src->size_bytes) {
          return Internal("tensor '" + job.src->name + "': writer buffer size mismatch");
        } else {
          std::memcpy(dst, job.src->data, size_bytes);
        }
        ReleaseSourcePages(job.src->data, job.src->size_bytes);
        return Status::Ok();
      }));
  return stats;
}

}  // namespace lifeline::modelgen

// Scale searches used by the K-quant reference quantizers. Each picks, for one small group of
// values, a scale (and for the asymmetric types a min) plus the integer levels L that
// minimise a weighted squared (or absolute) error, by trying a handful of candidate scales
// and solving the least-squares fit for each.
//
// These reproduce ggml's make_qx_quants (rmse_type 1, no importance weights),
// make_q3_quants (do_rmse) and make_qkx2_quants operation for operation, in f32 and in the
// same order, so a file we quantize holds the same bytes as one written by llama.cpp's
// reference quantizer (no importance matrix).
#include <cmath>

#include "engine/kernels/ref/quants_ref_internal.h"

namespace lifeline::ref::internal {
namespace {

// Largest-magnitude value with its sign (first wins on ties), and its magnitude.
void SignedMax(int n, const float* x, float* max, float* amax) {
  *max = 0.0f;
  *amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > *amax) {
      *amax = ax;
      *max = x[i];
    }
  }
}

int Clamp(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Groups whose magnitude is below this are stored as all-zero (ggml's GROUP_MAX_EPS).
constexpr float kGroupMaxEps = 1e-15f;

// Weighted sums for levels l = clamp(round(iscale * x)) with weight x^2:
// sum(w x l) and sum(w l^2), accumulated in index order.
void SymmetricSums(int n, int nmax, const float* x, float iscale, float* sumlx, float* suml2) {
  *sumlx = 0.0f;
  *suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
    const float w = x[i] * x[i];
    *sumlx += w * x[i] * static_cast<float>(l);
    *suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
}

void SymmetricLevels(int n, int nmax, const float* x, float iscale, int8_t* L) {
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<int8_t>(nmax + Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1));
  }
}

}  // namespace

float FitSymmetricScale(int n, int nmax, const float* x, int8_t* L) {
  float max, amax;
  SignedMax(n, x, &max, &amax);
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  // Start with the extreme value mapped to level -nmax, then try 18 nearby scales
  // (nmax +- 0.1 .. 0.9) and keep the one maximising sumlx^2 / suml2 (i.e. minimising the
  // x^2-weighted squared error of the least-squares scale sumlx / suml2).
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx, suml2;
  SymmetricSums(n, nmax, x, iscale, &sumlx, &suml2);
  SymmetricLevels(n, nmax, x, iscale, L);
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / max;
    SymmetricSums(n, nmax, x, iscale, &sumlx, &suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      SymmetricLevels(n, nmax, x, iscale, L);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

float FitSymmetricScaleIterative(int n, int nmax, const float* x, int8_t* L) {
  float max, amax;
  SignedMax(n, x, &max, &amax);
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0.0f;
  float suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  // Coordinate descent: move one level at a time to its best value given the others, keep
  // the move if it improves sumlx^2 / suml2; at most 5 sweeps.
  for (int sweep = 0; sweep < 5; ++sweep) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const float li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      if (slx > 0) {
        float sl2 = suml2 - w * li * li;
        const int new_l = Clamp(NearestInt(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (new_l != L[i]) {
          const float nl = static_cast<float>(new_l);
          slx += w * x[i] * nl;
          sl2 += w * nl * nl;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (n_changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

float FitScaleAndMin(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                     float* neg_min, uint8_t* L_scratch, const ScaleMinSearch& search) {
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  // The min is an offset subtracted at dequantization, so it never goes above zero.
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *neg_min = -min;
    return 0.0f;
  }
  const float nmax_f = static_cast<float>(nmax);
  float iscale = nmax_f / (max - min);
  float scale = 1 / iscale;
  auto error_of = [&](float diff) { return search.use_mad ? std::fabs(diff) : diff * diff; };
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(Clamp(NearestInt(iscale * (x[i] - min)), 0, nmax));
    const float diff = scale * static_cast<float>(L[i]) + min - x[i];
    best_error += weights[i] * error_of(diff);
  }
  if (search.n_steps < 1) {
    *neg_min = -min;
    return scale;
  }
  // For each candidate level spacing, round, then solve the 2x2 weighted least-squares
  // problem for (scale, min); keep the candidate with the lowest weighted error.
  for (int step = 0; step <= search.n_steps; ++step) {
    iscale = (search.rmin + search.rdelta * static_cast<float>(step) + nmax_f) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = Clamp(NearestInt(iscale * (x[i] - min)), 0, nmax);
      L_scratch[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      const float lf = static_cast<float>(l);
      sum_l += w * lf;
      sum_l2 += w * lf * lf;
      sum_xl += w * lf * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        const float diff = this_scale * static_cast<float>(L_scratch[i]) + this_min - x[i];
        cur_error += weights[i] * error_of(diff);
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = L_scratch[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *neg_min = -min;
  return scale;
}

}  // namespace lifeline::ref::internal

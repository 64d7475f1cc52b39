// Yᵀ Y of a row-major float64 block with AVX2 and FMA, chosen at run time.
//
// Eigen's product, compiled for baseline x86-64 (SSE2, no FMA), ran gram at 0.31x the bytes/s
// of `reduce sum` (docs/decisions/2026-12-04-linalg-accumulation.md); Eigen itself cannot be
// compiled for AVX2 in a file of its own (its inline templates would be instantiated twice
// under the same names). This loop needs no Eigen: the lower triangle of g is cut into
// blocks of up to four columns j by up to 16 rows i (4 vectors), up to eight sums kept in
// registers while the block's rows stream through L1 (gram_quad says how blocks are cut),
// the rows taken a few KiB at a time so that every block of a row band finds them there.

#include "gram_rows.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#define OOC_GRAM_X86 1
#endif

namespace ooc::linalg::kernel {

#ifdef OOC_GRAM_X86
namespace {

#define OOC_AVX2_FMA __attribute__((target("avx2,fma")))

// The first `left` lanes (1 to 4) of a vector: the columns of a row's last vector.
OOC_AVX2_FMA inline __m256i tail_mask(std::int64_t left) {
  return _mm256_setr_epi64x(-1, left > 1 ? -1 : 0, left > 2 ? -1 : 0, left > 3 ? -1 : 0);
}

// The block of columns j .. j + JN - 1 by rows i0 .. i0 + 4 NV of g, over rows [r0, r1)
// of y, each row less `centre` where CENTRED; the last vector is masked where TAIL (the
// rows of g past m are not there). The first block of a band (ahead > 0) asks for the
// row `ahead` rows on.
template <int JN, int NV, bool TAIL, bool CENTRED>
OOC_AVX2_FMA inline void gram_block(const double* y, std::int64_t r0, std::int64_t r1, std::int64_t m, std::int64_t j,
                                    std::int64_t i0, __m256i tail, double* g, std::int64_t ahead, const double* centre) {
  __m256d sums[JN][NV], at_j[JN];
#pragma GCC unroll 4
  for (int c = 0; c < JN; ++c) at_j[c] = CENTRED ? _mm256_broadcast_sd(centre + j + c) : _mm256_setzero_pd();
#pragma GCC unroll 4
  for (int c = 0; c < JN; ++c) {
    const double* column = g + (j + c) * m + i0;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      sums[c][v] = TAIL && v == NV - 1 ? _mm256_maskload_pd(column + 4 * v, tail) : _mm256_loadu_pd(column + 4 * v);
  }
  for (std::int64_t r = r0; r < r1; ++r) {
    const double* row = y + r * m;
    if (ahead > 0) {
      const char* next = reinterpret_cast<const char*>(row + ahead * m);
      for (std::int64_t line = 0; line < m * 8; line += 64) _mm_prefetch(next + line, _MM_HINT_T0);
    }
    __m256d x[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      x[v] = TAIL && v == NV - 1 ? _mm256_maskload_pd(row + i0 + 4 * v, tail) : _mm256_loadu_pd(row + i0 + 4 * v);
    if (CENTRED) {
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v)
        x[v] = _mm256_sub_pd(x[v], TAIL && v == NV - 1 ? _mm256_maskload_pd(centre + i0 + 4 * v, tail)
                                                       : _mm256_loadu_pd(centre + i0 + 4 * v));
    }
#pragma GCC unroll 4
    for (int c = 0; c < JN; ++c) {
      const __m256d b =
          CENTRED ? _mm256_sub_pd(_mm256_broadcast_sd(row + j + c), at_j[c]) : _mm256_broadcast_sd(row + j + c);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) sums[c][v] = _mm256_fmadd_pd(x[v], b, sums[c][v]);
    }
  }
#pragma GCC unroll 4
  for (int c = 0; c < JN; ++c) {
    double* column = g + (j + c) * m + i0;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      if (TAIL && v == NV - 1) _mm256_maskstore_pd(column + 4 * v, tail, sums[c][v]);
      else _mm256_storeu_pd(column + 4 * v, sums[c][v]);
    }
  }
}

template <int JN, int NV>
OOC_AVX2_FMA inline void gram_block_of(bool tail_block, const double* y, std::int64_t r0, std::int64_t r1,
                                       std::int64_t m, std::int64_t j, std::int64_t i0, __m256i tail, double* g,
                                       std::int64_t ahead, const double* centre) {
  if (centre != nullptr) {
    if (tail_block) gram_block<JN, NV, true, true>(y, r0, r1, m, j, i0, tail, g, ahead, centre);
    else gram_block<JN, NV, false, true>(y, r0, r1, m, j, i0, tail, g, ahead, centre);
  } else {
    if (tail_block) gram_block<JN, NV, true, false>(y, r0, r1, m, j, i0, tail, g, ahead, centre);
    else gram_block<JN, NV, false, false>(y, r0, r1, m, j, i0, tail, g, ahead, centre);
  }
}

// JN columns (1 to 4) by NV vectors (1 to 4), at most 8 accumulators.
OOC_AVX2_FMA inline void gram_block_sized(int columns, int vectors, bool tail_block, const double* y, std::int64_t r0,
                                          std::int64_t r1, std::int64_t m, std::int64_t j, std::int64_t i0, __m256i tail,
                                          double* g, std::int64_t ahead, const double* centre) {
#define OOC_GRAM_CASE(JN, NV) \
  case JN * 8 + NV: return gram_block_of<JN, NV>(tail_block, y, r0, r1, m, j, i0, tail, g, ahead, centre);
  switch (columns * 8 + vectors) {
    OOC_GRAM_CASE(1, 1) OOC_GRAM_CASE(1, 2) OOC_GRAM_CASE(1, 3) OOC_GRAM_CASE(1, 4)
    OOC_GRAM_CASE(2, 1) OOC_GRAM_CASE(2, 2) OOC_GRAM_CASE(2, 3) OOC_GRAM_CASE(2, 4)
    OOC_GRAM_CASE(3, 1) OOC_GRAM_CASE(3, 2)
    OOC_GRAM_CASE(4, 1) OOC_GRAM_CASE(4, 2)
    default: break;
  }
#undef OOC_GRAM_CASE
}

// Columns j .. j + 3 (fewer at the end), rows from j's vector down: where three or four
// vectors remain, pairs of columns by up to four vectors; where one or two remain, all the
// columns at once, so that every block has enough independent sums to hide the latency of
// its fused multiply-adds.
OOC_AVX2_FMA inline void gram_quad(const double* y, std::int64_t r0, std::int64_t r1, std::int64_t m, std::int64_t j,
                                   __m256i tail, double* g, std::int64_t ahead, const double* centre) {
  const std::int64_t vectors = (m + 3) / 4;
  const bool ragged = m % 4 != 0;
  const int columns = static_cast<int>(std::min<std::int64_t>(4, m - j));
  for (std::int64_t v = j / 4; v < vectors;) {
    const int left = static_cast<int>(vectors - v);
    if (left >= 3) {
      const int count = std::min(4, left);
      const bool tail_block = ragged && v + count == vectors;
      for (int c = 0; c < columns; c += 2)
        gram_block_sized(std::min(2, columns - c), count, tail_block, y, r0, r1, m, j + c, 4 * v, tail, g,
                         std::exchange(ahead, 0), centre);
      v += count;
    } else {
      gram_block_sized(columns, left, ragged, y, r0, r1, m, j, 4 * v, tail, g, std::exchange(ahead, 0), centre);
      v += left;
    }
  }
}

OOC_AVX2_FMA void gram_avx2(const double* y, std::int64_t rows, std::int64_t m, double* g, const double* centre) {
  const std::int64_t left = m % 4 == 0 ? 4 : m % 4;
  const __m256i tail = tail_mask(left);
  // Rows per band: about 16 KiB of y, which every block of the band reads again from L1.
  const std::int64_t band = std::max<std::int64_t>(8, 2048 / m);
  for (std::int64_t r0 = 0; r0 < rows; r0 += band) {
    const std::int64_t r1 = std::min(rows, r0 + band);
    // The first block of a band asks for the next band's rows, which arrive while the
    // band's other blocks compute.
    const std::int64_t ahead = r1 + (r1 - r0) <= rows ? r1 - r0 : 0;
    for (std::int64_t j = 0; j < m; j += 4) gram_quad(y, r0, r1, m, j, tail, g, j == 0 ? ahead : 0, centre);
  }
}

// mean = the mean over the rows of y - shift, each column summed in row order.
OOC_AVX2_FMA void shifted_means_avx2(const double* y, std::int64_t rows, std::int64_t m, const double* shift,
                                     double* mean) {
  const std::int64_t left = m % 4 == 0 ? 4 : m % 4;
  const __m256i tail = tail_mask(left);
  const std::int64_t whole = m - left;  // columns in unmasked vectors
  for (std::int64_t i = 0; i < m; ++i) mean[i] = 0.0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const double* row = y + r * m;
    std::int64_t i = 0;
    for (; i < whole; i += 4) {
      const __m256d d = _mm256_sub_pd(_mm256_loadu_pd(row + i), _mm256_loadu_pd(shift + i));
      _mm256_storeu_pd(mean + i, _mm256_add_pd(_mm256_loadu_pd(mean + i), d));
    }
    const __m256d d = _mm256_sub_pd(_mm256_maskload_pd(row + i, tail), _mm256_maskload_pd(shift + i, tail));
    _mm256_maskstore_pd(mean + i, tail, _mm256_add_pd(_mm256_maskload_pd(mean + i, tail), d));
  }
  const double count = static_cast<double>(rows);
  for (std::int64_t i = 0; i < m; ++i) mean[i] /= count;
}

#undef OOC_AVX2_FMA

bool cpu_has_avx2_fma() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return false;
  // The instruction-set knob the vector math takes (kernels/vecmath.cpp): less than avx2
  // asked for, the portable product is used.
  const char* asked = std::getenv("OOC_VECMATH");
  return !(asked && (std::strcmp(asked, "scalar") == 0 || std::strcmp(asked, "sse") == 0));
}

}  // namespace

bool add_gram_of_rows(const double* y, std::int64_t rows, std::int64_t m, double* g, const double* centre) {
  static const bool usable = cpu_has_avx2_fma();
  if (!usable || m <= 0) return false;
  gram_avx2(y, rows, m, g, centre);
  return true;
}

bool shifted_means(const double* y, std::int64_t rows, std::int64_t m, const double* shift, double* mean) {
  static const bool usable = cpu_has_avx2_fma();
  if (!usable || m <= 0 || rows <= 0) return false;
  shifted_means_avx2(y, rows, m, shift, mean);
  return true;
}

#else

bool add_gram_of_rows(const double*, std::int64_t, std::int64_t, double*, const double*) { return false; }
bool shifted_means(const double*, std::int64_t, std::int64_t, const double*, double*) { return false; }

#endif

}  // namespace ooc::linalg::kernel

/* qk_windows.h -- part 4 of qkernels.h's translation unit (qconform/kernels/__init__.py's PARTS):
 * the windowed ops, convolutions and average pools. */

/* ---------------------------------------------------------------------------------------------
 * Convolutions: ConvInteger and QLinearConv, 1-D to 3-D (fewer spatial axes are size-1 axes).
 *
 * The host plans the geometry (qconform/kernels/contraction.py, from the oracle's conv_geometry:
 * auto_pad resolved, output sizes) into QK_CG_LEN int64 numbers; the kernel walks one output
 * element's window over its group's channels. A padded pixel contributes 0 (a pixel of real value
 * 0: qconform/docs/semantics.md#qlconv-padding), so it is skipped. Operands are int8/uint8: a
 * difference fits 9 bits, a product 17, and the exact sum is an int64 far from overflow.
 * ------------------------------------------------------------------------------------------- */
enum {
  QK_CG_N, QK_CG_C, QK_CG_M, QK_CG_GROUP,
  QK_CG_D = 4,   /* input spatial sizes, 3 */
  QK_CG_K = 7,   /* kernel sizes, 3 */
  QK_CG_O = 10,  /* output sizes, 3 */
  QK_CG_S = 13,  /* strides, 3 */
  QK_CG_DIL = 16, /* dilations, 3 */
  QK_CG_PAD = 19, /* pads at the beginning, 3 */
  QK_CG_LEN = 22
};

/* Σ over m's group's channels c and kernel offsets k of (x[n, c, o·s + k·d − pad] − xz) · (w[m, c, k] − wz),
 * for output element i of (N, M, O1, O2, O3); *m_out receives m. */
QK_FN qk_i64 qk_conv_sum(const void *x, int xk, const void *w, int wk, const qk_i64 *g, qk_i64 i, qk_i64 xz,
                         const void *wz, int *m_out) {
  const qk_i64 o3n = g[QK_CG_O + 2], o2n = g[QK_CG_O + 1], o1n = g[QK_CG_O];
  const qk_i64 mdim = g[QK_CG_M], cdim = g[QK_CG_C];
  const qk_i64 d1 = g[QK_CG_D], d2 = g[QK_CG_D + 1], d3 = g[QK_CG_D + 2];
  const qk_i64 k1n = g[QK_CG_K], k2n = g[QK_CG_K + 1], k3n = g[QK_CG_K + 2];
  const qk_i64 cg = cdim / g[QK_CG_GROUP], mg = mdim / g[QK_CG_GROUP];
  qk_i64 o3 = i % o3n, o2 = (i / o3n) % o2n, o1 = (i / (o3n * o2n)) % o1n;
  qk_i64 m = (i / (o3n * o2n * o1n)) % mdim, n = i / (o3n * o2n * o1n * mdim);
  qk_i64 c0 = (m / mg) * cg, c, k1, k2, k3, acc = 0;
  int bad = 0;
  qk_i64 wzm = qk_grid_int(qk_load(wz, m, qk_bytes(wk)), wk, &bad);
  *m_out = (int)m;
  for (c = 0; c < cg; c++) {
    const qk_i64 xbase = (n * cdim + c0 + c) * d1 * d2 * d3, wbase = (m * cg + c) * k1n * k2n * k3n;
    for (k1 = 0; k1 < k1n; k1++) {
      const qk_i64 p1 = o1 * g[QK_CG_S] + k1 * g[QK_CG_DIL] - g[QK_CG_PAD];
      if (p1 < 0 || p1 >= d1) continue;
      for (k2 = 0; k2 < k2n; k2++) {
        const qk_i64 p2 = o2 * g[QK_CG_S + 1] + k2 * g[QK_CG_DIL + 1] - g[QK_CG_PAD + 1];
        if (p2 < 0 || p2 >= d2) continue;
        for (k3 = 0; k3 < k3n; k3++) {
          const qk_i64 p3 = o3 * g[QK_CG_S + 2] + k3 * g[QK_CG_DIL + 2] - g[QK_CG_PAD + 2];
          qk_i64 xv, wv;
          if (p3 < 0 || p3 >= d3) continue;
          xv = qk_grid_int(qk_load(x, xbase + (p1 * d2 + p2) * d3 + p3, qk_bytes(xk)), xk, &bad);
          wv = qk_grid_int(qk_load(w, wbase + (k1 * k2n + k2) * k3n + k3, qk_bytes(wk)), wk, &bad);
          acc += (xv - xz) * (wv - wzm);
        }
      }
    }
  }
  return acc;
}

/* One convolution output element. ConvInteger (requant = 0): the exact sum modulo 2^32 as the int32
 * code (#integer-accumulation). QLinearConv (requant = 1): the sum plus B[m] ("quantized using scale
 * = input scale * weight scale and zero point as 0"), the accumulation reading (wrap: modulo 2^32),
 * rounded once to float32, qk_requant_f32 with x_scale, w_scale[m] and y_scale, then qk_q_finish
 * (round half to even, add y_zero_point, saturate: #qlconv-requant). */
QK_FN qk_u32 qk_conv1(const void *x, int xk, const void *w, int wk, const qk_i64 *g, qk_i64 i, qk_i64 xz,
                      const void *wz, const void *bias, const void *ws, float xs, float ys, int sk, qk_q_ctx yc,
                      int ok, int requant, int wrap) {
  int m;
  qk_i64 acc = qk_conv_sum(x, xk, w, wk, g, i, xz, wz, &m);
  if (!requant) return (qk_u32)((qk_u64)acc & 0xFFFFFFFFu);
  acc += qk_int_value(qk_load(bias, m, 4), qk_info(QK_INT32));
  if (wrap) acc = (qk_i64)(int)(qk_u32)((qk_u64)acc & 0xFFFFFFFFu);
  return qk_q_finish(qk_requant_f32((float)acc, xs, qk_value_in(qk_load(ws, m, qk_bytes(sk)), sk, QK_F32), ys),
                     yc, ok, QK_F32, 1, 0);
}

/* ---------------------------------------------------------------------------------------------
 * Average pools: com.microsoft QLinearAveragePool and QLinearGlobalAveragePool between their
 * dequantize and quantize launches (qconform/docs/semantics.md#ms-qlinear-pool), on float32 codes,
 * 1-D to 3-D (fewer spatial axes are size-1 axes). The host plans the windows
 * (qconform/kernels/pools.py, from the oracle's pool_geometry) into QK_PG_LEN int64 numbers.
 * ------------------------------------------------------------------------------------------- */
enum {
  QK_PG_N, QK_PG_C,
  QK_PG_D = 2,      /* input spatial sizes, 3 */
  QK_PG_K = 5,      /* kernel sizes, 3 */
  QK_PG_O = 8,      /* output sizes, 3 */
  QK_PG_S = 11,     /* strides, 3 */
  QK_PG_DIL = 14,   /* dilations, 3 */
  QK_PG_BEGIN = 17, /* stated pads at the beginning, 3 */
  QK_PG_END = 20,   /* stated pads at the end, 3 (ceil_mode's added positions lie beyond them) */
  QK_PG_LEN = 23
};
/* The status an element of the pool writes beside its value. */
enum { QK_POOL_EXACT, QK_POOL_INEXACT, QK_POOL_EMPTY };

/* Output element i of (N, C, O1, O2, O3): "the output of each pooling window is divided by the number
 * of elements (exclude pad when attribute count_include_pad is zero)". The window's input elements are
 * summed in double: wherever the text gives the window one value its terms are multiples of one power
 * of two adding up to under 2^24 of it (#qdq-sum-order), so every partial sum is exact and the sum is
 * a float32. The count is the input elements or, with include, every position within the input and
 * its stated padding. The mean is then one IEEE float32 division of two exact operands (div.rn.f32):
 * the exact quotient rounded once, as the oracle's. *status: QK_POOL_INEXACT where the sum is not a
 * float32 (an order would round it: no value the text gives), QK_POOL_EMPTY where the count is 0. */
QK_FN qk_u32 qk_avg_pool1(const void *x, const qk_i64 *g, qk_i64 i, int include, unsigned char *status) {
  const qk_i64 o3n = g[QK_PG_O + 2], o2n = g[QK_PG_O + 1], o1n = g[QK_PG_O];
  const qk_i64 d1 = g[QK_PG_D], d2 = g[QK_PG_D + 1], d3 = g[QK_PG_D + 2];
  const qk_i64 o3 = i % o3n, o2 = (i / o3n) % o2n, o1 = (i / (o3n * o2n)) % o1n, nc = i / (o3n * o2n * o1n);
  const qk_i64 base = nc * d1 * d2 * d3;
  qk_i64 k1, k2, k3, real = 0, stated = 0, count;
  double sum = 0.0;
  float s;
  for (k1 = 0; k1 < g[QK_PG_K]; k1++) {
    const qk_i64 p1 = o1 * g[QK_PG_S] + k1 * g[QK_PG_DIL] - g[QK_PG_BEGIN];
    const int in1 = p1 >= 0 && p1 < d1, st1 = p1 < d1 + g[QK_PG_END];
    for (k2 = 0; k2 < g[QK_PG_K + 1]; k2++) {
      const qk_i64 p2 = o2 * g[QK_PG_S + 1] + k2 * g[QK_PG_DIL + 1] - g[QK_PG_BEGIN + 1];
      const int in2 = p2 >= 0 && p2 < d2, st2 = p2 < d2 + g[QK_PG_END + 1];
      for (k3 = 0; k3 < g[QK_PG_K + 2]; k3++) {
        const qk_i64 p3 = o3 * g[QK_PG_S + 2] + k3 * g[QK_PG_DIL + 2] - g[QK_PG_BEGIN + 2];
        const int in3 = p3 >= 0 && p3 < d3, st3 = p3 < d3 + g[QK_PG_END + 2];
        if (in1 && in2 && in3) {
          sum += (double)qk_u2f(qk_load(x, base + (p1 * d2 + p2) * d3 + p3, 4));
          real++;
        }
        stated += st1 && st2 && st3;
      }
    }
  }
  count = include ? stated : real;
  s = (float)sum;
  *status = count == 0 ? QK_POOL_EMPTY : ((double)s == sum ? QK_POOL_EXACT : QK_POOL_INEXACT);
  return qk_f2u(count == 0 ? 0.0f : s / (float)count); /* count < 2^24 (the host checks): exact in float32 */
}

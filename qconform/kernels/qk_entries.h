/* qk_entries.h -- part 6 of qkernels.h's translation unit (qconform/kernels/__init__.py's PARTS):
 * DynamicQuantizeLinear's range, then every entry point, on the device and on the host, over the
 * element functions of the parts before it. */

/* ---------------------------------------------------------------------------------------------
 * DynamicQuantizeLinear: the range, then scale and zero point in float32 in the text's order;
 * y is then QuantizeLinear with them (qk_quantize / qk_quantize_kernel).
 * ------------------------------------------------------------------------------------------- */
/* lo = min(0, min x), hi = max(0, max x), one element at a time: strict comparisons, so a -0 never
 * replaces the +0 they start from (NaN compares false: the oracle makes a NaN input don't-care). */
QK_FN void qk_range_step(float v, float *lo, float *hi) {
  *lo = v < *lo ? v : *lo;
  *hi = v > *hi ? v : *hi;
}

/* scale = fl32(fl32(hi - lo) / (qmax - qmin)); zp = RNE(clamp(fl32(qmin - fl32(lo / scale)))), a
 * NaN zero point (0/0: a zero range) written as 0 (the oracle makes it don't-care; y's elements whose
 * quotient is +-Inf saturate whatever it is). */
QK_FN void qk_dql_compute(float lo, float hi, int qmin, int qmax, qk_u32 *scale_bits, qk_u32 *zp) {
  float s = (hi - lo) / (float)(qmax - qmin);
  float izp = (float)qmin - lo / s;
  izp = izp < (float)qmin ? (float)qmin : izp;
  izp = izp > (float)qmax ? (float)qmax : izp;
  *scale_bits = qk_f2u(s);
  *zp = (izp != izp) ? 0u : (qk_u32)(int)qk_rint_small(izp);
}

#define QK_Q_ELEM(i)                                                                          \
  do {                                                                                        \
    qk_i64 j_ = qk_param_index((i), inner, axis_len, block, s_outer, s_axis, s_inner);                        \
    qk_u32 z_ = zp ? qk_load(zp, j_, qk_bytes(ok)) : 0u;                                      \
    qk_store(y, (i), qk_bytes(ok),                                                            \
             qk_quantize1(qk_load(x, (i), qk_bytes(xk)), xk, qk_load(s, j_, qk_bytes(sk)), sk, \
                          z_, ok, prec, saturate, fnuz_inf_saturates));                       \
  } while (0)

#define QK_DQ_ELEM(i)                                                                         \
  do {                                                                                        \
    qk_i64 j_ = qk_param_index((i), inner, axis_len, block, s_outer, s_axis, s_inner);                        \
    qk_u32 z_ = zp ? qk_load(zp, j_, qk_bytes(xk)) : 0u;                                      \
    qk_store(y, (i), qk_bytes(ok),                                                            \
             qk_dequantize1(qk_load(x, (i), qk_bytes(xk)), xk, qk_load(s, j_, qk_bytes(sk)), sk, \
                            z_, ok));                                                          \
  } while (0)

#define QK_Q_ARGS                                                                             \
  const void *x, int xk, const void *s, int sk, const void *zp, int ok, int prec, int saturate, \
      int fnuz_inf_saturates, qk_i64 n, qk_i64 inner, qk_i64 axis_len, qk_i64 block,          \
      qk_i64 s_outer, qk_i64 s_axis, qk_i64 s_inner, void *y
#define QK_DQ_ARGS                                                                            \
  const void *x, int xk, const void *s, int sk, const void *zp, int ok, qk_i64 n, qk_i64 inner, \
      qk_i64 axis_len, qk_i64 block, qk_i64 s_outer, qk_i64 s_axis, qk_i64 s_inner, void *y

#define QK_MM_ARGS                                                                            \
  const void *a, int ak, const qk_i64 *a_off, const void *b, int bk, const qk_i64 *b_off,     \
      qk_i64 nb, qk_i64 mdim, qk_i64 kdim, qk_i64 ndim, const void *as_, const void *az,       \
      const void *bs_, const void *bz, int sk, const void *ys, const void *yz, int ok, int rq, \
      int wrap, int saturate, int fnuz_inf_saturates, void *y

/* Output element i of [nb, mdim, ndim]: batch t's a starts at a_off[t] ([mdim, kdim], row-major),
 * b at b_off[t] ([kdim, ndim]); a's scale and zero point are per (t, row), b's per (t, column). */
#define QK_MM_ELEM(i)                                                                         \
  do {                                                                                        \
    qk_i64 t_ = (i) / (mdim * ndim), r_ = ((i) / ndim) % mdim, c_ = (i) % ndim;               \
    qk_i64 pa_ = t_ * mdim + r_, pb_ = t_ * ndim + c_;                                        \
    qk_store(y, (i), qk_bytes(ok),                                                            \
             qk_qlmm1(a, ak, a_off[t_] + r_ * kdim, b, bk, b_off[t_] + c_, ndim, kdim,        \
                      qk_load(az, pa_, qk_bytes(ak)), qk_load(bz, pb_, qk_bytes(bk)),         \
                      qk_value_in(qk_load(as_, pa_, qk_bytes(sk)), sk, QK_F32),               \
                      qk_value_in(qk_load(bs_, pb_, qk_bytes(sk)), sk, QK_F32), ysv, yc, ok,  \
                      wrap, saturate, fnuz_inf_saturates));                                   \
  } while (0)

#define QK_MM_SETUP                                                                           \
  const float ysv = qk_value_in(qk_load(ys, 0, qk_bytes(sk)), sk, QK_F32);                    \
  const qk_q_ctx yc = qk_q_params(0u, QK_F32, qk_load(yz, 0, qk_bytes(ok)), ok, QK_F32);      \
  (void)rq

#define QK_MMI_ARGS                                                                           \
  const void *a, int ak, const qk_i64 *a_off, const void *b, int bk, const qk_i64 *b_off, qk_i64 nb, \
      qk_i64 mdim, qk_i64 kdim, qk_i64 ndim, const void *az, const void *bz, void *y

/* MatMulInteger's output element i of [nb, mdim, ndim]: the operands as QK_MM_ELEM reads them; y is int32. */
#define QK_MMI_ELEM(i)                                                                        \
  do {                                                                                        \
    qk_i64 t_ = (i) / (mdim * ndim), r_ = ((i) / ndim) % mdim, c_ = (i) % ndim;               \
    qk_store(y, (i), 4,                                                                       \
             qk_mmint1(a, ak, a_off[t_] + r_ * kdim, b, bk, b_off[t_] + c_, ndim, kdim,       \
                       qk_load(az, t_ * mdim + r_, qk_bytes(ak)),                             \
                       qk_load(bz, t_ * ndim + c_, qk_bytes(bk))));                           \
  } while (0)

/* QGemm: a [mdim, kdim] (A' planned on the host, transA applied), b [kdim, ndim] (B'), c int32 codes
 * [mdim, ndim] (zeros without C), alpha / as_ / az / ys / yz one code each, bs_ and bz ndim codes
 * (per column or broadcast), ok the output kind (QK_F32 without y_scale, requant = 0). */
#define QK_QGEMM_ARGS                                                                         \
  const void *a, int ak, const void *b, int bk, qk_i64 mdim, qk_i64 kdim, qk_i64 ndim, const void *c, \
      const void *alpha, const void *as_, const void *az, const void *bs_, const void *bz, const void *ys, \
      const void *yz, int ok, int requant, void *y

#define QK_QGEMM_SETUP                                                                        \
  const float asv = qk_u2f(qk_load(alpha, 0, 4)) * qk_u2f(qk_load(as_, 0, 4));               \
  const float ysv = requant ? qk_u2f(qk_load(ys, 0, 4)) : 1.0f;                                \
  const qk_q_ctx yc = qk_q_params(0u, QK_F32, requant ? qk_load(yz, 0, qk_bytes(ok)) : 0u, ok, QK_F32); \
  const qk_u32 azv = qk_load(az, 0, qk_bytes(ak))

#define QK_QGEMM_ELEM(i)                                                                      \
  do {                                                                                        \
    qk_i64 r_ = (i) / ndim, c_ = (i) % ndim;                                                  \
    qk_store(y, (i), qk_bytes(ok),                                                            \
             qk_qgemm1(a, ak, r_ * kdim, b, bk, c_, ndim, kdim, azv, qk_load(bz, c_, qk_bytes(bk)), \
                       qk_int_value(qk_load(c, (i), 4), qk_info(QK_INT32)), asv,              \
                       qk_u2f(qk_load(bs_, c_, 4)), ysv, yc, ok, requant));                   \
  } while (0)

/* MatMulIntegerToFloat / DynamicQuantizeMatMul: the operands as QK_MMI_ELEM reads them; az one code
 * (azs = 0) or kdim codes (azs = 1); as_ one code of kind pk, bs_ per (batch, column), bias ndim codes of
 * kind pk (has_bias = 0: none); y codes of kind pk. */
#define QK_SMM_ARGS                                                                           \
  const void *a, int ak, const qk_i64 *a_off, const void *b, int bk, const qk_i64 *b_off, qk_i64 nb, \
      qk_i64 mdim, qk_i64 kdim, qk_i64 ndim, const void *az, int azs, const void *bz, const void *as_, \
      const void *bs_, const void *bias, int has_bias, int pk, void *y

#define QK_SMM_ELEM(i)                                                                        \
  do {                                                                                        \
    qk_i64 t_ = (i) / (mdim * ndim), r_ = ((i) / ndim) % mdim, c_ = (i) % ndim;               \
    qk_store(y, (i), qk_bytes(pk),                                                            \
             qk_scaled_mm1(a, ak, a_off[t_] + r_ * kdim, b, bk, b_off[t_] + c_, ndim, kdim, az, azs, \
                           qk_load(bz, t_ * ndim + c_, qk_bytes(bk)),                         \
                           qk_value_f64(qk_load(as_, 0, qk_bytes(pk)), pk),                   \
                           qk_value_f64(qk_load(bs_, t_ * ndim + c_, qk_bytes(pk)), pk), has_bias, \
                           has_bias ? qk_value_f64(qk_load(bias, c_, qk_bytes(pk)), pk) : 0.0, pk)); \
  } while (0)

/* QLinearAdd: a_off / b_off the element each output element reads (broadcast planned on the host);
 * az, bz, yz one code each, as_, bs_, cs_ one float32 code each; tk the kind of A and B. */
#define QK_QLADD_ARGS                                                                         \
  const void *a, const qk_i64 *a_off, const void *b, const qk_i64 *b_off, int tk, const void *az, \
      const void *bz, const void *as_, const void *bs_, const void *cs_, const void *yz, int ok, qk_i64 n, void *y

#define QK_QLADD_SETUP                                                                        \
  qk_i64 ma_, mb_, mc_;                                                                       \
  int ea_, eb_, ec_;                                                                          \
  const qk_i64 azv = qk_int_value(qk_load(az, 0, 1), qk_info(tk));                            \
  const qk_i64 bzv = qk_int_value(qk_load(bz, 0, 1), qk_info(tk));                            \
  const qk_q_ctx yc = qk_q_params(0u, QK_F32, qk_load(yz, 0, qk_bytes(ok)), ok, QK_F32);      \
  qk_f32_parts(qk_load(as_, 0, 4), &ma_, &ea_);                                               \
  qk_f32_parts(qk_load(bs_, 0, 4), &mb_, &eb_);                                               \
  qk_f32_parts(qk_load(cs_, 0, 4), &mc_, &ec_)

#define QK_QLADD_ELEM(i)                                                                      \
  qk_store(y, (i), qk_bytes(ok),                                                              \
           qk_qladd1(qk_load(a, a_off[i], 1), qk_load(b, b_off[i], 1), tk, azv, bzv, ma_, ea_, mb_, eb_, \
                     mc_, ec_, yc, ok))

/* MatMulNBits: a [rows, kdim] codes of kind ak, b [ndim, rowbytes] packed, s [ndim, kb] of kind ak, z as
 * zmode says (packed rows of zrow bytes, or [ndim, kb] of kind ak), bias ndim codes; y [rows, ndim]. */
#define QK_NBITS_ARGS                                                                         \
  const void *a, int ak, const void *b, qk_i64 rowbytes, const void *s, const void *z, int zmode, qk_i64 zrow, \
      const void *bias, int has_bias, qk_i64 rows, qk_i64 kdim, qk_i64 ndim, int bits, qk_i64 bs, qk_i64 kb, void *y

#define QK_NBITS_ELEM(i)                                                                      \
  do {                                                                                        \
    qk_i64 r_ = (i) / ndim, c_ = (i) % ndim;                                                  \
    qk_store(y, (i), qk_bytes(ak),                                                            \
             qk_nbits1(a, ak, r_ * kdim, (const unsigned char *)b + c_ * rowbytes, s, c_ * kb, z, zmode, zrow, \
                       c_, kdim, bits, bs, bias, has_bias));                                  \
  } while (0)

/* GatherBlockQuantized: src and sidx one int64 per output element (the gather and the blocks planned on
 * the host; src -1: an index out of range). */
#define QK_GBQ_ARGS                                                                           \
  const void *data, int dk, int pbits, qk_i64 last, qk_i64 rowbytes, const qk_i64 *src, const qk_i64 *sidx, \
      const void *s, const void *z, int zmode, qk_i64 dz, int ok, qk_i64 n, void *y

#define QK_GBQ_ELEM(i)                                                                        \
  qk_store(y, (i), qk_bytes(ok), qk_gbq1(data, dk, pbits, last, rowbytes, src[i], sidx[i], s, z, zmode, dz, ok))

/* LeakyRelu between QLinearLeakyRelu's dequantize and quantize launches (qconform/docs/semantics.md#ms-qlinear-composed,
 * the graph oracle's float op): x < 0 ? fl32(alpha * x) : x on float32 codes, alpha one float32 code. */
#define QK_LEAKY_ARGS const void *x, const void *alpha, qk_i64 n, void *y
#define QK_LEAKY_ELEM(i)                                                                      \
  do {                                                                                        \
    float v_ = qk_u2f(qk_load(x, (i), 4));                                                    \
    qk_store(y, (i), 4, qk_f2u(v_ < 0.0f ? qk_u2f(qk_load(alpha, 0, 4)) * v_ : v_));          \
  } while (0)

/* Sigmoid between QLinearSigmoid's dequantize and quantize launches, on float32 codes: y and one status
 * byte per element (QK_ROUNDING_*). */
#define QK_SIGMOID_ARGS const void *x, qk_i64 n, void *y, void *status
#define QK_SIGMOID_ELEM(i) \
  qk_store(y, (i), 4, qk_sigmoid1(qk_load(x, (i), 4), (unsigned char *)status + (i)))

/* Softmax along rows of d float32 codes (QLinearSoftmax: dequantize, this, quantize; the rows laid out on the
 * host), n = rows * d elements: y and one status byte per element (QK_ROUNDING_*). */
#define QK_SOFTMAX_ARGS const void *x, qk_i64 d, qk_i64 n, void *y, void *status
#define QK_SOFTMAX_ELEM(i) \
  qk_store(y, (i), 4, qk_softmax1(x, (i) / d, d, (i) % d, (unsigned char *)status + (i)))

/* An average pool: geom holds QK_PG_LEN numbers; x float32 codes (N, C, D1, D2, D3), y float32 codes and
 * status one byte per output element (N, C, O1, O2, O3). */
#define QK_POOL_ARGS const void *x, const qk_i64 *geom, int include, qk_i64 n, void *y, void *status
#define QK_POOL_ELEM(i) \
  qk_store(y, (i), 4, qk_avg_pool1(x, geom, (i), include, (unsigned char *)status + (i)))

/* A convolution: geom holds QK_CG_LEN numbers; xz, xs, ys, yz one code each, wz, ws and bias (int32
 * codes) M each; n output elements. ConvInteger passes requant = 0 and ok = QK_INT32 (xs, ws, ys, yz,
 * bias are then not read). */
#define QK_CONV_ARGS                                                                          \
  const void *x, int xk, const void *w, int wk, const qk_i64 *geom, const void *xz, const void *wz, \
      const void *bias, const void *ws, const void *xs, const void *ys, int sk, const void *yz, int ok, \
      int requant, int wrap, qk_i64 n, void *y

#define QK_CONV_SETUP                                                                         \
  int bad_ = 0;                                                                               \
  const qk_i64 xzv = qk_grid_int(qk_load(xz, 0, qk_bytes(xk)), xk, &bad_);                    \
  const float xsv = requant ? qk_value_in(qk_load(xs, 0, qk_bytes(sk)), sk, QK_F32) : 0.0f;   \
  const float ysv = requant ? qk_value_in(qk_load(ys, 0, qk_bytes(sk)), sk, QK_F32) : 1.0f;   \
  const qk_q_ctx yc = qk_q_params(0u, QK_F32, requant ? qk_load(yz, 0, qk_bytes(ok)) : 0u, ok, QK_F32)

#define QK_CONV_ELEM(i)                                                                       \
  qk_store(y, (i), qk_bytes(ok),                                                              \
           qk_conv1(x, xk, w, wk, geom, (i), xzv, wz, bias, ws, xsv, ysv, sk, yc, ok, requant, wrap))

/* Every entry point but quantize (the host specialises its hot signatures) and dql_params (a reduction),
 * once: its name, parameter list, per-launch setup, number of output elements and element function.
 * The device and the host below expand this one table, in this order. */
#define QK_NO_SETUP (void)0
#define QK_ENTRIES(X)                                                        \
  X(dequantize, QK_DQ_ARGS, QK_NO_SETUP, n, QK_DQ_ELEM)                      \
  X(qlinear_matmul, QK_MM_ARGS, QK_MM_SETUP, nb * mdim * ndim, QK_MM_ELEM)   \
  X(matmul_integer, QK_MMI_ARGS, QK_NO_SETUP, nb * mdim * ndim, QK_MMI_ELEM) \
  X(qgemm, QK_QGEMM_ARGS, QK_QGEMM_SETUP, mdim * ndim, QK_QGEMM_ELEM)        \
  X(scaled_matmul, QK_SMM_ARGS, QK_NO_SETUP, nb * mdim * ndim, QK_SMM_ELEM)  \
  X(qlinear_add, QK_QLADD_ARGS, QK_QLADD_SETUP, n, QK_QLADD_ELEM)            \
  X(matmul_nbits, QK_NBITS_ARGS, QK_NO_SETUP, rows * ndim, QK_NBITS_ELEM)    \
  X(gather_block_quantized, QK_GBQ_ARGS, QK_NO_SETUP, n, QK_GBQ_ELEM)        \
  X(leaky_relu, QK_LEAKY_ARGS, QK_NO_SETUP, n, QK_LEAKY_ELEM)                \
  X(sigmoid, QK_SIGMOID_ARGS, QK_NO_SETUP, n, QK_SIGMOID_ELEM)               \
  X(softmax, QK_SOFTMAX_ARGS, QK_NO_SETUP, n, QK_SOFTMAX_ELEM)               \
  X(avg_pool, QK_POOL_ARGS, QK_NO_SETUP, n, QK_POOL_ELEM)                    \
  X(conv, QK_CONV_ARGS, QK_CONV_SETUP, n, QK_CONV_ELEM)

#if defined(__CUDACC__)
/* ---- device entry points (grid-stride loops) ---------------------------------------------- */
/* The loop of every device entry point but dql_params: one output element i per step of a grid-stride loop. */
#define QK_GRID_STRIDE(i, count) \
  for (qk_i64 i = (qk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < (count); i += (qk_i64)gridDim.x * blockDim.x)

extern "C" __global__ void qk_quantize_kernel(QK_Q_ARGS) {
  QK_GRID_STRIDE(i, n)
    QK_Q_ELEM(i);
}

#define QK_DEVICE_ENTRY(name, ARGS, SETUP, count, ELEM)                                        \
  extern "C" __global__ void qk_##name##_kernel(ARGS) {                                       \
    SETUP;                                                                                    \
    QK_GRID_STRIDE(i, count)                                                                  \
      ELEM(i);                                                                                \
  }
QK_ENTRIES(QK_DEVICE_ENTRY)

/* One block: every thread reduces its stride of x, the block reduces the threads' ranges, and
 * thread 0 writes y_scale (float32 bits) and y_zero_point. blockDim.x must be QK_DQL_THREADS. */
#define QK_DQL_THREADS 256
extern "C" __global__ void qk_dql_params_kernel(const void *x, qk_i64 n, int qmin, int qmax, void *scale_out,
                                                void *zp_out) {
  __shared__ float lo_s[QK_DQL_THREADS], hi_s[QK_DQL_THREADS];
  float lo = 0.0f, hi = 0.0f;
  for (qk_i64 i = threadIdx.x; i < n; i += blockDim.x) qk_range_step(qk_u2f(((const qk_u32 *)x)[i]), &lo, &hi);
  lo_s[threadIdx.x] = lo;
  hi_s[threadIdx.x] = hi;
  __syncthreads();
  for (int w = QK_DQL_THREADS / 2; w > 0; w /= 2) {
    if ((int)threadIdx.x < w) {
      qk_range_step(lo_s[threadIdx.x + w], &lo_s[threadIdx.x], &hi_s[threadIdx.x]);
      qk_range_step(hi_s[threadIdx.x + w], &lo_s[threadIdx.x], &hi_s[threadIdx.x]);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    qk_u32 sb, zp;
    qk_dql_compute(lo_s[0], hi_s[0], qmin, qmax, &sb, &zp);
    *(qk_u32 *)scale_out = sb;
    *(unsigned char *)zp_out = (unsigned char)zp;
  }
}
#else
/* ---- host entry points ---------------------------------------------------------------------
 * The generic loop, plus the same loop specialised for a few hot per-tensor signatures: the
 * element function is the same one, only its kind arguments become compile-time constants.
 * On x86-64 gcc also clones those loops for AVX2 and AVX-512 (picked at load time by the CPU):
 * wider vectors of the same IEEE operations (vdivps is correctly rounded like divss; no FMA is
 * formed, -ffp-contract=off), so every clone gives the same bits; the sweeps run whichever clone
 * the machine picks. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(QK_NO_CLONES)
#  define QK_HOST_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#  define QK_HOST_CLONES
#endif
#define QK_SPECIAL(XK, SK, OK)                                                                \
  QK_HOST_CLONES                                                                              \
  static void qk_quantize_##XK##_##SK##_##OK(const void *x, const void *s, const void *zp,    \
                                               int prec, int saturate, int fnuz_inf_saturates,  \
                                               qk_i64 n, void *y) {                           \
    const qk_q_ctx c = qk_q_params(qk_load(s, 0, qk_bytes(SK)), SK,                            \
                                   zp ? qk_load(zp, 0, qk_bytes(OK)) : 0u, OK, QK_F32);       \
    (void)prec;                                                                               \
    for (qk_i64 i = 0; i < n; i++)                                                            \
      qk_store(y, i, qk_bytes(OK),                                                            \
               qk_q_apply(qk_load(x, i, qk_bytes(XK)), XK, c, OK, QK_F32, saturate,           \
                          fnuz_inf_saturates));                                               \
  }
#define QK_HOT(X)                  \
  X(QK_F32, QK_F32, QK_INT8)       \
  X(QK_F32, QK_F32, QK_UINT8)      \
  X(QK_F32, QK_F32, QK_F8E4M3FN)   \
  X(QK_F32, QK_F32, QK_F8E4M3FNUZ) \
  X(QK_F32, QK_F32, QK_F8E5M2)     \
  X(QK_F32, QK_F32, QK_F8E5M2FNUZ)
QK_HOT(QK_SPECIAL)

int qk_quantize(QK_Q_ARGS) {
  if (axis_len == 0 && prec == QK_F32) {
#define QK_DISPATCH(XK, SK, OK)                                                             \
    if (xk == XK && sk == SK && ok == OK) {                                                 \
      qk_quantize_##XK##_##SK##_##OK(x, s, zp, prec, saturate, fnuz_inf_saturates, n, y);   \
      return 0;                                                                             \
    }
    QK_HOT(QK_DISPATCH)
#undef QK_DISPATCH
  }
  for (qk_i64 i = 0; i < n; i++) QK_Q_ELEM(i);
  return 0;
}

#define QK_HOST_ENTRY(name, ARGS, SETUP, count, ELEM)                                          \
  int qk_##name(ARGS) {                                                                       \
    SETUP;                                                                                    \
    for (qk_i64 i = 0; i < (count); i++) ELEM(i);                                             \
    return 0;                                                                                 \
  }
QK_ENTRIES(QK_HOST_ENTRY)

int qk_dql_params(const void *x, qk_i64 n, int qmin, int qmax, void *scale_out, void *zp_out) {
  float lo = 0.0f, hi = 0.0f;
  qk_u32 sb, zp;
  for (qk_i64 i = 0; i < n; i++) qk_range_step(qk_u2f(((const qk_u32 *)x)[i]), &lo, &hi);
  qk_dql_compute(lo, hi, qmin, qmax, &sb, &zp);
  *(qk_u32 *)scale_out = sb;
  *(unsigned char *)zp_out = (unsigned char)zp;
  return 0;
}

/* The kind table as the kernel sees it (tests compare it with qconform/dtypes.py). */
int qk_describe_kind(int kind, int *out7) {
  qk_kind_info f = qk_info(kind);
  out7[0] = f.style; out7[1] = f.width; out7[2] = f.ebits; out7[3] = f.mbits;
  out7[4] = f.bias; out7[5] = f.is_signed; out7[6] = (int)f.max_code;
  return f.style < 0 ? -1 : 0;
}

/* The double sigmoid before its float32 rounding (tests check its error bound). */
double qk_sigmoid_f64_export(double x) { return 1.0 / (1.0 + qk_exp_f64(-x)); }

/* One element through each entry point's element function (used by tests of the specials). */
qk_u32 qk_encode_f32_export(qk_u32 xb, int kind, int saturate, int fnuz_inf_saturates) {
  return qk_encode_f32(xb, qk_info(kind), saturate, fnuz_inf_saturates);
}
#endif

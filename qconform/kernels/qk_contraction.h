/* qk_contraction.h -- part 2 of qkernels.h's translation unit (qconform/kernels/__init__.py's PARTS):
 * QLinearMatMul, MatMulInteger, QGemm, the scaled matmuls and QLinearAdd's exact sum. */

/* ---------------------------------------------------------------------------------------------
 * QLinearMatMul: exact accumulation, then the requantisation the oracle reads first.
 *
 * Every operand is an integer on its kind's grid: an integer kind's value itself, a float8 value
 * times 2^g (g = mbits + bias - 1, so the smallest subnormal is 1). a - a_zero_point fits 35 bits,
 * a product 70, a sum of K products a few more: the accumulator is 128-bit two's complement, built
 * from two 64-bit halves (portable C, no __int128 on either side).
 * ------------------------------------------------------------------------------------------- */
typedef struct { qk_u64 hi, lo; } qk_i128;

QK_FN int qk_grid_exp(int kind) {
  qk_kind_info f = qk_info(kind);
  return f.style == QK_STYLE_INT ? 0 : f.mbits + f.bias - 1;
}

/* The value of a code times 2^qk_grid_exp(kind), exact; *bad is set for NaN and +-Inf. */
QK_FN qk_i64 qk_grid_int(qk_u32 code, int kind, int *bad) {
  qk_kind_info f = qk_info(kind);
  qk_u32 mag, e, mant;
  qk_i64 v;
  if (f.style == QK_STYLE_INT) return qk_int_value(code, f);
  code &= (1u << f.width) - 1u;
  mag = code & ((1u << (f.width - 1)) - 1u);
  e = mag >> f.mbits;
  mant = mag & ((1u << f.mbits) - 1u);
  if ((f.style == QK_STYLE_FNUZ && code == (1u << (f.width - 1))) ||
      (f.style == QK_STYLE_FN && mag == (1u << (f.width - 1)) - 1u) ||
      (f.style == QK_STYLE_IEEE && e == (1u << f.ebits) - 1u)) {
    *bad = 1;
    return 0;
  }
  v = (qk_i64)(e ? (mant | (1u << f.mbits)) : mant) << (e ? e - 1u : 0u);
  return (code >> (f.width - 1)) ? -v : v;
}

QK_FN qk_i128 qk_i128_add(qk_i128 a, qk_i128 b) {
  qk_i128 r;
  r.lo = a.lo + b.lo;
  r.hi = a.hi + b.hi + (r.lo < a.lo);
  return r;
}

QK_FN qk_i128 qk_i128_neg(qk_i128 a) {
  qk_i128 r;
  r.lo = ~a.lo + 1u;
  r.hi = ~a.hi + (r.lo == 0u);
  return r;
}

/* a * b exactly (|a|, |b| < 2^63): 32-bit halves of the magnitudes, four partial products. */
QK_FN qk_i128 qk_i128_mul(qk_i64 a, qk_i64 b) {
  qk_u64 x = (qk_u64)(a < 0 ? -a : a), y = (qk_u64)(b < 0 ? -b : b);
  qk_u64 x0 = x & 0xFFFFFFFFu, x1 = x >> 32, y0 = y & 0xFFFFFFFFu, y1 = y >> 32;
  qk_u64 p00 = x0 * y0, p01 = x0 * y1, p10 = x1 * y0, p11 = x1 * y1;
  qk_u64 mid = (p00 >> 32) + (p01 & 0xFFFFFFFFu) + (p10 & 0xFFFFFFFFu);
  qk_i128 r;
  r.lo = (mid << 32) | (p00 & 0xFFFFFFFFu);
  r.hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
  return (a < 0) != (b < 0) ? qk_i128_neg(r) : r;
}

/* The low 32 bits as a signed int32: "accumulation may overflow if and only if in 32 bits". */
QK_FN qk_i128 qk_i128_wrap32(qk_i128 a) {
  qk_i128 r;
  qk_i64 v = (qk_i64)(int)(qk_u32)(a.lo & 0xFFFFFFFFu);
  r.lo = (qk_u64)v;
  r.hi = v < 0 ? ~(qk_u64)0 : 0u;
  return r;
}

QK_FN double qk_pow2(int k) { /* 2^k, -1022 <= k <= 1023 */
#if defined(__CUDA_ARCH__)
  return __longlong_as_double((long long)((qk_u64)(k + 1023) << 52));
#else
  qk_u64 u = (qk_u64)(k + 1023) << 52; double d; memcpy(&d, &u, sizeof d); return d;
#endif
}

/* a * 2^-e rounded once to double (RNE). A magnitude of 65+ bits keeps its top 64 bits with
 * every lower bit ORed into the last one (a sticky bit far below double's rounding position), so
 * the one u64 -> double conversion rounds as the exact value would; the power-of-two scaling is
 * exact (|a| * 2^-e stays far inside double's normal range). */
QK_FN double qk_i128_to_f64(qk_i128 a, int e) {
  int neg = (a.hi >> 63) != 0u;
  qk_i128 m = neg ? qk_i128_neg(a) : a;
  double d;
  if (m.hi == 0u) {
    d = (double)m.lo;
  } else {
    int s = qk_clz64(m.hi);
    qk_u64 top = s ? (m.hi << s) | (m.lo >> (64 - s)) : m.hi;
    qk_u64 rest = s ? m.lo << s : m.lo;
    d = (double)(top | (rest != 0u)) * qk_pow2(64 - s);
  }
  d = d * qk_pow2(-e);
  return neg ? -d : d;
}

/* Requantisation readings the kernel implements (the plan asks the oracle which one applies). */
enum { QK_RQ_MULTIPLIER_F32 };

/* The exact sum over k of (a[k] - az) * (b[k] - bz), a[k] = a[a0 + k], b[k] = b[b0 + k * bstride],
 * each operand on its kind's grid (the sum is then scaled by 2^-(qk_grid_exp(ak) + qk_grid_exp(bk))).
 * Operands that are NaN or +-Inf add nothing (the oracle makes such elements don't-care). */
QK_FN qk_i128 qk_dot(const void *a, int ak, qk_i64 a0, const void *b, int bk, qk_i64 b0, qk_i64 bstride,
                     qk_i64 kdim, qk_u32 azb, qk_u32 bzb) {
  int bad = 0;
  qk_i64 az = qk_grid_int(azb, ak, &bad), bz = qk_grid_int(bzb, bk, &bad);
  qk_i128 acc;
  qk_i64 kk;
  acc.hi = acc.lo = 0u;
  for (kk = 0; kk < kdim; kk++) {
    int bad_k = bad;
    qk_i64 da = qk_grid_int(qk_load(a, a0 + kk, qk_bytes(ak)), ak, &bad_k) - az;
    qk_i64 db = qk_grid_int(qk_load(b, b0 + kk * bstride, qk_bytes(bk)), bk, &bad_k) - bz;
    if (!bad_k) acc = qk_i128_add(acc, qk_i128_mul(da, db));
  }
  return acc;
}

/* The requantisation reading multiplier-float32 (qconform/docs/semantics.md#qlmm-requant), shared by
 * QLinearMatMul and QLinearConv: m = fl32(fl32(sa * sb) / sy), v = fl32(acc_f * m), where acc_f is
 * the accumulator already rounded once to float32. */
QK_FN float qk_requant_f32(float acc_f, float sa, float sb, float sy) {
  float m = (sa * sb) / sy;
  return acc_f * m;
}

/* One QLinearMatMul output element: qk_dot, the accumulation reading (wrap: modulo 2^32 into
 * int32), qk_requant_f32, and v through qk_q_finish (integer: round, add the zero point, saturate;
 * float8: + zp in float32, Cast table). */
QK_FN qk_u32 qk_qlmm1(const void *a, int ak, qk_i64 a0, const void *b, int bk, qk_i64 b0, qk_i64 bstride,
                      qk_i64 kdim, qk_u32 azb, qk_u32 bzb, float as, float bs, float ys, qk_q_ctx yc, int ok,
                      int wrap, int saturate, int fnuz_inf_saturates) {
  qk_i128 acc = qk_dot(a, ak, a0, b, bk, b0, bstride, kdim, azb, bzb);
  float v;
  if (wrap) acc = qk_i128_wrap32(acc);
  v = qk_requant_f32((float)qk_i128_to_f64(acc, qk_grid_exp(ak) + qk_grid_exp(bk)), as, bs, ys);
  return qk_q_finish(v, yc, ok, QK_F32, saturate, fnuz_inf_saturates);
}

/* One MatMulInteger output element (qconform/docs/semantics.md#integer-accumulation): the exact sum
 * reduced modulo 2^32 into int32, written as the int32 code (its low 32 bits). Integer operands
 * only, so the grid exponents are 0. */
QK_FN qk_u32 qk_mmint1(const void *a, int ak, qk_i64 a0, const void *b, int bk, qk_i64 b0, qk_i64 bstride,
                       qk_i64 kdim, qk_u32 azb, qk_u32 bzb) {
  return (qk_u32)(qk_dot(a, ak, a0, b, bk, b0, bstride, kdim, azb, bzb).lo & 0xFFFFFFFFu);
}

/* One com.microsoft QGemm output element (qconform/docs/semantics.md#ms-qgemm): the exact sum of
 * (A'[r, k] - a_zp) * (B'[k, c] - b_zp[c]) plus C[r, c] (int32, "accumulated" with the product),
 * scaled with alpha * a_scale (exact in float32: the oracle refuses a case where it is not) in
 * multiplier-float32 (qk_requant_f32). With y (requant = 1): y_scale, round half to even, y_zero_point,
 * saturation (qk_q_finish). Without (requant = 0): Y float32 = fl32(fl32(acc) * fl32(alpha*a_s * b_s)),
 * the multiplier-float32 chain with y_scale = 1 and no zero point added (a -0 stays -0). */
QK_FN qk_u32 qk_qgemm1(const void *a, int ak, qk_i64 a0, const void *b, int bk, qk_i64 b0, qk_i64 bstride,
                       qk_i64 kdim, qk_u32 azb, qk_u32 bzb, qk_i64 cv, float as, float bs, float ys, qk_q_ctx yc,
                       int ok, int requant) {
  qk_i128 acc = qk_dot(a, ak, a0, b, bk, b0, bstride, kdim, azb, bzb), c;
  float v;
  c.lo = (qk_u64)cv;
  c.hi = cv < 0 ? ~(qk_u64)0 : 0u;
  acc = qk_i128_add(acc, c);
  v = qk_requant_f32((float)qk_i128_to_f64(acc, 0), as, bs, requant ? ys : 1.0f);
  return requant ? qk_q_finish(v, yc, ok, QK_F32, 1, 0) : qk_f2u(v);
}

/* x rounded once to float kind k (QK_F32, QK_F16, QK_BF16), ties to even, overflow to +-Inf, as a
 * double (x exact in double). */
QK_FN double qk_fl(double x, int k) {
  return qk_value_f64(qk_encode_f64(x, qk_info(k), 0, 0), k);
}

/* One output element of com.microsoft MatMulIntegerToFloat / DynamicQuantizeMatMul in the reading
 * scales-multiplied-first (qconform/docs/semantics.md#ms-scale-products, the oracle's first): acc the
 * exact sum of (a[k] - az[k]) * (b[k] - bz) (a's zero point per tensor, azs = 0, or per k, azs = 1; the
 * oracle refuses sums beyond int32, so int64 holds it), then in the output kind pk: fl(acc),
 * fl(a_scale * b_scale), fl(fl(acc) * that + 0) (the product "+ 0", so an exact zero is +0), and with a
 * bias fl(scaled + bias). Each step's double value is exact (factors of at most 24 bits, a sum of two
 * values of pk: double rounding is innocuous, 53 >= 2 * 24 + 2). */
QK_FN qk_u32 qk_scaled_mm1(const void *a, int ak, qk_i64 a0, const void *b, int bk, qk_i64 b0, qk_i64 bstride,
                           qk_i64 kdim, const void *az, int azs, qk_u32 bzb, double as, double bs, int has_bias,
                           double bias, int pk) {
  int bad = 0;
  qk_i64 bz = qk_grid_int(bzb, bk, &bad), acc = 0, kk;
  double v;
  for (kk = 0; kk < kdim; kk++) {
    qk_i64 da = qk_grid_int(qk_load(a, a0 + kk, qk_bytes(ak)), ak, &bad) -
                qk_grid_int(qk_load(az, azs ? kk : 0, qk_bytes(ak)), ak, &bad);
    acc += da * (qk_grid_int(qk_load(b, b0 + kk * bstride, qk_bytes(bk)), bk, &bad) - bz);
  }
  v = qk_fl(qk_fl((double)acc, pk) * qk_fl(as * bs, pk) + 0.0, pk);
  if (has_bias) v = qk_fl(v + bias, pk);
  return qk_encode_f64(v, qk_info(pk), 0, 0);
}

/* ---------------------------------------------------------------------------------------------
 * com.microsoft QLinearAdd, reading exact-rational (qconform/docs/semantics.md#ms-qlinear-add, the
 * oracle's first): C = RNE((A_s·(A − A_zp) + B_s·(B − B_zp)) / C_s) + C_zp, saturated, the quotient
 * rounded once from its exact value. Every float32 scale is m·2^e (m a signed integer of 24 bits),
 * so the value is N·2^P / m_c with N an integer held in 128 bits; the rounding reads N's bits.
 * ------------------------------------------------------------------------------------------- */
QK_FN void qk_f32_parts(qk_u32 bits, qk_i64 *m, int *e) {
  qk_u32 ef = (bits >> 23) & 0xFFu, mant = bits & 0x7FFFFFu;
  qk_i64 v = ef ? (qk_i64)(mant | 0x800000u) : (qk_i64)mant;
  *e = ef ? (int)ef - 150 : -149;
  *m = (bits >> 31) ? -v : v;
}

QK_FN qk_i128 qk_i128_shl(qk_i128 a, int s) { /* 0 <= s < 128, no overflow */
  qk_i128 r;
  if (s == 0) return a;
  if (s >= 64) { r.hi = a.lo << (s - 64); r.lo = 0u; return r; }
  r.hi = (a.hi << s) | (a.lo >> (64 - s));
  r.lo = a.lo << s;
  return r;
}

QK_FN int qk_u128_bitlen(qk_i128 a) { /* a >= 0 */
  return a.hi ? 128 - qk_clz64(a.hi) : (a.lo ? 64 - qk_clz64(a.lo) : 0);
}

QK_FN int qk_u128_bit(qk_i128 a, int i) { /* bit i of a >= 0; 0 beyond 127 */
  return i >= 128 ? 0 : (int)(((i >= 64 ? a.hi >> (i - 64) : a.lo >> i)) & 1u);
}

QK_FN int qk_u128_low_nonzero(qk_i128 a, int i) { /* whether any bit below i is set */
  if (i <= 0) return 0;
  if (i >= 128) return (a.hi | a.lo) != 0u;
  if (i >= 64) return a.lo != 0u || (i > 64 && (a.hi & ((~(qk_u64)0) >> (128 - i))) != 0u);
  return (a.lo & ((~(qk_u64)0) >> (64 - i))) != 0u;
}

/* RNE(N · 2^p / mc) for mc != 0, clamped to +-2^40 (every such value saturates an 8-bit output alike). */
QK_FN double qk_round_ratio(qk_i128 n, int p, qk_i64 mc) {
  int neg = ((n.hi >> 63) != 0u) != (mc < 0), len, up, tie;
  qk_i128 u = (n.hi >> 63) ? qk_i128_neg(n) : n;
  qk_u64 d = (qk_u64)(mc < 0 ? -mc : mc), t, qi, r;
  const double huge = 1099511627776.0;
  len = qk_u128_bitlen(u);
  if (len == 0) return 0.0;
  if (len + p > 63) return neg ? -huge : huge; /* |q| >= 2^62 / 2^24 */
  if (p >= 0) {
    t = qk_i128_shl(u, p).lo;
    qi = t / d; r = t % d;
    up = 2u * r > d; tie = 2u * r == d;
  } else {
    int s = -p, half = qk_u128_bit(u, s - 1), sticky = qk_u128_low_nonzero(u, s - 1);
    qk_u64 diff;
    t = s >= 128 ? 0u : (s >= 64 ? u.hi >> (s - 64) : ((u.lo >> s) | (s ? u.hi << (64 - s) : 0u)));
    qi = t / d; r = t % d;
    /* exact = qi + (r + F / 2^s) / d, F = u mod 2^s: compare 2r + 2F/2^s with d */
    if (2u * r >= d) { up = 2u * r > d || half || sticky; tie = 2u * r == d && !half && !sticky; }
    else {
      diff = d - 2u * r;
      up = diff == 1u && half && sticky;
      tie = diff == 1u && half && !sticky;
    }
  }
  if (tie) up = (int)(qi & 1u);
  qi += (qk_u64)up;
  return neg ? -(double)qi : (double)qi;
}

/* The exact sum X·2^ea + Y·2^eb as N·2^e0 (|X|, |Y| < 2^33): exact where the exponents differ by
 * at most 90; beyond, the smaller term (less than half a unit of the larger's 58 bits) becomes one
 * unit of sticky of the same sign one bit further down, which keeps every rounding of N·2^p/mc. */
QK_FN qk_i128 qk_exact_sum(qk_i64 x, int ea, qk_i64 y, int eb, int *e0) {
  qk_i128 hi, lo;
  qk_i64 xh = x, xl = y;
  int eh = ea, el = eb, d;
  if (x == 0 || (y != 0 && eb > ea)) { xh = y; xl = x; eh = eb; el = ea; }
  hi.lo = (qk_u64)xh; hi.hi = xh < 0 ? ~(qk_u64)0 : 0u;
  if (xl == 0) { *e0 = eh; return hi; }
  d = eh - el;
  if (d <= 90) {
    lo.lo = (qk_u64)xl; lo.hi = xl < 0 ? ~(qk_u64)0 : 0u;
    *e0 = el;
    return qk_i128_add(qk_i128_shl(hi, d), lo);
  }
  lo.lo = (qk_u64)(xl < 0 ? -1 : 1); lo.hi = xl < 0 ? ~(qk_u64)0 : 0u;
  *e0 = eh - 59;
  return qk_i128_add(qk_i128_shl(hi, 59), lo);
}

QK_FN qk_u32 qk_qladd1(qk_u32 ab, qk_u32 bb, int tk, qk_i64 az, qk_i64 bz, qk_i64 ma, int ea, qk_i64 mb, int eb,
                       qk_i64 mc, int ec, qk_q_ctx yc, int ok) {
  qk_kind_info f = qk_info(tk);
  int e0;
  qk_i128 n = qk_exact_sum(ma * (qk_int_value(ab, f) - az), ea, mb * (qk_int_value(bb, f) - bz), eb, &e0);
  return qk_q_finish_f64(qk_round_ratio(n, e0 - ec, mc), yc, ok, 1, 0);
}

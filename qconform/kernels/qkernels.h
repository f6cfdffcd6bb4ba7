/*
 * qkernels.h -- QuantizeLinear, DequantizeLinear (ai.onnx and com.microsoft: the same element
 * functions), QLinearMatMul, DynamicQuantizeLinear and the integer compute ops (MatMulInteger,
 * ConvInteger, QLinearConv), one output element at a time, written ONCE
 * for the host (gcc: qconform/kernels/build.py) and the device (NVRTC: the one linted PTX build of
 * qconform/kernels/ptx.py, loaded by qconform/runners/gpu_kernel.py). The entry points' parameter
 * lists are qconform/kernels/__init__.py's ENTRY_POINTS. Bit-exact with qconform/oracle (the numpy
 * oracle is the truth; the corpus and the exhaustive sweeps in qconform/sweep/ check this file).
 *
 * Rules this file keeps, because each one is a way a quantization kernel goes wrong:
 *   - the quotient is IEEE `x / scale` in float32, round to nearest even (never x * (1/scale));
 *     compile without fast-math and without FMA contraction (host: -ffp-contract=off, device:
 *     --fmad=false; the PTX lint in ptx.py checks for div.rn.f32 and no .ftz/approx/fma);
 *   - float -> integer: clamp IN FLOATING POINT, round half to even (rintf on the device, the
 *     same IEEE rounding inline on the host: qk_rint_small), clamp again, then convert: a C
 *     conversion of NaN or of an out-of-range float is undefined on the host and saturates on the
 *     device, so no such conversion ever happens here. NaN into an integer output gives 0 (the
 *     spec leaves it undefined; the goldens mark it don't-care);
 *   - every float encoding is integer arithmetic on the significand (qk_round_mag: one rounding,
 *     ties to even, subnormals included) plus the explicit tables of specials below;
 *   - every value of every kind in scope is exact in float32 except int32; int32 values and the
 *     DequantizeLinear difference x - zero_point are carried in double (exact there) or as
 *     integer parts, and rounded once.
 * Precision readings: the quotient is computed in `prec` (float32, float16 or bfloat16). For a half
 * precision the float32 quotient of two half values is rounded to `prec` once more; that double
 * rounding is innocuous since 24 >= 2*11 + 2 (the same holds for the float32 sum q + zero_point).
 */
#ifndef QCONFORM_QKERNELS_H
#define QCONFORM_QKERNELS_H

#if defined(__CUDACC__)
#  define QK_FN static __host__ __device__ __forceinline__
#else
#  include <math.h>
#  include <string.h>
#  define QK_FN static inline __attribute__((always_inline)) /* constant kinds fold away */
#  if defined(__FLT_EVAL_METHOD__) && __FLT_EVAL_METHOD__ != 0 && __FLT_EVAL_METHOD__ != 16
#    error "qkernels.h needs float arithmetic evaluated in float (FLT_EVAL_METHOD 0, e.g. SSE, not x87)"
#  endif
#  if defined(__FAST_MATH__)
#    error "qkernels.h must not be compiled with -ffast-math"
#  endif
#endif

typedef unsigned int qk_u32;
typedef unsigned long long qk_u64;
typedef long long qk_i64;

/* ---------------------------------------------------------------------------------------------
 * Kinds. The numbers are the kernel ABI; qconform/kernels/__init__.py maps registry names to
 * them, and tests/test_kernels.py checks every row below against qconform/dtypes.py.
 * ------------------------------------------------------------------------------------------- */
enum {
  QK_INT2, QK_UINT2, QK_INT4, QK_UINT4, QK_INT8, QK_UINT8, QK_INT16, QK_UINT16, QK_INT32,
  QK_F8E4M3FN, QK_F8E4M3FNUZ, QK_F8E5M2, QK_F8E5M2FNUZ, QK_F4E2M1, QK_F6E2M3, QK_F6E3M2,
  QK_F8E8M0, QK_F16, QK_BF16, QK_F32, QK_NKINDS
};

/* Encoding styles (the registry's FloatFormat.nan_style). */
enum { QK_STYLE_INT, QK_STYLE_IEEE, QK_STYLE_FN, QK_STYLE_FNUZ, QK_STYLE_NONE, QK_STYLE_E8M0 };

typedef struct {
  int style;     /* QK_STYLE_* */
  int width;     /* bits of one element */
  int ebits, mbits, bias;
  int is_signed; /* integers: two's complement; floats: has a sign bit */
  qk_u32 max_code; /* integers: unused; floats: code of the largest finite magnitude */
} qk_kind_info;

/*         kind            style            width ebits mbits bias signed max_code */
#define QK_KIND_TABLE(X)                                                     \
  X(QK_INT2,        QK_STYLE_INT,     2, 0, 0,   0, 1, 0)                    \
  X(QK_UINT2,       QK_STYLE_INT,     2, 0, 0,   0, 0, 0)                    \
  X(QK_INT4,        QK_STYLE_INT,     4, 0, 0,   0, 1, 0)                    \
  X(QK_UINT4,       QK_STYLE_INT,     4, 0, 0,   0, 0, 0)                    \
  X(QK_INT8,        QK_STYLE_INT,     8, 0, 0,   0, 1, 0)                    \
  X(QK_UINT8,       QK_STYLE_INT,     8, 0, 0,   0, 0, 0)                    \
  X(QK_INT16,       QK_STYLE_INT,    16, 0, 0,   0, 1, 0)                    \
  X(QK_UINT16,      QK_STYLE_INT,    16, 0, 0,   0, 0, 0)                    \
  X(QK_INT32,       QK_STYLE_INT,    32, 0, 0,   0, 1, 0)                    \
  X(QK_F8E4M3FN,    QK_STYLE_FN,      8, 4, 3,   7, 1, 0x7Eu)  /* 448    */  \
  X(QK_F8E4M3FNUZ,  QK_STYLE_FNUZ,    8, 4, 3,   8, 1, 0x7Fu)  /* 240    */  \
  X(QK_F8E5M2,      QK_STYLE_IEEE,    8, 5, 2,  15, 1, 0x7Bu)  /* 57344  */  \
  X(QK_F8E5M2FNUZ,  QK_STYLE_FNUZ,    8, 5, 2,  16, 1, 0x7Fu)  /* 57344  */  \
  X(QK_F4E2M1,      QK_STYLE_NONE,    4, 2, 1,   1, 1, 0x7u)   /* 6      */  \
  X(QK_F6E2M3,      QK_STYLE_NONE,    6, 2, 3,   1, 1, 0x1Fu)  /* 7.5    */  \
  X(QK_F6E3M2,      QK_STYLE_NONE,    6, 3, 2,   3, 1, 0x1Fu)  /* 28     */  \
  X(QK_F8E8M0,      QK_STYLE_E8M0,    8, 8, 0, 127, 0, 0xFEu)  /* 2^127  */  \
  X(QK_F16,         QK_STYLE_IEEE,   16, 5, 10, 15, 1, 0x7BFFu)               \
  X(QK_BF16,        QK_STYLE_IEEE,   16, 8, 7, 127, 1, 0x7F7Fu)               \
  X(QK_F32,         QK_STYLE_IEEE,   32, 8, 23, 127, 1, 0x7F7FFFFFu)

QK_FN qk_kind_info qk_info(int kind) {
  qk_kind_info r;
  switch (kind) {
#define QK_ROW(k, st, w, e, m, b, sg, mx) \
  case k: r.style = st; r.width = w; r.ebits = e; r.mbits = m; r.bias = b; r.is_signed = sg; r.max_code = mx; break;
    QK_KIND_TABLE(QK_ROW)
#undef QK_ROW
    default: r.style = -1; r.width = 0; r.ebits = r.mbits = r.bias = r.is_signed = 0; r.max_code = 0; break;
  }
  return r;
}

QK_FN int qk_is_int(int kind) { return kind >= QK_INT2 && kind <= QK_INT32; }

/* ---------------------------------------------------------------------------------------------
 * Specials, per style and saturate mode: the ONNX Cast tables quoted by QuantizeLinear.
 *
 *   what          | FN (e4m3fn) | FNUZ        | IEEE (e5m2, f16, bf16, f32) | NONE (f4, f6)
 *   NaN           | NaN (signed)| NaN (0x80)  | NaN (signed)                | +max (f6: unspecified, a don't-care)
 *   -0            | -0          | 0           | -0                          | -0 (f6 too: "-0.0 | -0.0")
 *   saturate=1:
 *     +-Inf       | +-max       | +-max (24+), NaN (19-23) | +-max          | +-max
 *     |[x]| > max | +-max       | +-max       | +-max                       | +-max
 *   saturate=0:
 *     +-Inf       | NaN (signed)| NaN         | +-Inf                       | +-max
 *     |[x]| > max | NaN (signed)| NaN         | +-Inf                       | +-max
 * ------------------------------------------------------------------------------------------- */
enum { QK_TO_MAX, QK_TO_INF, QK_TO_NAN };

QK_FN int qk_overflow_action(int style, int saturate, int is_inf, int fnuz_inf_saturates) {
  if (style == QK_STYLE_NONE) return QK_TO_MAX;           /* "saturate has no effect" */
  if (saturate) {
    if (style == QK_STYLE_FNUZ && is_inf && !fnuz_inf_saturates) return QK_TO_NAN; /* opset 19-23 */
    return QK_TO_MAX;
  }
  if (style == QK_STYLE_IEEE) return QK_TO_INF;
  return QK_TO_NAN;                                       /* FN, FNUZ (and E8M0) */
}

QK_FN qk_u32 qk_sign_bit(qk_kind_info f) { return f.is_signed ? (1u << (f.width - 1)) : 0u; }

/* The NaN code written for a NaN result (every NaN code compares as one class; this is a choice). */
QK_FN qk_u32 qk_nan_code(qk_kind_info f, qk_u32 neg) {
  qk_u32 sign = neg ? qk_sign_bit(f) : 0u;
  switch (f.style) {
    case QK_STYLE_FN:   return ((1u << (f.width - 1)) - 1u) | sign;                 /* S.1111.111 */
    case QK_STYLE_FNUZ: return 1u << (f.width - 1);                                 /* 0x80       */
    case QK_STYLE_IEEE: return ((((1u << f.ebits) - 1u) << f.mbits) | (1u << (f.mbits - 1))) | sign;
    case QK_STYLE_E8M0: return 0xFFu;
    case QK_STYLE_NONE: return f.max_code;                  /* "NaN | 6" (float4.md): +max; float6's is unspecified */
    default:            return 0u;                          /* INT: undefined, see header */
  }
}

QK_FN qk_u32 qk_special_code(qk_kind_info f, int action, qk_u32 neg) {
  qk_u32 sign = neg ? qk_sign_bit(f) : 0u;
  if (action == QK_TO_MAX) return f.max_code | sign;
  if (action == QK_TO_INF) return (((1u << f.ebits) - 1u) << f.mbits) | sign;
  return qk_nan_code(f, neg);
}

/* ---------------------------------------------------------------------------------------------
 * Bit helpers
 * ------------------------------------------------------------------------------------------- */
QK_FN int qk_clz64(qk_u64 v) { /* v != 0 */
#if defined(__CUDA_ARCH__)
  return __clzll((long long)v);
#else
  return __builtin_clzll(v);
#endif
}

QK_FN qk_u32 qk_f2u(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  qk_u32 u; memcpy(&u, &f, sizeof u); return u;
#endif
}

QK_FN float qk_u2f(qk_u32 u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f; memcpy(&f, &u, sizeof f); return f;
#endif
}

QK_FN qk_u64 qk_d2u(double d) {
#if defined(__CUDA_ARCH__)
  return (qk_u64)__double_as_longlong(d);
#else
  qk_u64 u; memcpy(&u, &d, sizeof u); return u;
#endif
}

/* Round |v| < 2^22 to the nearest integer, ties to even. The device does it in one instruction
 * (rintf: cvt.rni). On the host rintf is a libm call unless SSE4.1 is enabled, so the same IEEE
 * rounding is done inline, in a form the vectorizer takes: v + 1.5 * 2^23 lies in (2^23, 2^24),
 * where the float32 step is 1, so the sum is v rounded to an integer (RNE, the default mode,
 * never changed here) and subtracting 1.5 * 2^23 again is exact. (The sign of a zero result is
 * lost; callers convert to an integer.) */
QK_FN float qk_rint_small(float v) {
#if defined(__CUDA_ARCH__)
  return rintf(v);
#else
  return (v + 12582912.0f) - 12582912.0f;
#endif
}

/* ---------------------------------------------------------------------------------------------
 * The one rounding: magnitude sig * 2^lsb_exp (sig > 0, exact) -> magnitude code of kind f,
 * round to nearest, ties to even, subnormals included. *overflow is set when the rounded value
 * exceeds the largest finite value (overflow is decided after rounding, as the Cast tables say).
 * With q the quantum exponent of the result (values near it are k * 2^q), the code is
 * ((q + mbits - emin) << mbits) + k for normals and subnormals alike (a carry out of the
 * significand moves into the exponent field by itself).
 * ------------------------------------------------------------------------------------------- */
QK_FN qk_u32 qk_round_mag(qk_u64 sig, int lsb_exp, qk_kind_info f, int *overflow) {
  int emin = 1 - f.bias;
  int emax = (int)(f.max_code >> f.mbits) - f.bias;
  int top = lsb_exp + (63 - qk_clz64(sig));            /* exponent of the leading bit */
  int q, shift;
  qk_u64 k;
  qk_u32 code;
  *overflow = 0;
  if (top > emax + 1) { *overflow = 1; return 0u; }
  q = (top > emin ? top : emin) - f.mbits;
  shift = q - lsb_exp;
  if (shift <= 0) {
    k = sig << (-shift);                               /* exact: fewer bits than the kind holds */
  } else if (shift >= 64) {
    k = (shift == 64 && sig > (1ull << 63)) ? 1u : 0u; /* below half the smallest step: 0 */
  } else {
    qk_u64 rem = sig & ((1ull << shift) - 1u);
    qk_u64 half = 1ull << (shift - 1);
    k = sig >> shift;
    if (rem > half || (rem == half && (k & 1u))) k += 1u;
  }
  code = ((qk_u32)(q + f.mbits - emin) << f.mbits) + (qk_u32)k;
  if (code > f.max_code) { *overflow = 1; return 0u; }
  return code;
}

/* Encode (-1)^neg * sig * 2^lsb_exp (or NaN / Inf) into kind f under the tables above. */
QK_FN qk_u32 qk_encode_parts(qk_u32 neg, qk_u64 sig, int lsb_exp, int is_nan, int is_inf,
                             qk_kind_info f, int saturate, int fnuz_inf_saturates) {
  qk_u32 mag;
  int overflow = 0;
  if (is_nan) return qk_nan_code(f, neg);
  if (f.style == QK_STYLE_E8M0) return 0xFFu;           /* no encoder for the scale-only kind */
  if (is_inf) return qk_special_code(f, qk_overflow_action(f.style, saturate, 1, fnuz_inf_saturates), neg);
  mag = sig ? qk_round_mag(sig, lsb_exp, f, &overflow) : 0u;
  if (overflow) return qk_special_code(f, qk_overflow_action(f.style, saturate, 0, fnuz_inf_saturates), neg);
  if (mag == 0u && f.style == QK_STYLE_FNUZ) return 0u; /* fnuz has no -0: its slot is NaN */
  return mag | (neg ? qk_sign_bit(f) : 0u);
}

/* float32 bits -> code of kind f. */
QK_FN qk_u32 qk_encode_f32(qk_u32 xb, qk_kind_info f, int saturate, int fnuz_inf_saturates) {
  qk_u32 neg = xb >> 31, ab = xb & 0x7FFFFFFFu, ef = ab >> 23, mant = ab & 0x7FFFFFu;
  qk_u64 sig = ef ? (qk_u64)(mant | 0x800000u) : (qk_u64)mant;
  int lsb = ef ? (int)ef - 150 : -149;
  int top = (int)ef - 127;
  if (ef != 0u && ef != 255u && f.mbits < 23 && top >= 1 - f.bias &&
      top <= (int)(f.max_code >> f.mbits) - f.bias && f.style != QK_STYLE_E8M0) {
    /* Fast path, the same rounding as qk_round_mag in 32 bits: a float32 normal whose result is a
     * normal of f (or overflows): the step is 2^(23 - mbits) significand units. */
    int shift = 23 - f.mbits;
    qk_u32 s24 = mant | 0x800000u;
    qk_u32 k = (s24 + ((1u << (shift - 1)) - 1u) + ((s24 >> shift) & 1u)) >> shift;
    qk_u32 code = ((qk_u32)(top - (1 - f.bias)) << f.mbits) + k;
    if (code > f.max_code)
      return qk_special_code(f, qk_overflow_action(f.style, saturate, 0, fnuz_inf_saturates), neg);
    return code | (neg ? qk_sign_bit(f) : 0u);
  }
  return qk_encode_parts(neg, sig, lsb, ab > 0x7F800000u, ab == 0x7F800000u, f, saturate, fnuz_inf_saturates);
}

/* double bits -> code of kind f. */
QK_FN qk_u32 qk_encode_f64(double x, qk_kind_info f, int saturate, int fnuz_inf_saturates) {
  qk_u64 b = qk_d2u(x);
  qk_u32 neg = (qk_u32)(b >> 63);
  qk_u64 ab = b & 0x7FFFFFFFFFFFFFFFull, ef = ab >> 52, mant = ab & 0xFFFFFFFFFFFFFull;
  qk_u64 sig = ef ? (mant | (1ull << 52)) : mant;
  int lsb = ef ? (int)ef - 1075 : -1074;
  return qk_encode_parts(neg, sig, lsb, ab > 0x7FF0000000000000ull, ab == 0x7FF0000000000000ull, f,
                         saturate, fnuz_inf_saturates);
}

/* Integer value of an integer kind's code (two's complement sign extension). */
QK_FN qk_i64 qk_int_value(qk_u32 code, qk_kind_info f) {
  qk_u64 mask = (f.width >= 32) ? 0xFFFFFFFFull : ((1ull << f.width) - 1u);
  qk_i64 v = (qk_i64)((qk_u64)code & mask);
  if (f.is_signed && (v >> (f.width - 1)) & 1) v -= (qk_i64)1 << f.width;
  return v;
}

/* Exact float32 value of a float kind's code (every float kind in scope fits float32 exactly). */
QK_FN float qk_decode_f32(qk_u32 code, qk_kind_info f) {
  qk_u32 wmask = (f.width >= 32) ? 0xFFFFFFFFu : ((1u << f.width) - 1u);
  qk_u32 neg, mag, e, mant;
  int ovf;
  code &= wmask;
  if (f.width == 32) return qk_u2f(code);
  if (f.style == QK_STYLE_IEEE && f.ebits == 8) return qk_u2f(code << 16); /* bfloat16 */
  if (f.style == QK_STYLE_E8M0) {
    if (code == 0xFFu) return qk_u2f(0x7FC00000u);
    return qk_u2f(code ? (code << 23) : 0x00400000u);  /* 2^(code - 127); 2^-127 is subnormal */
  }
  neg = (code >> (f.width - 1)) & 1u;
  mag = code & ((1u << (f.width - 1)) - 1u);
  e = mag >> f.mbits;
  mant = mag & ((1u << f.mbits) - 1u);
  if ((f.style == QK_STYLE_FNUZ && code == (1u << (f.width - 1))) ||
      (f.style == QK_STYLE_FN && mag == (1u << (f.width - 1)) - 1u) ||
      (f.style == QK_STYLE_IEEE && e == (1u << f.ebits) - 1u && mant != 0u))
    return qk_u2f(0x7FC00000u | (neg << 31));
  if (f.style == QK_STYLE_IEEE && e == (1u << f.ebits) - 1u) return qk_u2f(0x7F800000u | (neg << 31));
  if (mag == 0u) return qk_u2f(neg << 31);
  /* value = sig * 2^lsb, exactly representable in float32: compose it with the same rounding */
  return qk_u2f(qk_round_mag(e ? (qk_u64)(mant | (1u << f.mbits)) : (qk_u64)mant,
                             (e ? (int)e : 1) - f.bias - f.mbits, qk_info(QK_F32), &ovf) | (neg << 31));
}

/* fl(prec, v): round a float32 value to float32/float16/bfloat16 (IEEE: RNE, overflow to Inf). */
QK_FN float qk_round_to(float v, int prec) {
  qk_kind_info p;
  if (prec == QK_F32) return v;
  p = qk_info(prec);
  return qk_decode_f32(qk_encode_f32(qk_f2u(v), p, 0, 1), p);
}

/* fl(prec, value of a code of kind k): exact for float kinds, one rounding for int32 -> prec. */
QK_FN float qk_value_in(qk_u32 code, int kind, int prec) {
  qk_kind_info f = qk_info(kind);
  if (f.style == QK_STYLE_INT) {
    qk_i64 v = qk_int_value(code, f);
    if (prec == QK_F32) return (float)v;                 /* one RNE conversion (|v| < 2^32) */
    {
      qk_kind_info p = qk_info(prec);
      qk_u64 mag = (qk_u64)(v < 0 ? -v : v);
      return qk_decode_f32(qk_encode_parts(v < 0, mag, 0, 0, 0, p, 0, 1), p);
    }
  }
  return qk_round_to(qk_decode_f32(code, f), prec);
}

/* Exact double value of any kind's code (DequantizeLinear). */
QK_FN double qk_value_f64(qk_u32 code, int kind) {
  qk_kind_info f = qk_info(kind);
  if (f.style == QK_STYLE_INT) return (double)qk_int_value(code, f);
  return (double)qk_decode_f32(code, f);
}

/* ---------------------------------------------------------------------------------------------
 * The two operators, one element.
 * ------------------------------------------------------------------------------------------- */

/* y = saturate(round(x / y_scale) + y_zero_point), in two steps: qk_q_params reads the scale and
 * zero point (once per tensor, or per element when they vary), qk_q_apply maps one x code.
 * prec: QK_F32, QK_F16 or QK_BF16, the precision of the division (and of the zero-point sum for
 * float outputs), or QK_INT32, the integer division (qk_int_quotient). fnuz_inf_saturates: 1 from
 * opset 24 on (the fnuz +-Inf row). */
typedef struct {
  float s;          /* fl(prec, scale) (a float prec) */
  double sd;        /* the scale's exact value (prec QK_INT32) */
  float zf;         /* float outputs: the zero point's value */
  qk_i64 zp;        /* integer outputs: the zero point */
  float rlo, rhi;   /* integer outputs: clamp bounds of round(q), qmin - zp and qmax - zp */
} qk_q_ctx;

QK_FN qk_q_ctx qk_q_params(qk_u32 sb, int sk, qk_u32 zb, int ok, int prec) {
  qk_kind_info o = qk_info(ok);
  qk_q_ctx c;
  c.s = prec == QK_INT32 ? 0.0f : qk_value_in(sb, sk, prec);
  c.sd = prec == QK_INT32 ? qk_value_f64(sb, sk) : 0.0;
  c.zf = 0.0f; c.zp = 0; c.rlo = c.rhi = 0.0f;
  if (o.style == QK_STYLE_INT) {
    qk_i64 lo = o.is_signed ? -((qk_i64)1 << (o.width - 1)) : 0;
    qk_i64 hi = o.is_signed ? ((qk_i64)1 << (o.width - 1)) - 1 : ((qk_i64)1 << o.width) - 1;
    c.zp = qk_int_value(zb, o);
    c.rlo = (float)(lo - c.zp);                          /* exact: |.| < 2^17 */
    c.rhi = (float)(hi - c.zp);
  } else {
    c.zf = qk_decode_f32(zb, o);
  }
  return c;
}

/* The quotient q (already in prec) to an output code: the saturating integer path, or the zero
 * point added in prec and the Cast table of a float output. QuantizeLinear, QLinearMatMul and
 * DynamicQuantizeLinear all end here. */
QK_FN qk_u32 qk_q_finish(float q, qk_q_ctx c, int ok, int prec, int saturate, int fnuz_inf_saturates) {
  qk_kind_info o = qk_info(ok);
  if (o.style == QK_STYLE_INT) {
    /* Clamp in floating point before any conversion: first to one step outside the output range
     * (rounding of everything inside stays exact, and |r| < 2^17 for the rounding below), then
     * round half to even, then clamp to the range. Branch-free, so the host loop vectorizes. */
    float r = q < c.rlo - 1.0f ? c.rlo - 1.0f : q;
    r = r > c.rhi + 1.0f ? c.rhi + 1.0f : r;
    r = qk_rint_small(r);
    r = r < c.rlo ? c.rlo : r;
    r = r > c.rhi ? c.rhi : r;
    r = (q != q) ? 0.0f - (float)c.zp : r;               /* NaN: undefined by the spec -> 0 */
    return (qk_u32)((int)r + (int)c.zp) & (qk_u32)((1ull << o.width) - 1u);
  } else {
    float v = qk_round_to(q + c.zf, prec);
    return qk_encode_f32(qk_f2u(v), o, saturate, fnuz_inf_saturates);
  }
}

/* Round a double to an integer, ties to even (NaN, +-Inf and |v| >= 2^52 pass through; the sign of
 * a zero is kept). The device has the instruction (rint: cvt.rni.f64); the host adds and subtracts
 * 2^52, where the double step is 1, as qk_rint_small does in float. */
QK_FN double qk_rint_f64(double v) {
#if defined(__CUDA_ARCH__)
  return rint(v);
#else
  double a = v < 0.0 ? -v : v, r;
  if (!(a < 4503599627370496.0)) return v;
  r = (a + 4503599627370496.0) - 4503599627370496.0;
  return v < 0.0 ? -r : r;
#endif
}

/* x / scale in int32 precision (QuantizeLinear-23+ with an int32 y_scale: "the type of y_scale
 * determines the precision of the division", "it rounds to the nearest even";
 * qconform/docs/semantics.md#q-division, reading operands-rounded-to-int32): x rounded to an
 * integer, ties to even (a non-finite x or one outside int32 kept as it is), then the quotient
 * rounded to an integer, ties to even. double decides every tie, as in the oracle (a non-tie
 * quotient of such operands lies further from k + 1/2 than double's error); a zero quotient is +0
 * (an int32 has no -0). */
QK_FN double qk_int_quotient(double x, double s) {
  return qk_rint_f64(qk_rint_f64(x) / s) + 0.0;
}

/* The integer quotient q (a double) to an output code: integer outputs through qk_q_finish (q
 * clamped first to a float-exact range: beyond it every value saturates alike), float outputs
 * take q + zero point in double and the Cast table (the oracle's float64 sum and one encoding). */
QK_FN qk_u32 qk_q_finish_f64(double q, qk_q_ctx c, int ok, int saturate, int fnuz_inf_saturates) {
  if (qk_info(ok).style == QK_STYLE_INT) {
    double r = q < (double)c.rlo - 2.0 ? (double)c.rlo - 2.0 : q;
    r = r > (double)c.rhi + 2.0 ? (double)c.rhi + 2.0 : r;
    return qk_q_finish((float)r, c, ok, QK_F32, saturate, fnuz_inf_saturates);
  }
  return qk_encode_f64(q + (double)c.zf, qk_info(ok), saturate, fnuz_inf_saturates);
}

QK_FN qk_u32 qk_q_apply(qk_u32 xb, int xk, qk_q_ctx c, int ok, int prec, int saturate, int fnuz_inf_saturates) {
  float q;
  if (prec == QK_INT32)
    return qk_q_finish_f64(qk_int_quotient(qk_value_f64(xb, xk), c.sd), c, ok, saturate, fnuz_inf_saturates);
  q = qk_round_to(qk_value_in(xb, xk, prec) / c.s, prec); /* IEEE division, RNE */
  return qk_q_finish(q, c, ok, prec, saturate, fnuz_inf_saturates);
}

QK_FN qk_u32 qk_quantize1(qk_u32 xb, int xk, qk_u32 sb, int sk, qk_u32 zb, int ok, int prec,
                          int saturate, int fnuz_inf_saturates) {
  return qk_q_apply(xb, xk, qk_q_params(sb, sk, zb, ok, prec), ok, prec, saturate, fnuz_inf_saturates);
}

/* y = (x - x_zero_point) * x_scale, the product rounded once in the output kind ok
 * (QK_F32, QK_F16, QK_BF16): fl(ok, fl(ok, x - zp) * fl(ok, scale)). */
QK_FN qk_u32 qk_dequantize1(qk_u32 xb, int xk, qk_u32 sb, int sk, qk_u32 zb, int ok) {
  qk_kind_info o = qk_info(ok);
  double d = qk_value_f64(xb, xk) - qk_value_f64(zb, xk); /* exact in double */
  float a, b;
  if (ok == QK_F32) {
    a = (float)d;                                         /* one RNE rounding */
  } else {
    a = qk_decode_f32(qk_encode_f64(d, o, 0, 1), o);
  }
  b = qk_value_in(sb, sk, ok);
  /* the double product of two <= 24-bit values is exact; round it once to ok */
  if (ok == QK_F32) return qk_f2u((float)((double)a * (double)b));
  return qk_encode_f64((double)a * (double)b, o, 0, 1);
}

/* ---------------------------------------------------------------------------------------------
 * Element access. Arrays hold one code per element: 1 byte for kinds up to 8 bits, 2 for 16-bit,
 * 4 for 32-bit kinds (unpacked; the host packs and unpacks sub-byte kinds).
 * Quantization parameters: element i of x (axis index a = (i / inner) % axis_len, outer index
 * i / (inner * axis_len), inner index i % inner) reads parameter
 * outer * s_outer + (a / block) * s_axis + inner_index * s_inner; axis_len == 0 is per-tensor.
 * Per-axis: block 1, strides (0, 1, 0). Blocked: strides (nblocks * inner, inner, 1).
 * ------------------------------------------------------------------------------------------- */
QK_FN int qk_bytes(int kind) { int w = qk_info(kind).width; return w <= 8 ? 1 : (w <= 16 ? 2 : 4); }

QK_FN qk_u32 qk_load(const void *p, qk_i64 i, int bytes) {
  if (bytes == 1) return ((const unsigned char *)p)[i];
  if (bytes == 2) return ((const unsigned short *)p)[i];
  return ((const qk_u32 *)p)[i];
}

QK_FN void qk_store(void *p, qk_i64 i, int bytes, qk_u32 v) {
  if (bytes == 1) ((unsigned char *)p)[i] = (unsigned char)v;
  else if (bytes == 2) ((unsigned short *)p)[i] = (unsigned short)v;
  else ((qk_u32 *)p)[i] = v;
}

QK_FN qk_i64 qk_param_index(qk_i64 i, qk_i64 inner, qk_i64 axis_len, qk_i64 block, qk_i64 s_outer,
                            qk_i64 s_axis, qk_i64 s_inner) {
  if (axis_len == 0) return 0;
  return (i / (axis_len * inner)) * s_outer + (((i / inner) % axis_len) / block) * s_axis + (i % inner) * s_inner;
}

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

/* ---------------------------------------------------------------------------------------------
 * com.microsoft MatMulNBits (qconform/docs/semantics.md#ms-matmulnbits): Y[m, n] = sum over k of
 * A[m, k] * (q[n, k] - zp[n, k / block]) * scale[n, k / block] (+ bias[n]). B's row n is one bit stream
 * of `bits`-bit codes, low-order bits of each byte first (#ms-matmulnbits-layout); the zero points are
 * such a stream per row (zmode 1), values of A's type (zmode 2), or 2^(bits-1) (zmode 0). The oracle
 * keeps only cases whose every product and sum is exact in A's type for every order, so double holds
 * each step exactly and the one rounding to A's type is exact too; the sum starts from -0, so it is the
 * sum that starts from its first term (a zero's sign as the oracle's).
 * ------------------------------------------------------------------------------------------- */
QK_FN qk_u32 qk_stream_code(const unsigned char *row, qk_i64 j, int bits) {
  qk_i64 off = j * bits;
  int shift = (int)(off & 7);
  qk_u32 v = (qk_u32)row[off >> 3] >> shift;
  if (shift + bits > 8) v |= (qk_u32)row[(off >> 3) + 1] << (8 - shift);
  return v & ((1u << bits) - 1u);
}

QK_FN qk_u32 qk_nbits1(const void *a, int ak, qk_i64 a0, const unsigned char *brow, const void *s, qk_i64 s0,
                       const void *z, int zmode, qk_i64 zrow, qk_i64 n, qk_i64 kdim, int bits, qk_i64 bs,
                       const void *bias, int has_bias) {
  double acc = -0.0, zv = (double)(1u << (bits - 1));
  qk_i64 kk, blk = -1;
  double w = 0.0, sv = 0.0;
  for (kk = 0; kk < kdim; kk++) {
    if (kk / bs != blk) {
      blk = kk / bs;
      sv = qk_value_f64(qk_load(s, s0 + blk, qk_bytes(ak)), ak);
      if (zmode == 1) zv = (double)qk_stream_code((const unsigned char *)z + n * zrow, blk, bits);
      else if (zmode == 2) zv = qk_value_f64(qk_load(z, s0 + blk, qk_bytes(ak)), ak);
    }
    w = ((double)qk_stream_code(brow, kk, bits) - zv) * sv;
    acc += qk_value_f64(qk_load(a, a0 + kk, qk_bytes(ak)), ak) * w;
  }
  if (has_bias) acc += qk_value_f64(qk_load(bias, n, qk_bytes(ak)), ak);
  return qk_encode_f64(acc, qk_info(ak), 0, 0);
}

/* One output element of com.microsoft GatherBlockQuantized in the reading multiply-in-output-type
 * (qconform/docs/semantics.md#ms-gather-block-quantized, the oracle's first): fl(fl(v - zp) * scale) in
 * the output kind ok, v the data element src (packed uint8 data, pbits > 0: code src of the row streams
 * of `last` codes in rowbytes bytes, low-order bits first), zp the code zi of z (zmode 1) or dz; an
 * out-of-range index (src < 0) gives +0 (the first fill reading). Each double step is exact. */
QK_FN qk_u32 qk_gbq1(const void *data, int dk, int pbits, qk_i64 last, qk_i64 rowbytes, qk_i64 src, qk_i64 si,
                     const void *s, const void *z, int zmode, qk_i64 dz, int ok) {
  double v, zp, sv;
  if (src < 0) return 0u;
  if (pbits) v = (double)qk_stream_code((const unsigned char *)data + (src / last) * rowbytes, src % last, pbits);
  else v = qk_value_f64(qk_load(data, src, qk_bytes(dk)), dk);
  zp = zmode ? qk_value_f64(qk_load(z, si, qk_bytes(dk)), dk) : (double)dz;
  sv = qk_value_f64(qk_load(s, si, qk_bytes(ok)), ok);
  return qk_encode_f64(qk_fl(qk_fl(v - zp, ok) * sv, ok), qk_info(ok), 0, 0);
}

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
enum { QK_POOL_OK, QK_POOL_INEXACT, QK_POOL_EMPTY };

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
  *status = count == 0 ? QK_POOL_EMPTY : ((double)s == sum ? QK_POOL_OK : QK_POOL_INEXACT);
  return qk_f2u(count == 0 ? 0.0f : s / (float)count); /* count < 2^24 (the host checks): exact in float32 */
}

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

#if defined(__CUDACC__)
/* ---- device entry points (grid-stride loops) ---------------------------------------------- */
extern "C" __global__ void qk_quantize_kernel(QK_Q_ARGS) {
  for (qk_i64 i = (qk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (qk_i64)gridDim.x * blockDim.x)
    QK_Q_ELEM(i);
}

extern "C" __global__ void qk_dequantize_kernel(QK_DQ_ARGS) {
  for (qk_i64 i = (qk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (qk_i64)gridDim.x * blockDim.x)
    QK_DQ_ELEM(i);
}

extern "C" __global__ void qk_qlinear_matmul_kernel(QK_MM_ARGS) {
  QK_MM_SETUP;
  for (qk_i64 i = (qk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < nb * mdim * ndim;
       i += (qk_i64)gridDim.x * blockDim.x)
    QK_MM_ELEM(i);
}

extern "C" __global__ void qk_matmul_integer_kernel(QK_MMI_ARGS) {
  for (qk_i64 i = (qk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < nb * mdim * ndim;
       i += (qk_i64)gridDim.x * blockDim.x)
    QK_MMI_ELEM(i);
}

extern "C" __global__ void qk_qgemm_kernel(QK_QGEMM_ARGS) {
  QK_QGEMM_SETUP;
  for (qk_i64 i = (qk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < mdim * ndim; i += (qk_i64)gridDim.x * blockDim.x)
    QK_QGEMM_ELEM(i);
}

extern "C" __global__ void qk_scaled_matmul_kernel(QK_SMM_ARGS) {
  for (qk_i64 i = (qk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < nb * mdim * ndim;
       i += (qk_i64)gridDim.x * blockDim.x)
    QK_SMM_ELEM(i);
}

extern "C" __global__ void qk_qlinear_add_kernel(QK_QLADD_ARGS) {
  QK_QLADD_SETUP;
  for (qk_i64 i = (qk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (qk_i64)gridDim.x * blockDim.x)
    QK_QLADD_ELEM(i);
}

extern "C" __global__ void qk_matmul_nbits_kernel(QK_NBITS_ARGS) {
  for (qk_i64 i = (qk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < rows * ndim; i += (qk_i64)gridDim.x * blockDim.x)
    QK_NBITS_ELEM(i);
}

extern "C" __global__ void qk_gather_block_quantized_kernel(QK_GBQ_ARGS) {
  for (qk_i64 i = (qk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (qk_i64)gridDim.x * blockDim.x)
    QK_GBQ_ELEM(i);
}

extern "C" __global__ void qk_leaky_relu_kernel(QK_LEAKY_ARGS) {
  for (qk_i64 i = (qk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (qk_i64)gridDim.x * blockDim.x)
    QK_LEAKY_ELEM(i);
}

extern "C" __global__ void qk_avg_pool_kernel(QK_POOL_ARGS) {
  for (qk_i64 i = (qk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (qk_i64)gridDim.x * blockDim.x)
    QK_POOL_ELEM(i);
}

extern "C" __global__ void qk_conv_kernel(QK_CONV_ARGS) {
  QK_CONV_SETUP;
  for (qk_i64 i = (qk_i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (qk_i64)gridDim.x * blockDim.x)
    QK_CONV_ELEM(i);
}

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

int qk_dequantize(QK_DQ_ARGS) {
  for (qk_i64 i = 0; i < n; i++) QK_DQ_ELEM(i);
  return 0;
}

int qk_qlinear_matmul(QK_MM_ARGS) {
  QK_MM_SETUP;
  for (qk_i64 i = 0; i < nb * mdim * ndim; i++) QK_MM_ELEM(i);
  return 0;
}

int qk_matmul_integer(QK_MMI_ARGS) {
  for (qk_i64 i = 0; i < nb * mdim * ndim; i++) QK_MMI_ELEM(i);
  return 0;
}

int qk_qgemm(QK_QGEMM_ARGS) {
  QK_QGEMM_SETUP;
  for (qk_i64 i = 0; i < mdim * ndim; i++) QK_QGEMM_ELEM(i);
  return 0;
}

int qk_scaled_matmul(QK_SMM_ARGS) {
  for (qk_i64 i = 0; i < nb * mdim * ndim; i++) QK_SMM_ELEM(i);
  return 0;
}

int qk_qlinear_add(QK_QLADD_ARGS) {
  QK_QLADD_SETUP;
  for (qk_i64 i = 0; i < n; i++) QK_QLADD_ELEM(i);
  return 0;
}

int qk_matmul_nbits(QK_NBITS_ARGS) {
  for (qk_i64 i = 0; i < rows * ndim; i++) QK_NBITS_ELEM(i);
  return 0;
}

int qk_gather_block_quantized(QK_GBQ_ARGS) {
  for (qk_i64 i = 0; i < n; i++) QK_GBQ_ELEM(i);
  return 0;
}

int qk_leaky_relu(QK_LEAKY_ARGS) {
  for (qk_i64 i = 0; i < n; i++) QK_LEAKY_ELEM(i);
  return 0;
}

int qk_avg_pool(QK_POOL_ARGS) {
  for (qk_i64 i = 0; i < n; i++) QK_POOL_ELEM(i);
  return 0;
}

int qk_conv(QK_CONV_ARGS) {
  QK_CONV_SETUP;
  for (qk_i64 i = 0; i < n; i++) QK_CONV_ELEM(i);
  return 0;
}

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

/* One element through each entry point's element function (used by tests of the specials). */
qk_u32 qk_encode_f32_export(qk_u32 xb, int kind, int saturate, int fnuz_inf_saturates) {
  return qk_encode_f32(xb, qk_info(kind), saturate, fnuz_inf_saturates);
}
#endif

#endif /* QCONFORM_QKERNELS_H */

/*
 * qkernels.h -- qconform's own kernels: QuantizeLinear, DequantizeLinear (ai.onnx and com.microsoft:
 * the same element functions), QLinearMatMul, DynamicQuantizeLinear, the integer compute ops
 * (MatMulInteger, ConvInteger, QLinearConv) and onnxruntime's contrib compute ops (QLinearAdd/Mul,
 * QGemm, MatMulIntegerToFloat, DynamicQuantizeMatMul, MatMulNBits, GatherBlockQuantized, and the
 * float functions of QLinearLeakyRelu, QLinearSigmoid, QLinearConcat and the average pools between a
 * dequantize and a quantize launch), one output element at a time, written ONCE for the host (gcc:
 * qconform/kernels/build.py) and the device (NVRTC: the one linted PTX build of
 * qconform/kernels/ptx.py, loaded by qconform/runners/gpu_kernel.py). The entry points' parameter
 * lists are qconform/kernels/__init__.py's ENTRY_POINTS. Bit-exact with qconform/oracle (the numpy
 * oracle is the truth; the corpus and the exhaustive sweeps in qconform/sweep/ check these files).
 *
 * This file is the first of the source's parts (qconform/kernels/__init__.py's PARTS, none over 600
 * lines): this one (the rules, the kinds, the one rounding, the quantize and dequantize elements,
 * element access), qk_contraction.h, qk_blocked.h, qk_windows.h, qk_functions.h (exp and sigmoid in
 * double, the float32 rounding decided only where proven) and qk_entries.h. Both compilers read them
 * as one translation unit, concatenated in that order by qconform.kernels.source() (NVRTC resolves
 * no #include from disk); the build key and the PTX digest cover that text.
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

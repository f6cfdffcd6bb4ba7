/* qk_functions.h -- part 5 of qkernels.h's translation unit (qconform/kernels/__init__.py's PARTS):
 * the elementary function the composed ops' float functions need, in plain double arithmetic (no
 * libm, no fused multiply-add: the same bits on the host and on the device), and the float32
 * rounding of its value decided only where its error bound proves it.
 * ------------------------------------------------------------------------------------------- */

/* Whether an element's float32 rounding was decided (the status byte beside its value). */
enum { QK_ROUNDING_DECIDED, QK_ROUNDING_UNDECIDED };

/* exp(t) for |t| < 106, relative error below 2^-46.4:
 *   k = rint(t / ln 2); r = (t - k * LN2_HI) - k * LN2_LO, LN2_HI of 32 significant bits: k * LN2_HI
 *   (|k| <= 153) and t - k * LN2_HI (a multiple of 2^-32 below 1) are exact; the rest of r is off by
 *   under 2^-54 (the rounding of k * LN2_LO and of the difference, ln 2's truncation to HI + LO);
 *   |r| <= 0.3466 + 2^-40;
 *   exp(r) by its Taylor polynomial of degree 14 (remainder under 2^-62.6), coefficients 1/j!
 *   correctly rounded, Horner's rule in double: error at most 2 * 14 * 2^-53 * exp(|r|) < 2^-47.3
 *   absolute, the coefficients' rounding 2^-53 * exp(|r|), over a value of at least exp(-0.35) = 0.70;
 *   exp(t) = exp(r) * 2^k exactly (no overflow or underflow for |t| < 106).
 * The bound is checked against 60-digit values in tests/test_kernels_functions.py. */
QK_FN double qk_exp_f64(double t) {
  const double ln2_hi = 0x1.62e42ffp-1, ln2_lo = -0x1.718432a1b0e26p-35, inv_ln2 = 0x1.71547652b82fep+0;
  const double k = qk_rint_f64(t * inv_ln2);
  const double r = (t - k * ln2_hi) - k * ln2_lo;
  double p = 0x1.93974a8c07c9dp-37;         /* 1/14! */
  p = p * r + 0x1.6124613a86d09p-33;        /* 1/13! */
  p = p * r + 0x1.1eed8eff8d898p-29;        /* 1/12! */
  p = p * r + 0x1.ae64567f544e4p-26;        /* 1/11! */
  p = p * r + 0x1.27e4fb7789f5cp-22;        /* 1/10! */
  p = p * r + 0x1.71de3a556c734p-19;        /* 1/9! */
  p = p * r + 0x1.a01a01a01a01ap-16;        /* 1/8! */
  p = p * r + 0x1.a01a01a01a01ap-13;        /* 1/7! */
  p = p * r + 0x1.6c16c16c16c17p-10;        /* 1/6! */
  p = p * r + 0x1.1111111111111p-7;         /* 1/5! */
  p = p * r + 0x1.5555555555555p-5;         /* 1/4! */
  p = p * r + 0x1.5555555555555p-3;         /* 1/3! */
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  return p * qk_pow2((int)k);
}

/* The float32 a double v rounds to, where every value within v * margin of v rounds to it: the exact
 * value, within v * (the stated bound) of v, then rounds to it too (RNE is monotonic); else *status is
 * QK_ROUNDING_UNDECIDED (the kernel does not guess). v > 0; margin a power of two, at least twice the
 * bound, so v * margin is exact and the bounds' own rounding (2^-53) keeps them outside [exact, v]. */
QK_FN float qk_decided_f32(double v, double margin, unsigned char *status) {
  const float lo = (float)(v - v * margin), hi = (float)(v + v * margin);
  *status = lo == hi ? QK_ROUNDING_DECIDED : QK_ROUNDING_UNDECIDED;
  return lo;
}

/* "y = 1 / (1 + exp(-x))" (Sigmoid-13, QLinearSigmoid's float function: qconform/docs/semantics.md
 * #qdq-sigmoid): the exact value rounded once to float32. In double the value is off by under
 * 2^-46.4 + 2 * 2^-53 < 2^-46 (exp's, then the sum's and the quotient's roundings). x >= 20: 1 - y
 * < e^-20 < 2^-25, which rounds to 1; x <= -105: y < e^-105 < 2^-150, which rounds to +0; NaN: undecided. */
QK_FN qk_u32 qk_sigmoid1(qk_u32 xb, unsigned char *status) {
  const float x = qk_u2f(xb);
  *status = QK_ROUNDING_DECIDED;
  if (x != x) {
    *status = QK_ROUNDING_UNDECIDED;
    return xb;
  }
  if (x >= 20.0f) return qk_f2u(1.0f);
  if (x <= -105.0f) return qk_f2u(0.0f);
  return qk_f2u(qk_decided_f32(1.0 / (1.0 + qk_exp_f64(-(double)x)), 0x1p-40, status));
}

/* The longest row the softmax entry point takes: its error bound grows with the row's length. */
#define QK_SOFTMAX_MAX_ROW 4096

/* "Softmax(input, axis) = Exp(input) / ReduceSum(Exp(input), axis=axis, keepdims=1)" (Softmax-13,
 * QLinearSoftmax's float function: qconform/docs/semantics.md#qdq-softmax), element j of a row of d
 * float32 codes (d <= QK_SOFTMAX_MAX_ROW): the exact value rounded once to float32, the row shifted by
 * its maximum top as the oracle does (the same value). In double: t = x_j - top (off by under
 * 105 * 2^-53 = 2^-46.3 where t > -105), e_j = exp(t) (relative error under 2^-46.4 + 2^-46.3 =
 * 2^-45.3); a term with t <= -105 is taken as 0 (e_j < 2^-151, and e_top = 1: its quotient rounds to
 * +0, and leaving it out moves the sum by under d * 2^-151); the sum in a fixed order (d * 2^-53 more),
 * the quotient (2^-53): under 2 * 2^-45.3 + (d + 1) * 2^-53 <= 2^-40.8 in all, decided with a margin of
 * 2^-38. A NaN or infinite element leaves its row undecided. */
QK_FN qk_u32 qk_softmax1(const void *x, qk_i64 row, qk_i64 d, qk_i64 j, unsigned char *status) {
  float top = qk_u2f(qk_load(x, row * d, 4));
  double sum = 0.0, ej = 0.0;
  qk_i64 k;
  *status = QK_ROUNDING_DECIDED;
  for (k = 0; k < d; k++) {
    const float v = qk_u2f(qk_load(x, row * d + k, 4));
    if (v != v || v - v != 0.0f) {
      *status = QK_ROUNDING_UNDECIDED;
      return qk_f2u(0.0f);
    }
    top = v > top ? v : top;
  }
  for (k = 0; k < d; k++) {
    const double t = (double)qk_u2f(qk_load(x, row * d + k, 4)) - (double)top;
    const double e = t > -105.0 ? qk_exp_f64(t) : 0.0;
    sum += e;
    if (k == j) ej = e;
  }
  if (ej == 0.0) return qk_f2u(0.0f);
  return qk_f2u(qk_decided_f32(ej / sum, 0x1p-38, status));
}

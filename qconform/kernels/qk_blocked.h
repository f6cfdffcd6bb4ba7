/* qk_blocked.h -- part 3 of qkernels.h's translation unit (qconform/kernels/__init__.py's PARTS):
 * the blocked weights of com.microsoft MatMulNBits and GatherBlockQuantized. */

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

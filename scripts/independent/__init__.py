"""The independent oracle's modules (scripts/independent_oracle.py is the entry point).

values   exact values, formats, codecs and output encoders
check    one case against the oracle: the Model every op module builds, the comparison, (a)-(f)
qdq      QuantizeLinear / DequantizeLinear readings
linalg   exact integer accumulation: numpy.matmul shapes and ONNX Conv windows
compute  QLinearMatMul, QLinearConv, ConvInteger, MatMulInteger readings
report   the report
"""

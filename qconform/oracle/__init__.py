"""The exact oracle: computes every case's expected outputs from first principles.

Importing this package registers every op version (explicitly, module by module)."""
from qconform.oracle import dequantize, quantize  # noqa: F401  (registration)
from qconform.oracle import dynamic_quantize, ms_quant, qlinear_matmul  # noqa: F401  (registration)
from qconform.oracle import conv  # noqa: F401  (registration: QLinearConv, ConvInteger, MatMulInteger)
from qconform.oracle import contrib_blocked, contrib_qlinear  # noqa: F401  (registration: com.microsoft compute ops)
from qconform.oracle import graph  # noqa: F401  (registration: QDQ patterns)
from qconform.oracle.base import ORACLES, Evaluation, InvalidModel, OpOracle, evaluate, oracle_for

__all__ = ["ORACLES", "Evaluation", "InvalidModel", "OpOracle", "evaluate", "oracle_for"]

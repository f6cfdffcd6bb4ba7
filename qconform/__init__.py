"""qconform: a bit-exact conformance suite for the ONNX quantization operators."""
from qconform.runner import BaseRunner, Runner, Unsupported

__version__ = "0.1.0"
__all__ = ["BaseRunner", "Runner", "Unsupported", "__version__"]

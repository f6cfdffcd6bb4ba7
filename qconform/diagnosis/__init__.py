"""Diagnosis: which known implementation deviation reproduces a runner's failing outputs.

``models`` holds the deviation models (the oracle with one step done differently, registered in
``MODELS``); ``diagnose`` runs failing cases through them (``diagnose_case``, where the outputs
are) and ranks the models per (op, version, types) group over a run (``rank``, ``overall``)."""
from qconform.diagnosis.diagnose import (NO_EXPLANATION, Diagnosis, GroupDiagnosis, diagnose_case, message_lines,
                                            overall, rank, render_markdown, render_text)
from qconform.diagnosis.models import MODELS, Deviation, get

__all__ = ["MODELS", "NO_EXPLANATION", "Deviation", "Diagnosis", "GroupDiagnosis", "diagnose_case", "get",
           "message_lines", "overall", "rank", "render_markdown", "render_text"]

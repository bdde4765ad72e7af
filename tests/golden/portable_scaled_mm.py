"""torch._scaled_mm on the CPU as PyTorch 2.11 computes it on most CPUs: its own emulation.

On a CPU with AMX-INT8 (Intel Sapphire Rapids and later) PyTorch sends a float8 product whose
two operands share one format to oneDNN, which has only its reference kernel for it there
(ONEDNN_VERBOSE=1 prints matmul,ref:any): 4.2 s for 4096x128 @ 128x512, against 5 ms for the
emulation (dequantise, float32 matmul, round) that every other CPU gets. mixt computes that
emulation on every CPU (framework/src/sdk/helpers/float8.cpp); a reference does the same by
turning oneDNN off around this one call only, so its other matmuls are computed as before.
"""
import torch

_scaled_mm = torch._scaled_mm


def _portable_scaled_mm(a, *args, **kwargs):
    if a.device.type != "cpu":
        return _scaled_mm(a, *args, **kwargs)
    enabled = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = False
    try:
        return _scaled_mm(a, *args, **kwargs)
    finally:
        torch.backends.mkldnn.enabled = enabled


def install():
    """Makes torch._scaled_mm, as torchao and these scripts call it, the portable one."""
    torch._scaled_mm = _portable_scaled_mm

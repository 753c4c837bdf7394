"""SGLang Diffusion's pipeline stages as its log and /metrics name them: the class names of
runtime/pipelines_core/stages/ (`[DenoisingStage] finished in 35.3833 seconds`) and the
`stage` label of `sglang:diffusion_stage_host_latency_seconds`, where the pseudo-stage
`DenoisingStep` is observed once per denoising step.

`STAGES` is the engine's ImageStages (collectors/base.py); the scorecard groups a request's time
by it: TextEncodingStage (and any *Encoding* stage) -> encode, DenoisingStage -> denoise,
DecodingStage -> decode, everything else (latent and timestep preparation, stages not seen yet)
-> other.
"""

from __future__ import annotations

from collectors.base import ImageStages

DENOISE_STAGE = "DenoisingStage"
STEP_STAGE = "DenoisingStep"  # sglang:diffusion_stage_host_latency_seconds{stage="DenoisingStep"}: s per step


def stage_group(stage: str) -> str:
    """encode | denoise | decode | other of a stage class name as SGLang logs it."""
    if stage == DENOISE_STAGE:
        return "denoise"
    if stage == "DecodingStage":
        return "decode"
    if "Encoding" in stage:
        return "encode"
    return "other"


STAGES = ImageStages(denoise=DENOISE_STAGE, step=STEP_STAGE, group=stage_group)

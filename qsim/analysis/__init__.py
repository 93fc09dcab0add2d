"""Analysis on top of the model and the engine: closed forms (``theory``)."""

from __future__ import annotations

from qsim.analysis.theory import (
    MODEL_GGC,
    MODEL_MMC,
    MODEL_PRIORITY,
    TheoryResult,
    allen_cunneen_wait_mean,
    cobham_waits,
    erlang_b,
    erlang_c,
    mmc_latency_mean,
    mmc_wait_mean,
    mmc_wait_quantile,
    mmc_wait_sf,
    predict,
)

__all__ = [
    "MODEL_GGC",
    "MODEL_MMC",
    "MODEL_PRIORITY",
    "TheoryResult",
    "allen_cunneen_wait_mean",
    "cobham_waits",
    "erlang_b",
    "erlang_c",
    "mmc_latency_mean",
    "mmc_wait_mean",
    "mmc_wait_quantile",
    "mmc_wait_sf",
    "predict",
]

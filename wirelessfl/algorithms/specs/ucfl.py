"""User-centric FL (Mestoukirdi et al., User-Centric Federated Learning, Globecom Wkshps 2021): eq. 5-7
gradient-similarity weights, k multicast streams."""

import math
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import ValidationInfo, field_validator

from wirelessfl.algorithms.search_space import COMMON_SEARCH_SPACE, Param
from wirelessfl.algorithms.spec import FLOAT, AlgorithmSpec, ClientBound, Footprint, FootprintInputs, Params, at_least, checked, finite, one_of

#: ``wirelessfl.algorithms.streams.FORMATIONS``, by name (a test checks they agree)
FORMATIONS = ("kmeans_rows", "kmeans_offdiag", "spectral", "agglomerative")


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _stream_count(value: Any) -> bool:
    return value in ("m", "all", "auto") or _positive_int(value)


def _range(value: Any) -> bool:
    return (
        isinstance(value, (list, tuple)) and len(value) == 2 and all(_positive_int(v) for v in value) and 2 <= value[0] <= value[1]
    )


def _batch_size(value: Any) -> bool:
    return (isinstance(value, float) and 0.0 < value < 1.0) or _positive_int(value)


class UserCentricFLParams(Params):
    streams: Annotated[Any, checked(_stream_count, "a positive int, 'm', 'all' or 'auto'")] = "m"
    """k, the downlink streams: an int, m (= all: unicast, eq. 6 rows as they are) or auto (silhouette)."""
    auto_range: Annotated[Any, checked(_range, "(low, high) with 2 <= low <= high")] = (2, 10)
    """The stream counts ``streams: auto`` chooses among."""
    sigma_batch_size: Annotated[Any, checked(_batch_size, "a fraction in (0, 1) of each client's data or a positive int of samples")] = 0.1
    sigma_batches: Annotated[int, checked(_positive_int, "a positive int")] = 10
    """K, the batches of eq. 7's variance estimate."""
    warmup_rounds: at_least(0) = 0
    recompute_every: at_least(0) = 0
    estimation_clients: one_of("available", "scheduled", wanted="'available' or 'scheduled'") = "available"
    """Who the weight-estimation round asks: every available client (the paper), or those ``training.scheduling``
    picks, as in a model round (a base station that does not serve a user in outage)."""
    temperature: Annotated[float, checked(lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0, "a positive finite number")] = 1.0
    """T of eq. 6."""
    gradient_layers: one_of("all", "body", wanted="'all' or 'body' (all but the last linear layer)") = "all"
    stream_formation: one_of(*FORMATIONS, wanted=f"one of {', '.join(FORMATIONS)}") = "kmeans_rows"
    min_stream_size: at_least(1) = 1
    channel_tiers: at_least(1) = 1

    @field_validator("channel_tiers")
    @classmethod
    def _tiers_within_streams(cls, tiers: int, info: ValidationInfo) -> int:
        streams = info.data.get("streams")
        if _positive_int(streams) and tiers > streams:
            raise ValueError(f"must be <= streams (streams // channel_tiers data clusters), got channel_tiers={tiers} with streams={streams}")
        return tiers


def sigma_groups(params: UserCentricFLParams, train_sizes: Sequence[int]) -> list[tuple[int, int]]:
    """Eq. 7's batches: (clients, K) per group of equal (n_k, K), as ``ucfl.sigma_batches_for``."""
    size = params.sigma_batch_size
    groups: dict[tuple[int, int], int] = {}
    for n in train_sizes:
        batch = max(1, math.floor(size * n)) if isinstance(size, float) else min(int(size), n)
        count = max(1, min(params.sigma_batches, n // max(batch, 1)))
        groups[(batch, count)] = groups.get((batch, count), 0) + 1
    return [(rows, key[1]) for key, rows in groups.items()]


def footprint(params: UserCentricFLParams, at: FootprintInputs) -> Footprint:
    """k stream models (``m`` for ``streams: m``), the ``[m, m]`` weights; its estimation round holds the full
    gradients ``[T, P]`` in float32 and twice in float64, then per (n_k, K) group of clients the batch gradients
    ``[r, K, P]`` in float32 and three float64 temporaries (the cast, the column selection, the difference: 28
    bytes an entry, as measured)."""
    m, T, P = at.clients, at.participants, at.model_params
    streams = params.streams
    if streams in ("m", "all"):
        kept = m
    elif streams == "auto":
        kept = min(m, params.auto_range[1])
    else:
        kept = min(m, streams)
    gradients = T * P * (FLOAT + 8 + 8)
    sigma = max((rows * k for rows, k in sigma_groups(params, at.train_sizes[:T])), default=0) * P * (FLOAT + 3 * 8)
    weights = 4 * m * m * 8  # W, distances, k-means copies (kept: W [m, m] and the streams' mixing rows [k, m], float64)
    extra = max(gradients, T * P * 8 + sigma) + weights
    return Footprint(
        kept=kept, kept_bytes=(m + kept) * m * 8, train_slots=T, state=at.optimizer_rows, eval_rows=m, eval_by_row=True, eval_slots=m, extra_bytes=extra,
        checkpoint_rows=kept,
    )


SPEC = AlgorithmSpec(
    name="ucfl",
    paper="Mestoukirdi et al., User-Centric Federated Learning, Globecom Wkshps 2021",
    description="user-centric aggregation (gradient-similarity weights), k multicast streams by k-means",
    params=UserCentricFLParams,
    implementation="wirelessfl.algorithms.ucfl:UserCentricFL",
    # the eq. 6 temperature decides how much of a row stays on the own group; warm-up rounds of FedAvg decide the
    # model theta-hat the collaboration gradients are taken at (on EMNIST rotations under label skew about 15 made
    # the groups recoverable: docs/research/ucfl-investigation.md, so the range reaches past it)
    search_space={**COMMON_SEARCH_SPACE, "temperature": Param.range(0.01, 1.0, log=True), "warmup_rounds": Param.range(0, 20)},
    client_bounds=(ClientBound("streams", lambda m: m, "one stream per user"),),
    footprint=footprint,
    # the model rounds are scheduled and their uploads compressed; the weight-estimation round asks every
    # available client and sends its gradients as they are (docs/levers.md)
    levers=frozenset({"scheduling", "compression"}),
)

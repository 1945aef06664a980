"""Oracle: FedAvg inside each ground-truth group, one stream per group.

The upper reference of user-centric-fl.txt §V ("4 different FedAvg instances,
one for each cluster of users, as if the groups were known beforehand"). It
reads the partition's true group ids, which no real method can see.
"""

from __future__ import annotations

from wirelessfl.algorithms.base import Context, MixingAlgorithm, block_mixing, register
from wirelessfl.algorithms.specs.oracle import SPEC


@register
class Oracle(MixingAlgorithm):
    """Block mixing over the true groups: ``W[g, j] = n_j / n_g`` for ``j`` in ``g``."""

    spec = SPEC

    def __init__(self, ctx: Context, **hparams) -> None:
        super().__init__(ctx, **hparams)
        self.mixing, self.assignment = block_mixing(ctx.data.groups, ctx.sizes())
        self.models = self.models.expand(self.mixing.shape[0], -1).clone()

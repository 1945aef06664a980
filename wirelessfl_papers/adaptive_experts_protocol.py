"""The adaptive experts paper's Table 2 from the protocol scenarios ``scenarios/paper/experts-cifar10-p*-protocol.yaml``.

The paper's own protocol (its CNN, AdamW for the local and gating models, every client every round, Table 1's
hyper-parameters until the IID tuning of ``experts-cifar10-tune-iid.yaml`` replaces them); the same tables and
claims as the scaled scenarios' page (``wirelessfl_papers.adaptive_experts``).
"""

from __future__ import annotations

from wirelessfl_papers.adaptive_experts import build

PAPER = build("-protocol")

"""Child process that exports Sionna SYS's NR link tables to a numpy ``.npz``.

Run as ``python -m wirelessfl.network._nr_build OUT PARAMS_JSON`` by ``nr.load_tables``
only. It is the one place that imports torch and Sionna on the network side, and it
runs in its own process because importing ``sionna.phy`` reseeds torch's global
generator (and initialises CUDA), which must not leak into the training process.

What it writes, for PUSCH (category 0) and PDSCH (category 1) of one MCS table:
Sionna's own interpolated per-code-block BLER tensor (``PHYAbstraction.bler_table_interp``,
MCS x code-block-size grid x SINR grid), the TS 38.214 modulation order and code rate
of every MCS (``MCSDecoderNR``), and the transport-block size, code-block size and
number of code blocks of every MCS at 1..275 PRBs (``TransportBlockNR``, the path
``PHYAbstraction`` takes: coded bits = Qm x allocated resource elements), the EESM beta of every MCS
(``EESM``'s default table, category-independent; 0 where it has none), and ``meta``: the Sionna
version, the parameters and the SHA-256 of the arrays (:func:`content_digest`), so that the cache says
what it was built from and a changed file is found.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

MAX_PRBS = 275
"""TS 38.101-1: the largest NR carrier has 275 PRBs (273 at 100 MHz / 30 kHz)."""

EXIT_NO_SIONNA = 3

TABLE_ARRAYS = ("bler", "qm", "rate", "tbs", "cbs", "ncb", "snr_grid", "cbs_grid", "eesm_beta")
"""The arrays of a table file, in the order :func:`content_digest` hashes them (``meta`` holds the digest)."""


def content_digest(arrays) -> str:
    """SHA-256 of the table arrays (each one's name, dtype, shape and bytes, in ``TABLE_ARRAYS`` order), which the
    file's ``meta`` records and ``nr.load_tables`` checks: a file changed after it was built is rebuilt."""
    digest = hashlib.sha256()
    for name in TABLE_ARRAYS:
        array = arrays[name]
        digest.update(json.dumps([name, array.dtype.str, list(array.shape)]).encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def build(out_path: str, params: dict) -> None:
    try:
        import numpy as np
        import sionna
        import sionna.sys
        import torch
        from sionna.phy.nr.utils import MCSDecoderNR, TransportBlockNR
    except ImportError as error:
        print(f"{error}", file=sys.stderr)
        raise SystemExit(EXIT_NO_SIONNA) from error

    table = int(params["mcs_table"])
    re_per_prb = int(params["re_per_prb"])
    folder = os.path.join(os.path.dirname(sionna.sys.__file__), "bler_tables")
    files = [os.path.join(folder, f"{channel}_table{table}.json") for channel in ("PUSCH", "PDSCH")]
    abstraction = sionna.sys.PHYAbstraction(load_bler_tables_from=files, device="cpu")
    bler = abstraction.bler_table_interp[:, table - 1].cpu().numpy().astype(np.float32)  # [cat, mcs, cbs, snr]
    num_mcs = bler.shape[1]
    decoder, blocks = MCSDecoderNR(device="cpu"), TransportBlockNR(device="cpu")
    mcs = torch.arange(num_mcs)
    prbs = torch.arange(1, MAX_PRBS + 1)
    qm = np.zeros((2, num_mcs), dtype=np.int32)
    rate = np.zeros((2, num_mcs), dtype=np.float32)
    tbs = np.zeros((2, num_mcs, MAX_PRBS), dtype=np.int64)
    cbs = np.zeros((2, num_mcs, MAX_PRBS), dtype=np.int64)
    ncb = np.zeros((2, num_mcs, MAX_PRBS), dtype=np.int64)
    for category in (0, 1):
        order, coderate = decoder(mcs, table, category, check_index_validity=False)
        qm[category], rate[category] = order.numpy(), coderate.numpy()
        valid = order > 0
        grid_order = torch.where(valid, order, torch.full_like(order, 2))[:, None].expand(num_mcs, MAX_PRBS)
        grid_rate = torch.where(valid, coderate, torch.full_like(coderate, 0.5))[:, None].expand(num_mcs, MAX_PRBS)
        coded = grid_order * (prbs[None, :] * re_per_prb)
        tb, cb, n = blocks.transport_block_size(grid_order.contiguous(), grid_rate.contiguous(), coded.to(torch.int32))
        keep = valid[:, None].numpy()
        tbs[category] = np.where(keep, tb.numpy(), 0)
        cbs[category] = np.where(keep, cb.numpy(), 0)
        ncb[category] = np.where(keep, n.numpy(), 0)
    betas = sionna.sys.EESM(device="cpu").beta_table["index"][table]
    eesm_beta = np.zeros(num_mcs, dtype=np.float64)
    eesm_beta[: min(num_mcs, len(betas))] = betas[:num_mcs]
    snr_min, snr_max, snr_step = abstraction.snr_db_interp_min_max_delta
    cbs_min, cbs_max, cbs_step = abstraction.cbs_interp_min_max_delta
    arrays = {
        "bler": bler, "qm": qm, "rate": rate, "tbs": tbs, "cbs": cbs, "ncb": ncb,
        "snr_grid": np.array([snr_min, snr_max, snr_step], dtype=np.float64),
        "cbs_grid": np.array([cbs_min, cbs_max, cbs_step], dtype=np.float64),
        "eesm_beta": eesm_beta,
    }
    meta = {"sionna": sionna.__version__, "params": params, "sha256": content_digest(arrays)}
    tmp = f"{out_path}.{os.getpid()}.tmp.npz"
    np.savez_compressed(tmp, **arrays, meta=np.array(json.dumps(meta, sort_keys=True)))
    os.replace(tmp, out_path)  # over whatever was there, a symbolic link or a FIFO included: the name now holds this file


if __name__ == "__main__":
    build(sys.argv[1], json.loads(sys.argv[2]))

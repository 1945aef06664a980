"""Data of a run: datasets, how they are dealt out to clients, and each client's splits.

``datasets`` loads a pool of samples, ``partition`` deals it out (one splitter,
any number of shifts), ``federated`` builds the per-client train/val/test tensors
(:class:`~wirelessfl.learning.data.federated.FederatedData`), and ``data_files``
says where each dataset's files live without importing torch. Import from the
modules; this file imports nothing, so ``config`` can read ``data_files`` without
loading torch.
"""

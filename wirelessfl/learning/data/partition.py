"""Partitioners: how a pooled dataset becomes clients, and how client groups are shifted.

A partition is a list of steps: exactly one *splitter* (which pool samples each
client gets) and any number of *shifts* (clients fall into groups; each group's
images or labels are transformed). Most splitters give client i exactly the
``sizes[i]`` samples ``data.samples`` asked for; two decide the client sizes
themselves (``sizes="outcome"``) and only use the total. Splitters:

* ``iid`` -- a uniform random split;
* ``dirichlet`` -- label shift, client i's class proportions q_i ~ Dir(alpha), for given
  client sizes (Hsu et al. 2019); ``over: latent`` gives FedEM's synthetic clients their
  mixture weights (fedem-mixture-of-distributions.txt, App. I.1);
* ``per_class_dirichlet`` -- each class's samples divided among the clients by a
  Dir(alpha) draw over the clients; sizes are an outcome (fedem-mixture-of-distributions.txt
  Sec. 5, "as in [65]", alpha = 0.4 for EMNIST and CIFAR-10; user-centric-fl.txt Sec. IV-A cites
  FedEM for its Dirichlet 0.4);
* ``shards`` -- pathological split, ``classes`` classes per client in equal parts (McMahan et al. 2017);
* ``random_classes`` -- each client holds ``classes`` = K randomly chosen classes, each class
  dealt round-robin among its holders; sizes are an outcome (pflego.txt Sec. 4.3, K = 2, C/2, C);
* ``majority`` -- 2 majority classes make a fraction ``p`` of each client's data, the rest is
  sampled uniformly from the other classes (adaptive-expert-models.txt Sec. 4.2);
* ``natural`` -- every client id of the dataset (a user loader's third array) is one client
  holding all its samples, as LEAF splits FEMNIST by writer; sizes are the dataset's
  (``sizes="natural"``: nothing is drawn).

Shifts: ``rotation`` (covariate shift: group g's images rotated by ``angles[g]``) and
``label_permutation`` (concept shift: group g's labels permuted, group 0 unchanged),
both from the User-Centric FL scenarios; ``local_labels`` (each client's labels
re-indexed 0..K_i-1, the per-client label spaces of pflego.txt §3.1).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from wirelessfl.learning.data.catalog import PARTITIONERS, PartitionError, Step, check_samples_spec, is_int




@dataclass(frozen=True)
class SplitInput:
    """What a splitter sees of the pool: labels (and hidden mixture components, if any)."""

    labels: np.ndarray
    num_classes: int
    latent: np.ndarray | None = None
    client_ids: np.ndarray | None = None


@dataclass(frozen=True)
class GroupShift:
    """A shift's outcome: each client's group, and how to transform a group's samples."""

    name: str
    groups: np.ndarray
    num_groups: int
    transform: Callable[[int, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]] = field(repr=False)
    detail: str = ""
    #: whether its groups are ground-truth groups (Oracle, the group columns); False for per-client relabelling
    defines_groups: bool = True


_FUNCTIONS: dict[str, Callable] = {}
"""Each partitioner's function by name (its declaration: ``catalog.PARTITIONERS``)."""


def register_partitioner(name: str):
    """Decorator: ``function`` carries out the partitioner ``catalog.PARTITIONERS[name]`` declares."""
    if name not in PARTITIONERS:
        raise ValueError(f"partitioner {name!r} is not declared in wirelessfl.learning.data.catalog.PARTITIONERS")

    def decorate(function: Callable) -> Callable:
        _FUNCTIONS[name] = function
        return function

    return decorate


OUTCOME_DRAWS = 100


def run_splitter(step: Step, pool: SplitInput, sizes: np.ndarray, rng: np.random.Generator, minimum: int = 1) -> list[np.ndarray]:
    """Pool indices per client, no sample twice.

    A ``"given"`` splitter gives client i exactly ``sizes[i]`` samples. An ``"outcome"`` splitter deals
    ``sizes.sum()`` samples; a draw that leaves a client below ``minimum`` (one sample per train/val/test
    split) is drawn again, up to ``OUTCOME_DRAWS`` times, as the Dirichlet split code of FedMA (FedEM's
    reference [65]) redraws until every client has 10. FedEM's own code keeps whatever the first draw gives;
    at the seed papers' scales (hundreds of samples per client) a second draw is practically never needed.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    if int(sizes.sum()) > len(pool.labels):
        raise PartitionError(f"data.samples asks for {int(sizes.sum())} samples in total but the dataset pool has only {len(pool.labels)}")
    if step.info.sizes == "given":
        return _FUNCTIONS[step.info.name](step, pool, sizes, rng)
    if step.info.sizes == "natural":
        clients = _FUNCTIONS[step.info.name](step, pool, len(sizes))
        small = [client for client, taken in enumerate(clients) if len(taken) < minimum]
        if small:
            raise PartitionError(
                f"{step.where}: client {small[0]} has {len(clients[small[0]])} samples but every client needs at least "
                f"{minimum} (one per train/val/test split); {len(small)} client(s) are below it: drop them in the loader"
            )
        return clients
    best = 0
    for _ in range(OUTCOME_DRAWS):
        clients = _FUNCTIONS[step.info.name](step, pool, int(sizes.sum()), len(sizes), rng)
        smallest = min(len(c) for c in clients)
        if smallest >= minimum:
            return clients
        best = max(best, smallest)
    raise PartitionError(
        f"{step.where}: all {OUTCOME_DRAWS} draws left some client with fewer than the minimum of {minimum} samples "
        f"(the best draw's smallest client had {best}); deal more samples (data.samples.total), use fewer clients or a less skewed split"
    )


def run_shift(step: Step, num_clients: int, input_shape: tuple[int, int, int], num_classes: int, rng: np.random.Generator) -> GroupShift:
    return _FUNCTIONS[step.info.name](step, num_clients, input_shape, num_classes, rng)


def combine_groups(shifts: Sequence[GroupShift], num_clients: int) -> np.ndarray:
    """One ground-truth group id per client: each distinct combination of shift groups, numbered 0.. in order."""
    shifts = [s for s in shifts if s.defines_groups]
    if not shifts:
        return np.zeros(num_clients, dtype=np.int64)
    codes = np.stack([s.groups for s in shifts], axis=1)
    _, groups = np.unique(codes, axis=0, return_inverse=True)
    return groups.reshape(-1).astype(np.int64)


# --- sample counts per client -------------------------------------------------------------------


def client_sizes(samples: Mapping, num_clients: int, pool_size: int, minimum: int, rng: np.random.Generator) -> np.ndarray:
    """Samples per client (before the train/val/test split), every client at least ``minimum``.

    ``{"per_client": n}``: n each. ``{"total": N}`` or ``{"total": "all"}``: N split as equally as
    possible. ``{"total": N, "distribution": "lognormal", "sigma": s}``: each client gets ``minimum``
    plus a share of the rest proportional to a LogNormal(0, s) weight (largest remainders keep the sum N).
    ``{"per_client": n, "reuse": r}``: a population larger than its pool, dealt in up to r passes over the pool
    (:func:`reuse_passes`). The spec's own shape is checked first (``catalog.check_samples_spec``, which the
    schema runs too); here what needs the pool and the split.
    """
    if not is_int(num_clients) or num_clients < 1:
        raise PartitionError(f"data.num_clients must be a positive integer; got {num_clients!r}")
    check_samples_spec(samples)
    if "per_client" in samples:
        per_client = samples["per_client"]
        if per_client < minimum:
            raise PartitionError(
                f"data.samples.per_client = {per_client} is below the minimum of {minimum} samples per client "
                f"(every split in data.split needs at least one sample)"
            )
        total = per_client * num_clients
        reuse = samples.get("reuse", 1)
        if reuse == 1 and total > pool_size:
            raise PartitionError(
                f"data.samples asks for {total} samples in total ({num_clients} clients x {per_client}) but the dataset pool has only {pool_size}"
                f"{'' if per_client > pool_size else '; data.samples.reuse lets several clients share a sample'}"
            )
        per_pass = pool_size // per_client
        if per_pass == 0:
            raise PartitionError(f"data.samples.per_client = {per_client} is more than the dataset pool's {pool_size} samples")
        if num_clients > reuse * per_pass:
            raise PartitionError(
                f"data.samples asks for {per_client} samples for each of {num_clients} clients but with reuse {reuse} the dataset pool of "
                f"{pool_size} serves at most {reuse * per_pass} ({reuse} passes of {per_pass} clients); raise data.samples.reuse to "
                f"{-(-num_clients // per_pass)}"
            )
        return np.full(num_clients, per_client, dtype=np.int64)
    total = pool_size if samples["total"] == "all" else samples["total"]
    if total > pool_size:
        raise PartitionError(f"data.samples asks for {total} samples in total but the dataset pool has only {pool_size}")
    if total < minimum * num_clients:
        raise PartitionError(
            f"data.samples.total = {total} is too small: {num_clients} clients need at least {minimum} samples each "
            f"(every split in data.split needs at least one sample), i.e. {minimum * num_clients}"
        )
    spare = total - minimum * num_clients
    if samples.get("distribution", "equal") == "equal":
        weights = np.ones(num_clients)
    else:
        weights = rng.lognormal(0.0, float(samples.get("sigma", 1.0)), size=num_clients)
    return minimum + _largest_remainder(spare, weights)


def reuse_passes(sizes: np.ndarray, pool_size: int) -> list[np.ndarray]:
    """Clients in passes over the pool (``data.samples.reuse``): as few passes as the pool needs, consecutive clients
    spread evenly over them (so a pass leaves room for splitters that pick classes, such as shards), each pass dealt
    from the whole pool. Within a pass no sample goes to two clients; across passes a sample goes to at most one
    client of each pass, so to at most ``reuse`` clients, and never twice to one client. A population that fits in
    the pool is one pass: the deal it would get without reuse."""
    ends = np.cumsum(sizes)
    greedy, start = [], 0
    while start < len(sizes):
        used = int(ends[start - 1]) if start else 0
        stop = max(start + 1, int(np.searchsorted(ends, used + pool_size, side="right")))
        greedy.append(np.arange(start, stop))
        start = stop
    even = np.array_split(np.arange(len(sizes)), len(greedy))
    return even if all(int(np.sum(sizes[p])) <= pool_size for p in even) else greedy


def _largest_remainder(total: int, weights: np.ndarray) -> np.ndarray:
    """Integers proportional to ``weights`` summing exactly to ``total`` (ties go to lower indices)."""
    exact = total * weights / weights.sum()
    counts = np.floor(exact).astype(np.int64)
    left = total - int(counts.sum())
    order = np.argsort(-(exact - counts), kind="stable")
    counts[order[:left]] += 1
    return counts


# --- splitters ---------------------------------------------------------------------------------


class ClassQueues:
    """Shuffled pool indices per class; taking samples removes them, so no sample is given twice.

    ``take`` only counts (clients take from the front of each queue in client order), and :meth:`dealt`
    cuts every client's indices at once at the end: a per-client gather cost 100,000 clients seconds."""

    def __init__(self, labels: np.ndarray, num_classes: int, rng: np.random.Generator):
        order = rng.permutation(len(labels))
        self.by_class = order[np.argsort(labels[order], kind="stable")]
        self.bounds = np.searchsorted(labels[self.by_class], np.arange(num_classes + 1))
        self.lengths = np.diff(self.bounds)
        self.used = np.zeros(num_classes, dtype=np.int64)
        self.takes: list[np.ndarray] = []

    @property
    def available(self) -> np.ndarray:
        return self.lengths - self.used

    def take(self, counts: np.ndarray) -> None:
        """The next client takes ``counts[k]`` samples of each class k."""
        counts = np.asarray(counts, dtype=np.int64)
        self.used += counts
        self.takes.append(counts)

    def take_rows(self, counts: np.ndarray) -> None:
        """Clients take the rows of ``counts`` ``[clients, classes]`` in turn (as many :meth:`take` calls)."""
        counts = np.asarray(counts, dtype=np.int64)
        self.used += counts.sum(axis=0)
        self.takes.extend(counts)

    def dealt(self) -> list[np.ndarray]:
        """Each client's pool indices in the order taken: its classes ascending, each in queue order."""
        if not self.takes:
            return []
        counts = np.stack(self.takes)  # [clients, classes]
        clients, classes = counts.shape
        per_class = counts.sum(axis=0)
        starts = self.bounds[:-1]
        # class k's first per_class[k] queue entries, owned by clients in turn (np.repeat over the client axis)
        samples = np.concatenate([self.by_class[starts[k] : starts[k] + per_class[k]] for k in range(classes)])
        owners = np.repeat(np.tile(np.arange(clients), classes), counts.T.ravel())
        ordered = samples[np.argsort(owners, kind="stable")]
        return np.split(ordered, np.cumsum(counts.sum(axis=1))[:-1])


def _fill(wanted: np.ndarray, room: np.ndarray, allowed: np.ndarray, where: str, client: int) -> np.ndarray:
    """Per-class counts: ``wanted`` where the pool has them; shortfalls spread evenly over ``allowed`` classes with room."""
    take = np.minimum(wanted, room)
    short = int(wanted.sum() - take.sum())
    while short > 0:
        open_classes = np.flatnonzero((room - take > 0) & allowed)
        if len(open_classes) == 0:
            raise PartitionError(
                f"{where}: client {client} needs {short} more samples from classes {np.flatnonzero(allowed).tolist()} "
                f"but the pool has none left; ask for fewer samples in data.samples (every client takes fixed shares of its "
                f"classes, so the whole pool, total: all, fits only if the classes divide evenly)"
            )
        share = np.full(len(open_classes), short // len(open_classes), dtype=np.int64)
        share[: short % len(open_classes)] += 1
        added = np.minimum(share, (room - take)[open_classes])
        take[open_classes] += added
        short -= int(added.sum())
    return take


@register_partitioner("iid")
def _iid(step: Step, pool: SplitInput, sizes: np.ndarray, rng: np.random.Generator) -> list[np.ndarray]:
    order = rng.permutation(len(pool.labels))
    return np.split(order[: int(sizes.sum())], np.cumsum(sizes)[:-1])


def _alpha(step: Step) -> float:
    alpha = step.params["alpha"]
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not (alpha > 0 and math.isfinite(alpha)):
        raise PartitionError(f"{step.where}: alpha must be a positive finite number; got {alpha!r}")
    return float(alpha)


def _by_class(labels: np.ndarray, num_classes: int, rng: np.random.Generator, total: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """``total`` pool indices drawn uniformly without replacement, and their positions per class (in random order)."""
    chosen = rng.permutation(len(labels))[:total]
    order = np.argsort(labels[chosen], kind="stable")
    bounds = np.searchsorted(labels[chosen][order], np.arange(num_classes + 1))
    return chosen, [order[bounds[k] : bounds[k + 1]] for k in range(num_classes)]


def _group_by_owner(chosen: np.ndarray, owners: np.ndarray, num_clients: int) -> list[np.ndarray]:
    order = np.argsort(owners, kind="stable")
    return np.split(chosen[order], np.cumsum(np.bincount(owners, minlength=num_clients))[:-1])


@register_partitioner("dirichlet")
def _dirichlet(step: Step, pool: SplitInput, sizes: np.ndarray, rng: np.random.Generator) -> list[np.ndarray]:
    alpha, over = _alpha(step), step.params["over"]
    if over == "label":
        labels, num_classes = pool.labels, pool.num_classes
    elif over == "latent":
        if pool.latent is None:
            raise PartitionError(f"{step.where}: over: 'latent' needs a dataset with hidden mixture components (synthetic)")
        labels, num_classes = pool.latent, int(pool.latent.max()) + 1
    else:
        raise PartitionError(f"{step.where}: over must be 'label' or 'latent'; got {over!r}")
    queues = ClassQueues(labels, num_classes, rng)
    proportions = rng.dirichlet(np.full(num_classes, float(alpha)), size=len(sizes))
    client = 0
    while client < len(sizes):
        client += _draw_while_nothing_runs_out(queues, proportions[client:], sizes[client:], rng)
        if client < len(sizes):
            queues.take(_dirichlet_client(proportions[client], int(sizes[client]), queues.available, rng))
            client += 1
    return queues.dealt()


#: Clients whose Dirichlet draws :func:`_draw_while_nothing_runs_out` makes in one call.
DIRICHLET_BLOCK = 4096


def _dirichlet_client(proportions: np.ndarray, size: int, room: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One client's class counts: multinomial draws with its proportions renormalised over the classes that
    still have samples, until it has ``size`` (each pass either finishes or empties at least one class)."""
    take = np.zeros(len(room), dtype=np.int64)
    need = size
    while need > 0:
        has_room = room - take > 0
        weights = proportions * has_room
        if weights.sum() <= 0:  # q_i puts all its mass on emptied classes: fall back to what is left
            weights = (room - take).astype(np.float64)
        draw = np.minimum(rng.multinomial(need, weights / weights.sum()), room - take)
        take += draw
        need -= int(draw.sum())
    return take


def _draw_while_nothing_runs_out(queues: ClassQueues, proportions: np.ndarray, sizes: np.ndarray, rng: np.random.Generator) -> int:
    """Deal the leading clients whose one multinomial draw fits the pool and leaves every class it may draw
    from non-empty for the next client, in blocks of one vectorised draw; return how many were dealt.

    Such a client's :func:`_dirichlet_client` is exactly one draw with the same weights, so the result and
    the generator's state are those of the client-by-client loop: a block's draw is made from a copy of the
    generator's state, and only the rows before the first client that does not fit are drawn again for real
    (a multinomial row consumes the same random numbers alone or in a block)."""
    dealt = 0
    while dealt < len(sizes):
        room = queues.available
        has_room = room > 0
        rows = slice(dealt, min(len(sizes), dealt + DIRICHLET_BLOCK))
        weights = proportions[rows] * has_room
        totals = weights.sum(axis=1, keepdims=True)
        usable = int(np.argmin(totals[:, 0] > 0)) if (totals[:, 0] <= 0).any() else len(totals)
        if usable == 0:
            return dealt
        trial = np.random.Generator(type(rng.bit_generator)())
        trial.bit_generator.state = rng.bit_generator.state
        draws = trial.multinomial(sizes[rows][:usable], weights[:usable] / totals[:usable])
        after = np.cumsum(draws, axis=0)
        before = after - draws
        fits = (after <= room).all(axis=1) & ((before < room) | ~has_room).all(axis=1)
        count = int(np.argmin(fits)) if not fits.all() else usable
        if count == usable and usable == rows.stop - rows.start:
            rng.bit_generator.state = trial.bit_generator.state
        elif count:
            draws = rng.multinomial(sizes[rows][:count], weights[:count] / totals[:count])
        if count == 0:
            return dealt
        queues.take_rows(draws[:count])
        dealt += count
        if count < rows.stop - rows.start:
            return dealt
    return dealt


@register_partitioner("per_class_dirichlet")
def _per_class_dirichlet(step: Step, pool: SplitInput, total: int, num_clients: int, rng: np.random.Generator) -> list[np.ndarray]:
    """FedEM's split (fedem-mixture-of-distributions.txt Sec. 5: "distributing samples with the same label
    across the clients according to a symmetric Dirichlet distribution with parameter 0.4, as in [65]").

    As the authors' code does (split_dataset_by_labels with n_components = -1, the setting of every run in
    the paper): take ``total`` pool samples uniformly at random (its s_frac), then for each class k draw
    p_k ~ Dir(alpha * 1_m) over the m clients and n_k,. ~ Multinomial(n_k, p_k), and give the class's
    (shuffled) samples out in those counts. No minimum per client there; see ``run_splitter``.
    """
    alpha = _alpha(step)
    chosen, members = _by_class(pool.labels, pool.num_classes, rng, total)
    owners = np.empty(total, dtype=np.int64)
    for positions in members:
        if len(positions) == 0:
            continue
        weights = rng.dirichlet(np.full(num_clients, alpha))
        counts = rng.multinomial(len(positions), weights / weights.sum())
        owners[positions] = np.repeat(np.arange(num_clients), counts)
    return _group_by_owner(chosen, owners, num_clients)


def _present_classes(pool: SplitInput) -> tuple[np.ndarray, str]:
    """Classes with samples, and how to name them in errors. Only these are dealt out: EMNIST 'letters'
    lists an empty class 0 ('N/A') that would otherwise become some clients' shard or majority class."""
    present = np.flatnonzero(np.bincount(pool.labels, minlength=pool.num_classes) > 0)
    return present, "the dataset's classes" if len(present) == pool.num_classes else "the dataset's classes that have samples"


def _balanced_class_sets(num_clients: int, present: np.ndarray, per_client: int, rng: np.random.Generator) -> np.ndarray:
    """Client i gets classes perm[(c*i + j) mod K], j < c: distinct within a client, used equally often overall."""
    perm = rng.permutation(present)
    slots = per_client * np.arange(num_clients)[:, None] + np.arange(per_client)[None, :]
    return perm[slots % len(present)]


def _even_counts(total: int, classes: np.ndarray, num_classes: int, rng: np.random.Generator) -> np.ndarray:
    """``total`` spread as evenly as possible over ``classes``; the remainder goes to randomly chosen ones."""
    counts = np.zeros(num_classes, dtype=np.int64)
    if len(classes) == 0:
        return counts
    counts[classes] = total // len(classes)
    counts[rng.choice(classes, size=total % len(classes), replace=False)] += 1
    return counts


@register_partitioner("shards")
def _shards(step: Step, pool: SplitInput, sizes: np.ndarray, rng: np.random.Generator) -> list[np.ndarray]:
    classes, num_classes = step.params["classes"], pool.num_classes
    present, named = _present_classes(pool)
    if not is_int(classes) or not (1 <= classes <= len(present)):
        raise PartitionError(f"{step.where}: classes must be an integer between 1 and {len(present)} ({named}); got {classes!r}")
    queues = ClassQueues(pool.labels, num_classes, rng)
    class_sets = _balanced_class_sets(len(sizes), present, classes, rng)
    # the only draws (the remainders' classes) do not depend on what the pool has left: draw them all first
    wanted = np.stack([_even_counts(int(size), class_sets[client], num_classes, rng) for client, size in enumerate(sizes)])
    start = min(_fitting_prefix(queues.available, wanted), int(np.argmax(sizes < classes)) if (sizes < classes).any() else len(sizes))
    queues.take_rows(wanted[:start])
    for client in range(start, len(sizes)):
        if sizes[client] < classes:
            raise PartitionError(f"{step.where}: client {client} has {sizes[client]} samples, fewer than classes = {classes}")
        allowed = np.zeros(num_classes, dtype=bool)
        allowed[class_sets[client]] = True
        take = _fill(wanted[client], queues.available, allowed, step.where, client)
        if np.count_nonzero(take) != classes:
            raise PartitionError(
                f"{step.where}: client {client} cannot get samples of all {classes} of its classes {sorted(class_sets[client].tolist())} "
                f"(the pool has none left of some); ask for fewer samples in data.samples"
            )
        queues.take(take)
    return queues.dealt()


def _fitting_prefix(available: np.ndarray, wanted: np.ndarray) -> int:
    """How many leading rows of ``wanted`` ``[clients, classes]`` the pool holds in full, taken in turn (those
    clients' fills are their wanted counts, so they are dealt at once)."""
    fits = (np.cumsum(wanted, axis=0) <= available).all(axis=1)
    return len(fits) if fits.all() else int(np.argmin(fits))


@register_partitioner("random_classes")
def _random_classes(step: Step, pool: SplitInput, total: int, num_clients: int, rng: np.random.Generator) -> list[np.ndarray]:
    """PFLEGO's degrees of personalization (pflego.txt Sec. 4.3): "each client has K randomly chosen classes"
    out of C, K = 2, C/2 or C.

    The paper says no more; the authors' code (RoundRobin in sotirisnik/PFLEGO main.py) draws each client's
    K classes independently (without replacement within the client); if some class is then held by nobody,
    it overwrites the first clients' sets with consecutive pairs of a random permutation of the classes, and
    it deals every class's shuffled samples one at a time to its holders in turn, so each holder gets an
    equal share (+-1) and the whole pool is used. Here the overwrite takes consecutive blocks of K (cycling
    the permutation), so every client keeps exactly K classes; for K = 2 and even C it is the same.
    """
    classes = step.params["classes"]
    present, named = _present_classes(pool)
    if not is_int(classes) or not (1 <= classes <= len(present)):
        raise PartitionError(f"{step.where}: classes must be an integer between 1 and {len(present)} ({named}); got {classes!r}")
    if num_clients * classes < len(present):
        raise PartitionError(
            f"{step.where}: {num_clients} clients with classes = {classes} each cannot hold all {len(present)} classes "
            f"(every class is dealt to the clients holding it); use more clients or more classes"
        )
    class_sets = present[np.argsort(rng.random((num_clients, len(present))), axis=1)[:, :classes]]
    held = np.zeros(pool.num_classes, dtype=bool)
    held[class_sets] = True
    if not held[present].all():
        cover = -(-len(present) // classes)
        class_sets[:cover] = _balanced_class_sets(cover, present, classes, rng)
    chosen, members = _by_class(pool.labels, pool.num_classes, rng, total)
    owners = np.empty(total, dtype=np.int64)
    for k in present:
        holders = np.flatnonzero((class_sets == k).any(axis=1))
        owners[members[k]] = holders[np.arange(len(members[k])) % len(holders)]
    return _group_by_owner(chosen, owners, num_clients)


@register_partitioner("majority")
def _majority(step: Step, pool: SplitInput, sizes: np.ndarray, rng: np.random.Generator) -> list[np.ndarray]:
    """adaptive-expert-models.txt Sec. 4.2: "two majority classes ... make up a fraction p of the data samples
    of the client. The remainder fraction (1 - p) is sampled uniformly from the other 8 classes."

    round(p * n) majority samples, split evenly between the majority classes (the authors' code,
    EricssonResearch/fl-moe cifar_noniid2, takes int(p * n / 2) of each); with ``rest: sampled`` each other
    sample's class is drawn uniformly from the other classes (a multinomial), with ``rest: even`` the rest
    is spread in exactly equal counts. The paper does not say how majority classes are assigned; here they
    come from one random permutation of the classes, cycled (with 2 classes client i gets perm[2i mod C] and perm[(2i + 1) mod C]):
    disjoint pairs for the first C/2 clients, like the authors' random pairs drawn without replacement,
    then repeated, so clients fall into C/2 groups of equal majority pairs.
    """
    p, classes, rest, num_classes = step.params["p"], step.params["classes"], step.params["rest"], pool.num_classes
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not (0 <= p <= 1):
        raise PartitionError(f"{step.where}: p must be a number between 0 and 1; got {p!r}")
    if rest not in ("sampled", "even"):
        raise PartitionError(f"{step.where}: rest must be 'sampled' or 'even'; got {rest!r}")
    present, named = _present_classes(pool)
    if not is_int(classes) or not (1 <= classes < len(present)):
        note = "" if len(present) == num_classes else f" ({named}: {len(present)}, less one)"
        raise PartitionError(f"{step.where}: classes must be an integer between 1 and {len(present) - 1}{note}; got {classes!r}")
    queues = ClassQueues(pool.labels, num_classes, rng)
    class_sets = _balanced_class_sets(len(sizes), present, classes, rng)
    has_samples = np.zeros(num_classes, dtype=bool)
    has_samples[present] = True
    majors, minors = [], []
    for client, size in enumerate(sizes):  # every draw first, in the client-by-client order: none depends on the pool
        is_major = np.zeros(num_classes, dtype=bool)
        is_major[class_sets[client]] = True
        minor_classes = np.flatnonzero(has_samples & ~is_major)
        n_major = math.floor(p * int(size) + 0.5)
        n_minor = int(size) - n_major
        majors.append(_even_counts(n_major, class_sets[client], num_classes, rng))
        if rest == "even":
            wanted = _even_counts(n_minor, minor_classes, num_classes, rng)
        else:
            wanted = np.zeros(num_classes, dtype=np.int64)
            wanted[minor_classes] = rng.multinomial(n_minor, np.full(len(minor_classes), 1.0 / len(minor_classes)))
        minors.append(wanted)
    majors_wanted, minors_wanted = np.stack(majors), np.stack(minors)
    start = _fitting_prefix(queues.available, majors_wanted + minors_wanted)
    queues.take_rows(majors_wanted[:start] + minors_wanted[:start])
    for client in range(start, len(sizes)):
        is_major = np.zeros(num_classes, dtype=bool)
        is_major[class_sets[client]] = True
        is_minor = has_samples & ~is_major
        major = _fill(majors_wanted[client], queues.available, is_major, step.where, client)
        minor = _fill(minors_wanted[client], queues.available - major, is_minor, step.where, client)
        queues.take(major + minor)
    return queues.dealt()


# --- shifts ------------------------------------------------------------------------------------


def _assign_groups(step: Step, num_clients: int, rng: np.random.Generator) -> tuple[int, np.ndarray]:
    groups, assign = step.params["groups"], step.params["assign"]
    if not is_int(groups) or groups < 1:
        raise PartitionError(f"{step.where}: groups must be a positive integer; got {groups!r}")
    if groups > num_clients:
        raise PartitionError(f"{step.where}: groups = {groups} needs at least {groups} clients; got {num_clients}")
    blocks = (np.arange(num_clients) * groups) // num_clients
    if assign == "blocks":
        return groups, blocks
    if assign == "cyclic":
        return groups, np.arange(num_clients) % groups
    if assign == "random":
        return groups, rng.permutation(blocks)
    raise PartitionError(f"{step.where}: assign must be 'blocks', 'cyclic' or 'random'; got {assign!r}")


def rotate(x: torch.Tensor, angle: float) -> torch.Tensor:
    """Rotate images [..., H, W] counter-clockwise by ``angle`` degrees; multiples of 90 are exact (rot90)."""
    if angle % 90 == 0:
        return torch.rot90(x, int(angle // 90) % 4, dims=(-2, -1))
    from torchvision.transforms.v2.functional import InterpolationMode
    from torchvision.transforms.v2.functional import rotate as tv_rotate

    return tv_rotate(x, float(angle), interpolation=InterpolationMode.BILINEAR)


@register_partitioner("natural")
def _natural(step: Step, pool: SplitInput, num_clients: int) -> list[np.ndarray]:
    if pool.client_ids is None:
        raise PartitionError(
            f"{step.where}: the dataset has no client id per sample; natural needs a dataset by import path whose "
            "loader returns (inputs, labels, client_ids)"
        )
    found = int(pool.client_ids.max()) + 1
    if found != num_clients:
        raise PartitionError(f"{step.where}: the dataset's client ids name {found} clients, so data.clients must be {found}; got {num_clients}")
    order = np.argsort(pool.client_ids, kind="stable")  # each client's samples in the loader's order
    return np.split(order, np.cumsum(np.bincount(pool.client_ids, minlength=num_clients))[:-1])


@register_partitioner("rotation")
def _rotation(step: Step, num_clients: int, input_shape: tuple[int, int, int], num_classes: int, rng: np.random.Generator) -> GroupShift:
    groups, assignment = _assign_groups(step, num_clients, rng)
    angles = step.params["angles"]
    if angles is None:
        angles = [360.0 * g / groups for g in range(groups)]
    if (
        not isinstance(angles, Sequence)
        or len(angles) != groups
        or not all(isinstance(a, (int, float)) and not isinstance(a, bool) and math.isfinite(a) for a in angles)
    ):
        raise PartitionError(f"{step.where}: angles must be a list of {groups} numbers (degrees, one per group); got {angles!r}")
    height, width = input_shape[1], input_shape[2]
    if height != width or height < 2:
        raise PartitionError(f"{step.where}: rotation needs square images larger than 1x1; the dataset's images are {height}x{width}")
    angles = [float(a) for a in angles]

    def transform(group: int, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return rotate(x, angles[group]), y

    return GroupShift("rotation", assignment, groups, transform, f"rotation angles {angles}")


@register_partitioner("label_permutation")
def _label_permutation(step: Step, num_clients: int, input_shape: tuple[int, int, int], num_classes: int, rng: np.random.Generator) -> GroupShift:
    groups, assignment = _assign_groups(step, num_clients, rng)
    if groups > math.factorial(num_classes):
        raise PartitionError(
            f"{step.where}: groups = {groups} needs {groups} distinct label permutations, but {num_classes} classes have only {math.factorial(num_classes)}"
        )
    permutations = [np.arange(num_classes)]
    while len(permutations) < groups:  # a repeat (likely only with few classes) would merge two groups' concepts: draw again
        candidate = rng.permutation(num_classes)
        if not any(np.array_equal(candidate, p) for p in permutations):
            permutations.append(candidate)
    permutations = [torch.from_numpy(p) for p in permutations]

    def transform(group: int, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x, permutations[group].to(y.device)[y]

    detail = "label permutations " + "; ".join(str(p.tolist()) for p in permutations[1:])
    return GroupShift("label_permutation", assignment, groups, transform, detail)


@register_partitioner("local_labels")
def _local_labels(step: Step, num_clients: int, input_shape: tuple[int, int, int], num_classes: int, rng: np.random.Generator) -> GroupShift:
    """PFLEGO models client i's task with its own K_i outputs (pflego.txt §3.1: W_i is K_i x M): client i's
    k-th smallest class becomes label k. The model keeps ``num_classes`` outputs; a client uses its first K_i.
    Every client is its own transform group (all its samples are relabelled together, before the
    train/val/test split), and the shift adds no ground-truth groups."""
    del step, input_shape, num_classes, rng

    def transform(client: int, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x, torch.searchsorted(torch.unique(y), y)

    return GroupShift("local_labels", np.arange(num_clients), num_clients, transform, "labels re-indexed per client", defines_groups=False)

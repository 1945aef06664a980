"""What an algorithm declares about itself as data, readable without torch.

Validation (``wirelessfl validate``, the schema), ``wirelessfl list``, the memory
estimate, ``wirelessfl tune`` and the results read an algorithm through its
:class:`AlgorithmSpec` only: its typed parameters (a pydantic model, so a bad
value is reported at its YAML path ``algorithms[i].params.key``), its default
search space, which parameters the number of clients bounds, and its memory
:class:`Footprint`. A built-in's spec lives in ``wirelessfl/algorithms/specs/``
(one torch-free module each); the implementation class links to it with
``spec = SPEC`` and reads its parameters typed (``self.params.mu``). A user's
algorithm declares ``spec`` on its class (docs/extending.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, ValidationError, create_model

from wirelessfl.algorithms.search_space import COMMON_SEARCH_SPACE, Param


class Params(BaseModel):
    """Base of an algorithm's typed parameters: no unknown keys, no coercion (``mu: "0.1"`` or ``tau: true``
    is refused; :func:`at_least`, :func:`finite`, :func:`one_of` and :data:`Unit` word the refusal), frozen. A parameter whose YAML name is a Python keyword
    is a field with that name as its alias (``lambda_: float = Field(0.1, alias="lambda")``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, populate_by_name=True)

    def by_yaml_name(self) -> dict[str, Any]:
        """The values by their YAML names (the aliases), as a scenario writes them."""
        return self.model_dump(by_alias=True)


def checked(test: Callable[[Any], bool], wanted: str) -> PlainValidator:
    """A validator that keeps the value as given (an int stays an int where a number is allowed, as the
    algorithm code always received it) when ``test`` accepts it, else says ``must be <wanted>, got <value>``."""

    def check(value: Any) -> Any:
        if not test(value):
            raise ValueError(f"must be {wanted}, got {value!r}")
        return value

    return PlainValidator(check)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def at_least(low: int) -> Any:
    """An int >= ``low`` (``must be an int >= 1, got 0``)."""
    return Annotated[int, checked(lambda v: _is_int(v) and v >= low, f"an int >= {low}")]


def finite(low: float = 0.0, *, above: bool = False, nullable: str = "") -> Any:
    """A finite number >= ``low`` (> ``low`` when ``above``); with ``nullable`` (what null means) also null."""
    wanted = f"a finite number {'>' if above else '>='} {low:g}" + (f" or null (= {nullable})" if nullable else "")

    def ok(value: Any) -> bool:
        if value is None:
            return bool(nullable)
        return _is_finite(value) and (value > low if above else value >= low)

    return Annotated[float | None if nullable else float, checked(ok, wanted)]


def one_of(*choices: str, wanted: str = "") -> Any:
    """One of the strings ``choices`` (``wanted`` words them, e.g. with what each means)."""
    words = wanted or " or ".join(repr(c) for c in choices)
    return Annotated[str, checked(lambda v: isinstance(v, str) and v in choices, words)]


#: A number in [0, 1] (a probability, an exploration rate).
Unit = Annotated[float, checked(lambda v: _is_finite(v) and 0.0 <= v <= 1.0, "a number in [0, 1]")]


@dataclass(frozen=True)
class ClientBound:
    """A parameter the number of clients ``m`` bounds: its int values may be at most ``most(m)``; ``what`` says
    what a larger value would ask for (``one stream per user``). ``default_too``: the default is checked as well
    when the scenario leaves the parameter out (where the algorithm cannot run with it, rather than capping it)."""

    param: str
    most: Callable[[int], int]
    what: str
    default_too: bool = False

    def refusal(self, value: Any, clients: int) -> str | None:
        """Why ``value`` cannot be, with ``clients`` users; None when it can (a non-int value is not bounded)."""
        limit = self.most(clients)
        if isinstance(value, int) and not isinstance(value, bool) and value > limit:
            return f"{value} is more than {self.what} (data.clients = {clients}); at most {limit}"
        return None


@dataclass(frozen=True)
class FootprintInputs:
    """What a memory footprint depends on, as plain numbers (``wirelessfl.learning.memory`` fills it in)."""

    clients: int
    participants: int
    model_params: int
    optimizer_rows: int
    train_sizes: tuple[int, ...]
    val_sizes: tuple[int, ...]
    test_sizes: tuple[int, ...]
    epochs: float
    groups: int
    classes: int
    head: Callable[[], tuple[int, int]] = field(repr=False, compare=False)
    """``(head_size, head_inputs)`` on demand: counting the head costs a ``[P]`` mask, which a huge model that
    the estimate is about to refuse must not allocate, so only footprints that read them pay for it."""

    @property
    def head_size(self) -> int:
        """Parameters of the personal head."""
        return self.head()[0]

    @property
    def head_inputs(self) -> int:
        """Inputs of the model's last layer with parameters (the features a head is fitted on)."""
        return self.head()[1]


FLOAT = 4
"""Bytes of a float32 parameter."""


@dataclass(frozen=True)
class Footprint:
    """How one algorithm uses memory, in model rows (``P`` float32 each) unless the name says bytes.

    ``kept``: rows held between rounds; ``kept_bytes``: other persistent state
    (mixing matrices, per-client heads); ``train_slots``: slots of its largest
    ``engine.train`` call and ``train_copies`` how many times that call
    concatenates the training data; ``state``: optimizer rows per slot of that
    call; ``keep_rows``: clients' optimizer-state rows stored between rounds
    (times ``state``) when ``keep_optimizer_state``; ``eval_rows``: rows gathered
    for evaluation and ``eval_slots`` / ``eval_copies`` the slots and split
    copies of its largest evaluation pass; ``extra_bytes``: its own largest
    allocation beside the engine; ``checkpoint_rows``: rows in ``state_dict``;
    ``work``: training work per participant and round relative to one local
    round (1.0), and ``eval_work``: epochs of training every client (all m)
    takes at each evaluation (FedAvg+'s fine-tuning), for the time estimate.
    ``eval_by_row``: the evaluation reads the kept models by each client's row
    (``MixingAlgorithm.evaluate``, ``engine.evaluate(..., rows=)``) or makes them per slot group
    (``Algorithm.evaluate_in_groups``): one slot group's rows per worker are held, not ``eval_rows``.
    ``stored``: the rows of ``kept``/``kept_bytes`` (and of ``checkpoint_rows``) held in client stores
    (``learning/client_store.py``: per-client state that ``client_store: {where: disk}`` moves to disk).
    """

    kept: float
    train_slots: int
    state: int
    kept_bytes: int = 0
    train_copies: int = 1
    keep_rows: int = 0
    eval_rows: float = 0.0
    eval_slots: int = 0
    eval_copies: int = 1
    eval_extra_bytes: int = 0
    extra_bytes: int = 0
    checkpoint_rows: float = 0.0
    work: float = 1.0
    eval_work: float = 0.0
    eval_by_row: bool = False
    stored: float = 0.0


def model_per_client(params: Params, at: FootprintInputs) -> Footprint:
    """The common personalised case: one model per client kept, the participants trained once a round."""
    del params
    m = at.clients
    return Footprint(kept=m, train_slots=at.participants, state=at.optimizer_rows, eval_rows=m, eval_slots=m, checkpoint_rows=m)


@dataclass(frozen=True)
class AlgorithmSpec:
    """Everything the tool knows about an algorithm without running it (see the module docstring).

    ``implementation``: ``package.module:Class`` of the code that trains it (imported when a run needs it);
    ``knows_truth``: a reference that reads what no real method can see (sweep maps show it beside the
    contest); ``timing_independent``: trained models do not depend on who arrives; ``trains_as``: the
    algorithm whose training this one repeats step for step, differing only in ``evaluation_params``;
    ``levers``: the wireless levers it composes with (docs/levers.md).
    """

    name: str
    paper: str
    description: str
    params: type[Params]
    implementation: str = ""
    search_space: Mapping[str, Param] = field(default_factory=lambda: dict(COMMON_SEARCH_SPACE))
    client_bounds: tuple[ClientBound, ...] = ()
    footprint: Callable[[Any, FootprintInputs], Footprint] = model_per_client
    knows_truth: bool = False
    timing_independent: bool = False
    trains_as: str | None = None
    evaluation_params: frozenset[str] = frozenset()
    levers: frozenset[str] = frozenset()

    @property
    def hparams(self) -> dict[str, Any]:
        """Every parameter's default, by its YAML name."""
        return self.params().by_yaml_name()

    def parse(self, values: Mapping[str, Any]) -> Params:
        """The typed parameters of ``values`` (by YAML name, the rest defaults); ``ValidationError`` if bad."""
        return self.params.model_validate(dict(values))

    def check(self, values: Mapping[str, Any]) -> list[tuple[str, str]]:
        """``(parameter, what is wrong)`` for every bad value of ``values``; empty when they are valid."""
        try:
            self.parse(values)
        except ValidationError as err:
            return [(".".join(map(str, e["loc"])), describe_error(e)) for e in err.errors(include_url=False)]
        return []


def describe_error(error: Mapping[str, Any]) -> str:
    """One pydantic error of a parameter as words: its own message (``must be an int >= 1, got 0``) or
    pydantic's with the value given (``Input should be a valid number (got 'x')``)."""
    message = error["msg"]
    if message.startswith("Value error, "):
        return message[len("Value error, "):]
    if error["type"] == "extra_forbidden":
        return "unknown parameter"
    return f"{message} (got {error.get('input')!r})" if "input" in error else message


class UntypedParams(Params):
    """The parameters of an old-style class (``hparams``, a dict of defaults): any value each (the class checks
    it), read as ``self.params.key`` or, as such a class was written, ``self.params["key"]``."""

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)


def spec_from_hparams(cls: type) -> AlgorithmSpec:
    """The spec of an old-style plugin class that declares only ``hparams`` (a dict of defaults): each
    parameter takes any value (the class checks it), the common search space, one model per client."""
    fields = {key: (Any, Field(default)) for key, default in getattr(cls, "hparams", {}).items() if key.isidentifier()}
    model = create_model(f"{cls.__name__}Params", __base__=UntypedParams, **fields)
    return AlgorithmSpec(
        name=getattr(cls, "name", "") or cls.__name__,
        paper=getattr(cls, "paper", ""),
        description=getattr(cls, "description", ""),
        params=model,
        implementation=f"{cls.__module__}:{cls.__qualname__}",
        search_space=dict(getattr(cls, "search_space", COMMON_SEARCH_SPACE)),
        knows_truth=bool(getattr(cls, "knows_truth", False)),
        timing_independent=bool(getattr(cls, "timing_independent", False)),
        levers=frozenset(getattr(cls, "levers", frozenset())),
    )


class ParamError(ValueError):
    """An algorithm refusing its parameters (or its setting) for this data or model: carries the algorithm's
    name and the parameter at fault (None: the setting as a whole), from which the schema gives the YAML path
    (``config.algorithm_path``)."""

    def __init__(self, message: str, algorithm: str, param: str | None = None) -> None:
        super().__init__(message)
        self.algorithm = algorithm
        self.param = param

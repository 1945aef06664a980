"""Each algorithm's declaration (``wirelessfl/algorithms/specs``) agrees with the class that trains it, and the
torch-free catalogs agree with the code that carries each entry out."""

from __future__ import annotations

import pytest

from wirelessfl.algorithms import ALGORITHMS, registry
from wirelessfl.algorithms.spec import ClientBound, ParamError
from wirelessfl.algorithms.specs import BUILT_INS
from wirelessfl.algorithms.specs.ucfl import FORMATIONS
from wirelessfl.algorithms.streams import FORMATIONS as STREAM_FORMATIONS
from wirelessfl.learning.data import datasets, partition
from wirelessfl.learning.data.catalog import DATASETS, PARTITIONERS
from wirelessfl.learning.data.federated import DataSpec, build_federated_data
from wirelessfl.learning.lockstep import LockstepEngine, TrainConfig
from wirelessfl.learning.models import get_architecture
from wirelessfl.algorithms.base import Context


@pytest.fixture(scope="module")
def ctx():
    spec = DataSpec(dataset="digits", num_clients=6, samples={"per_client": 30}, partition=({"name": "iid"},))
    data = build_federated_data(spec, seed=0)
    arch = get_architecture("mlp", data.input_shape, data.num_classes, hidden=(8,))
    return Context(data, arch, LockstepEngine(arch, "cpu", normalisation=data.normalisation), TrainConfig(batch_size=8), seed=0)


def test_every_built_in_is_registered_by_its_declared_implementation():
    assert set(ALGORITHMS) == set(BUILT_INS)
    for name, spec in BUILT_INS.items():
        cls = registry.implementation(name)
        assert cls is ALGORITHMS[name] and cls.spec is spec, name
        assert f"{cls.__module__}:{cls.__qualname__}" == spec.implementation, name


@pytest.mark.parametrize("name", sorted(BUILT_INS))
def test_the_class_reads_the_parameters_its_declaration_gives(ctx, name):
    """Built with its defaults, an algorithm holds exactly its declaration's typed defaults, and its class
    attributes are the declaration's (one source: the spec)."""
    spec = BUILT_INS[name]
    cls = ALGORITHMS[name]
    assert (cls.name, cls.paper, cls.description, cls.hparams) == (spec.name, spec.paper, spec.description, spec.hparams)
    assert (cls.knows_truth, cls.timing_independent, cls.trains_as, cls.levers) == (
        spec.knows_truth, spec.timing_independent, spec.trains_as, spec.levers,
    )
    assert dict(cls.search_space) == dict(spec.search_space)
    algo = cls(ctx)
    assert algo.params == spec.parse({})
    assert algo.params.by_yaml_name() == spec.hparams


def test_a_bad_value_is_one_line_naming_the_algorithm_and_the_parameter(ctx):
    with pytest.raises(ParamError) as caught:
        ALGORITHMS["fedprox"](ctx, mu=-1)
    assert str(caught.value) == "fedprox: mu must be a finite number >= 0, got -1"
    assert (caught.value.algorithm, caught.value.param) == ("fedprox", "mu")


def test_the_typed_parameters_keep_the_values_as_given():
    """An int where a number is allowed stays an int (the algorithms always received the YAML's value)."""
    assert BUILT_INS["fedprox"].parse({"mu": 1}).mu == 1 and isinstance(BUILT_INS["fedprox"].parse({"mu": 1}).mu, int)
    assert BUILT_INS["ditto"].parse({"lambda": 2.0}).lambda_ == 2.0


def test_client_bounds_name_what_a_larger_value_asks_for():
    bound = ClientBound("streams", lambda m: m, "one stream per user")
    assert bound.refusal(4, 4) is None and bound.refusal("m", 4) is None and bound.refusal(True, 0) is None
    assert bound.refusal(5, 4) == "5 is more than one stream per user (data.clients = 4); at most 4"


def test_ucfl_declares_the_stream_formations_that_exist():
    assert FORMATIONS == tuple(STREAM_FORMATIONS)


def test_every_catalog_entry_has_its_code():
    assert set(DATASETS) == set(datasets._LOADERS)
    assert set(PARTITIONERS) == set(partition._FUNCTIONS)


@pytest.mark.parametrize("name", ["fedavg", "fedprox", "scaffold", "local", "oracle", "cfl", "ditto"])
def test_a_method_that_trains_each_participant_once_or_twice_a_round_declares_that_work(ctx, name):
    """The time estimate's work factor (``Footprint.work``) is the trainings a participant does a round, the same
    number the method tells the network (``CommPlan.work``): Ditto trains the global and the personal model."""
    from wirelessfl.learning.memory import SplitSizes, footprint

    algo = ALGORITHMS[name](ctx)
    told = set(algo.plan(1).work.values())
    data = ctx.data
    sizes = SplitSizes(
        train=tuple(len(c.y_train) for c in data.clients), val=tuple(len(c.y_val) for c in data.clients),
        test=tuple(len(c.y_test) for c in data.clients),
    )
    declared = footprint(name, {}, ctx.arch, sizes, data.num_clients, ctx.train).work
    assert told == {declared}

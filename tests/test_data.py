from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lstmstudy.data import (
    PLANS,
    PTB_CORPORA,
    PTB_LIKE,
    BatchPlan,
    auto_buckets,
    check_corpus,
    corpus,
    corpus_label,
    keras_batches,
    make_plan,
    mxnet_autogen,
    mxnet_autogen_boundaries,
    pack_batch,
    pad_per_batch,
    pad_to_global_max,
    padded_steps,
    plan_cost,
    ptb_lengths,
    ptb_like_lengths,
    real_steps,
    sample_for,
    sorted_batches,
    static_buckets,
    timing_sample,
    torch_batches,
    worked_example,
)
from lstmstudy.errors import ParameterError, StudyError

FAST = settings(max_examples=60, deadline=None)
lengths_st = st.lists(st.integers(1, 90), min_size=1, max_size=50)
batch_st = st.integers(1, 12)
boundaries_st = st.lists(st.integers(1, 80), min_size=1, max_size=5, unique=True).map(
    lambda b: tuple(sorted(b)) + (math.inf,))


def all_plans(lengths, batch_size, boundaries=(10, 20, 30, 40, 60, math.inf), seed=0):
    return [pad_to_global_max(lengths, batch_size), pad_per_batch(lengths, batch_size, seed=seed),
            pad_per_batch(lengths, batch_size, seed=None),
            static_buckets(lengths, batch_size, boundaries), static_buckets(lengths, batch_size, boundaries,
                                                                           pad_to="boundary", seed=seed),
            auto_buckets(lengths, batch_size), auto_buckets(lengths, batch_size, seed=seed),
            mxnet_autogen(lengths, batch_size), mxnet_autogen(lengths, batch_size, seed=seed),
            sorted_batches(lengths, batch_size), sorted_batches(lengths, batch_size, seed=seed)]


# ---------------------------------------------------------------------------------------------- the slides


def test_worked_example_reproduces_the_slides():
    ex = worked_example()
    assert ex["lengths"] == [4, 8, 3, 7]
    assert (ex["real"], ex["padded"], ex["bucketed"]) == (22, 30, 24)
    assert ex["padded_overhead"] == pytest.approx(30 / 22 - 1)
    assert round(100 * ex["padded_overhead"]) == 36  # "~36% more work"


def test_worked_example_batches():
    lengths = [4, 8, 3, 7]
    assert real_steps(lengths) == 22
    assert padded_steps(lengths, 2) == 30
    assert pad_per_batch(lengths, 2).batches == ((0, 1), (2, 3))
    auto = auto_buckets(lengths, 2)
    assert [sorted(lengths[i] for i in b) for b in auto.batches] == [[7, 8], [3, 4]]
    assert plan_cost(lengths, auto) == plan_cost(lengths, [[1, 3], [0, 2]]) == 24
    assert static_buckets(lengths, 2, (4, 8)).padded_steps == 24
    assert pad_to_global_max(lengths, 2).padded_steps == 4 * 8


# ---------------------------------------------------------------------------------------------- properties


@FAST
@given(lengths=lengths_st, batch_size=batch_st, boundaries=boundaries_st, seed=st.integers(0, 2**16))
def test_every_plan_covers_each_sequence_once_and_pads_at_least_the_real_work(lengths, batch_size, boundaries, seed):
    for plan in all_plans(lengths, batch_size, boundaries, seed):
        flat = sorted(i for b in plan.batches for i in b)
        assert flat == list(range(len(lengths))), plan.name
        assert all(0 < len(b) <= batch_size for b in plan.batches)
        assert plan.real_steps == sum(lengths) == real_steps(lengths)
        assert plan.padded_steps >= plan.real_steps
        assert 0.0 <= plan.waste_fraction < 1.0
        assert plan.padded_steps >= plan_cost(lengths, plan)


@FAST
@given(lengths=lengths_st, batch_size=batch_st, seed=st.integers(0, 2**16))
def test_auto_buckets_never_pad_more_than_per_batch_nor_per_batch_more_than_global(lengths, batch_size, seed):
    auto = auto_buckets(lengths, batch_size)
    for per_batch in (pad_per_batch(lengths, batch_size, seed=seed), pad_per_batch(lengths, batch_size)):
        assert auto.padded_steps <= per_batch.padded_steps <= pad_to_global_max(lengths, batch_size).padded_steps
        assert sorted(map(len, auto.batches)) == sorted(map(len, per_batch.batches))
    # sorted batches have the same batch sizes, so they pad no less; and at most one short batch's worth more
    by_hand = sorted_batches(lengths, batch_size, seed=seed)
    assert auto.padded_steps <= by_hand.padded_steps <= auto.padded_steps + batch_size * max(lengths)
    assert sorted(map(len, by_hand.batches)) == sorted(map(len, auto.batches))


@FAST
@given(lengths=lengths_st, batch_size=batch_st, seed=st.integers(0, 2**16))
def test_sorted_batches_are_runs_of_the_sorted_lengths(lengths, batch_size, seed):
    plan = sorted_batches(lengths, batch_size, seed=seed)
    spans = sorted((min(lengths[i] for i in b), max(lengths[i] for i in b)) for b in plan.batches)
    assert all(high <= low for (_, high), (low, _) in zip(spans, spans[1:]))  # no two batches interleave
    assert plan.padded_steps == plan_cost(lengths, plan) and plan.name == "sorted_batches"


def test_mxnet_autogen_is_static_buckets_at_mxnets_boundaries():
    lengths = [5, 5, 6, 6, 6, 9, 2, 7]
    plan = mxnet_autogen(lengths, 2)
    bounds = mxnet_autogen_boundaries(lengths, 2)
    static = static_buckets(lengths, 2, bounds, pad_to="boundary")
    assert plan.name == "mxnet_autogen" and (plan.batches, plan.widths) == (static.batches, static.widths)
    assert mxnet_autogen(lengths, 2, seed=1).padded_steps == plan.padded_steps  # the order moves no padding


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(1, 30), min_size=1, max_size=6), batch_size=st.integers(1, 4))
def test_auto_buckets_is_optimal_for_its_batch_sizes(lengths, batch_size):
    best = min(sum(len(c) * max(lengths[i] for i in c)
                   for c in (p[s:s + batch_size] for s in range(0, len(p), batch_size)))
               for p in itertools.permutations(range(len(lengths))))
    assert auto_buckets(lengths, batch_size).padded_steps == best


def test_auto_buckets_places_the_short_batch_where_it_pads_least():
    assert auto_buckets([10, 1, 1], 2).padded_steps == 10 + 2  # [10] alone, then [1, 1]
    assert auto_buckets([10, 9, 1, 1], 3).padded_steps == 30 + 1  # [10, 9, 1], then [1]


@FAST
@given(lengths=lengths_st, batch_size=batch_st, boundaries=boundaries_st, pad_to=st.sampled_from(["batch", "boundary"]))
def test_static_buckets_respect_their_boundaries(lengths, batch_size, boundaries, pad_to):
    plan = static_buckets(lengths, batch_size, boundaries, pad_to=pad_to)
    edges = (0,) + boundaries
    for batch, width in zip(plan.batches, plan.widths):
        k = next(k for k, b in enumerate(boundaries) if max(lengths[i] for i in batch) <= b)
        assert all(edges[k] < lengths[i] <= edges[k + 1] for i in batch)  # one bucket per batch
        longest = max(lengths[i] for i in batch)
        assert width == (boundaries[k] if pad_to == "boundary" and boundaries[k] != math.inf else longest)
    # at most one short batch per bucket
    per_bucket = np.bincount(np.searchsorted(boundaries, lengths), minlength=len(boundaries))
    assert plan.n_batches == sum(-(-c // batch_size) for c in per_bucket)


def test_mxnet_boundaries_keep_every_sequence():
    lengths = [5, 5, 6, 6, 6, 9]
    assert mxnet_autogen_boundaries(lengths, 2) == (5, 6, 9)
    assert mxnet_autogen_boundaries([4, 8, 3, 7], 2) == (8,)
    assert static_buckets(lengths, 2, mxnet_autogen_boundaries(lengths, 2)).padded_steps == real_steps(lengths)


def test_seeds_make_plans_reproducible():
    lengths = list(range(1, 40))
    for name in ("pad_per_batch", "static_buckets", "mxnet_autogen", "sorted_batches", "auto_buckets"):
        assert PLANS[name](lengths, 4, seed=3) == PLANS[name](lengths, 4, seed=3)
    assert pad_per_batch(lengths, 4, seed=3) != pad_per_batch(lengths, 4, seed=4)


# ---------------------------------------------------------------------------------------------- real PTB lengths


@pytest.mark.parametrize(("split", "sentences", "tokens", "longest"), [
    ("valid", 3370, 70390, 74), ("test", 3761, 78669, 77), ("valid+test", 3370 + 3761, 70390 + 78669, 77)])
def test_ptb_lengths_are_the_shipped_counts(split, sentences, tokens, longest):
    lengths = ptb_lengths(split)
    assert lengths.shape == (sentences,) and lengths.dtype == np.int64
    assert (lengths.sum(), lengths.min(), lengths.max()) == (tokens, 1, longest)
    assert (np.diff(lengths) >= 0).all()  # counts keep no sentence order: sorted by length
    assert round(float(lengths.mean()), 2) == round(tokens / sentences, 2)


def test_ptb_lengths_default_to_both_splits_and_refuse_an_unknown_one():
    assert ptb_lengths().size == 7131
    for bad in ("train", "valid+train", "", None, 3):
        with pytest.raises(ParameterError, match="split must be one of"):
            ptb_lengths(bad)


def test_a_corpus_is_real_by_name_or_synthetic_by_size():
    real = corpus("ptb-valid+test", 0)
    assert np.array_equal(np.sort(real), ptb_lengths()) and not np.array_equal(real, ptb_lengths())  # shuffled
    assert np.array_equal(corpus("ptb-valid+test", 0), real) and not np.array_equal(corpus("ptb-valid+test", 1), real)
    assert not real.flags.writeable
    assert np.array_equal(corpus(500, 0), ptb_like_lengths(500, 0))
    assert corpus_label("ptb-valid") == "Penn Treebank valid (real, 3,370 sentences)"
    assert corpus_label(42068) == "synthetic PTB-like, 42,068 sentences"
    assert [check_corpus(c) for c in (*PTB_CORPORA, 7)] == [*PTB_CORPORA, 7]
    for bad in ("ptb-train", "valid", 0, -1, 2.5, True, None, [7]):
        with pytest.raises(ParameterError, match="corpus must be one of"):
            check_corpus(bad)


#: padded steps of every plan on both real splits in batches of 32, seed 0; static buckets at 10, 20, 30, 40, 60
#: and inf, padded to the boundary. Padding to the maximum, MXNet's buckets (all bounded), sorted batches and
#: auto buckets do not depend on the order; per-batch padding and the inf bucket of the static ones do.
REAL_PADDED_STEPS = {"pad_to_global_max": 7131 * 77, "pad_per_batch": 319495, "static_buckets": 183462,
                     "mxnet_autogen": 155309, "sorted_batches": 150303, "auto_buckets": 150303}


def test_every_plans_padded_work_on_the_real_lengths():
    lengths = corpus("ptb-valid+test", 0)
    for name in PLANS:
        plan = make_plan(name, lengths, 32, seed=0)
        assert plan.name == name and plan.real_steps == 149059
        assert plan.padded_steps == REAL_PADDED_STEPS[name], name
    waste = [make_plan(name, lengths, 32, seed=0).padded_steps for name in PLANS]
    assert waste == sorted(waste, reverse=True)  # each plan of the registry pads no more than the one before
    assert make_plan("pad_to_global_max", corpus("ptb-valid+test", 5), 32).padded_steps == 7131 * 77
    with pytest.raises(ParameterError, match="unknown plan"):
        make_plan("bucket_everything", lengths, 32)


def test_a_whole_epoch_is_timed_as_the_plan_itself():
    config = {"plan": "auto_buckets", "corpus": "ptb-valid", "seed": 0, "batch_size": 32, "sample_batches": 106}
    plan = sample_for(config)
    assert plan.n_batches == 106 and plan.lengths == tuple(corpus("ptb-valid", 0).tolist())
    assert timing_sample(plan, 106) is plan
    assert sample_for({**config, "sample_batches": 4}).n_batches == 4


# ---------------------------------------------------------------------------------------------- PTB-like corpus


@pytest.fixture(scope="module")
def ptb():
    return ptb_like_lengths()


def test_ptb_like_corpus_matches_published_moments(ptb):
    assert ptb.shape == (PTB_LIKE["sentences"],) == (42068,)
    assert ptb.dtype == np.int64
    assert abs(ptb.mean() - 21.1) / 21.1 < 0.05
    assert abs(ptb.sum() - 887521) / 887521 < 0.05
    assert ptb.min() >= 1 and ptb.max() <= 82
    assert np.median(ptb) < ptb.mean()  # right-skewed
    assert np.array_equal(ptb_like_lengths(seed=0), ptb) and not np.array_equal(ptb_like_lengths(seed=1), ptb)
    assert "ASSUMPTION" in PTB_LIKE["source"]["std"]


@pytest.mark.parametrize("batch_size", [32, 64])
def test_waste_ordering_on_ptb_like_corpus(ptb, batch_size):
    waste = {name: PLANS[name](ptb, batch_size).waste_fraction for name in PLANS}
    per_batch = pad_per_batch(ptb, batch_size, seed=0).waste_fraction
    assert waste["auto_buckets"] <= per_batch <= waste["pad_to_global_max"]
    assert waste["auto_buckets"] <= waste["static_buckets"] <= per_batch
    assert waste["auto_buckets"] < 0.01  # sorting leaves next to no padding


# ---------------------------------------------------------------------------------------------- tensors


def small_plan():
    lengths = [4, 8, 3, 7, 1, 5, 2]
    return lengths, pad_per_batch(lengths, 3, seed=1)


def test_torch_batches_shapes_zero_padding_and_packing():
    lengths, plan = small_plan()
    out = torch_batches(lengths, plan, features=5, seed=0)
    assert len(out) == plan.n_batches
    packed_steps = 0
    for (x, lens), batch, width in zip(out, plan.batches, plan.widths):
        assert x.shape == (len(batch), width, 5) and x.dtype == torch.float32
        assert lens.dtype == torch.int64 and lens.device.type == "cpu"
        assert lens.tolist() == [lengths[i] for i in batch]
        real = torch.arange(width)[None, :] < lens[:, None]
        assert torch.all(x[~real] == 0) and torch.all(x[real] != 0)
        packed = pack_batch(x, lens)
        packed_steps += int(packed.batch_sizes.sum())
        assert int(packed.batch_sizes.sum()) == int(lens.sum())
    assert packed_steps == plan.real_steps
    lstm = torch.nn.LSTM(5, 4, batch_first=True)
    output, _ = lstm(pack_batch(*out[0]))
    assert int(output.batch_sizes.sum()) == int(out[0][1].sum())


def test_keras_batches_have_right_padded_masks_and_the_torch_values():
    lengths, plan = small_plan()
    out = keras_batches(lengths, plan, features=2, seed=7)
    for (x, mask), (tx, tlens), batch, width in zip(out, torch_batches(lengths, plan, 2, seed=7),
                                                    plan.batches, plan.widths):
        assert x.shape == (len(batch), width, 2) and x.dtype == np.float32
        assert mask.shape == (len(batch), width) and mask.dtype == np.bool_
        assert mask.sum(axis=1).tolist() == [lengths[i] for i in batch]
        assert (np.diff(mask.astype(int), axis=1) <= 0).all()  # True then False: right-padded
        assert (x[~mask] == 0).all() and (x[mask] != 0).all()
        assert np.array_equal(x, tx.numpy())


def test_builders_follow_the_plan_widths_and_limit():
    lengths = [4, 8, 3, 7]
    global_plan = pad_to_global_max(lengths, 2)
    assert [x.shape for x, _ in keras_batches(lengths, global_plan, 1)] == [(2, 8, 1), (2, 8, 1)]
    assert [tuple(x.shape) for x, _ in torch_batches(lengths, [[2, 0], [1]], 1)] == [(2, 4, 1), (1, 8, 1)]
    assert len(torch_batches(lengths, global_plan, 1, limit=1)) == 1


# ---------------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("bad", [[], [0], [3, -1], [1.5], [2.0], [True], ["3"], "abc", 7, None,
                                 np.array([1.0, 2.0]), np.array([[1, 2]])])
def test_bad_lengths(bad):
    for build in (real_steps, lambda b: pad_per_batch(b, 2), lambda b: auto_buckets(b, 2),
                  lambda b: pad_to_global_max(b, 2), lambda b: static_buckets(b, 2)):
        with pytest.raises(ParameterError, match="lengths"):
            build(bad)


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2", None])
def test_bad_batch_size(bad):
    for name, build in PLANS.items():
        with pytest.raises(ParameterError, match="batch_size"):
            build([3, 4], bad)
    with pytest.raises(ParameterError, match="batch_size"):
        padded_steps([3, 4], bad)


@pytest.mark.parametrize("bad", [(), (20, 10), (10, 10), (0, 10), (10.5, math.inf), (math.inf, 10),
                                 (math.nan,), (-math.inf,), "10", None, (True,)])
def test_bad_boundaries(bad):
    with pytest.raises(ParameterError, match="boundaries"):
        static_buckets([3, 4], 2, bad)


def test_boundaries_must_reach_the_longest_sequence():
    with pytest.raises(ParameterError, match="boundaries end at 5"):
        static_buckets([3, 8], 2, (5,))


def test_other_bad_parameters():
    cases = [
        ("pad_to", lambda: static_buckets([3], 1, pad_to="bucket")),
        ("seed", lambda: pad_per_batch([3], 1, seed=-1)),
        ("seed", lambda: auto_buckets([3], 1, seed="x")),
        ("seed", lambda: ptb_like_lengths(10, seed=None)),
        ("n", lambda: ptb_like_lengths(0)),
        ("features", lambda: torch_batches([3], [[0]], features=0)),
        ("limit", lambda: keras_batches([3], [[0]], features=1, limit=0)),
        ("order", lambda: padded_steps([3, 4], 1, order=[0, 0])),
        ("plan", lambda: plan_cost([3, 4], [[0, 2]])),
        ("plan", lambda: plan_cost([3, 4], [[]])),
        ("plan", lambda: plan_cost([3, 4], [])),
        ("plan", lambda: torch_batches([3, 4], auto_buckets([3, 5], 1), features=1)),
        ("BatchPlan.batches", lambda: BatchPlan("x", (3, 4), ((0, 0),), (4,))),
        ("BatchPlan.batches", lambda: BatchPlan("x", (3, 4), ((0,),), (4,))),
        ("BatchPlan.widths", lambda: BatchPlan("x", (3, 4), ((0, 1),), (3,))),
        ("BatchPlan.widths", lambda: BatchPlan("x", (3, 4), ((0,), (1,)), (4,))),
    ]
    for name, call in cases:
        with pytest.raises(ParameterError, match=name):
            call()
    assert issubclass(ParameterError, StudyError)

"""Batching plans for variable-length sequences, and the padded work each one costs.

The slides being reproduced ("Performance Optimization of LSTM Training on GPU", Lin & Wu) argue that
padding brings in unnecessary work: an LSTM computes every padded timestep of a batch whether or not
it belongs to a sequence. A *plan* is a list of batches, each a list of sequence indices; its *padded
steps* are the timesteps x sequences actually computed, sum over batches of len(batch) x width, where
the width is the batch's longest sequence (or wider, for plans that pad to a fixed length). `PLANS` is
the one registry of plans: the four the slides compare (pad everything to the corpus maximum, pad each
batch to its own maximum, static user-given buckets, greedy auto-generated buckets) and two that users
of MXNet and PyTorch get without the slides' greedy rule (MXNet's own bucket boundaries, sorted batches).

Two corpora feed the plans (`corpus`): the real Penn Treebank sentence lengths of its valid and test
splits (`ptb_lengths`, counts per length shipped in `lstmstudy/corpora/` with their provenance; the text
itself is not needed to batch it), and a synthetic PTB-like draw of any size (`ptb_like_lengths`, a
stated log-normal, see `PTB_LIKE`), which stands in for the 42,068-sentence training split. The tensor
builders turn a plan into padded batches for PyTorch and Keras, filled with seeded noise: they are for
timing, not for learning.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache, lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Union

import numpy as np

from lstmstudy.errors import ParameterError

if TYPE_CHECKING:  # torch is imported where it is used, so `import lstmstudy.data` stays light
    import torch
    from torch.nn.utils.rnn import PackedSequence

Lengths = Union[Sequence[int], np.ndarray]
Batches = Sequence[Sequence[int]]

#: The slides' worked example: four sentences, batches of two.
WORKED_EXAMPLE_LENGTHS = (4, 8, 3, 7)

#: Where a padded step of a static bucket ends: at the batch's longest sequence or at the bucket boundary.
PAD_TO = ("batch", "boundary")

#: The splits of the shipped Penn Treebank lengths, and the real corpora made of them (`corpus`).
PTB_SPLITS = ("valid", "test", "valid+test")
PTB_CORPORA = tuple(f"ptb-{split}" for split in PTB_SPLITS)
#: The default static bucket boundaries (an `inf` bucket is appended where a plan is made).
BOUNDARIES = (10, 20, 30, 40, 60)


def _lognormal_parameters(mean: float, std: float) -> tuple[float, float]:
    """mu and sigma of the log-normal whose mean and standard deviation are the given ones."""
    sigma2 = math.log1p((std / mean) ** 2)
    return math.log(mean) - sigma2 / 2, math.sqrt(sigma2)


_PTB_MEAN, _PTB_STD = 21.1, 10.0
_PTB_MU, _PTB_SIGMA = _lognormal_parameters(_PTB_MEAN, _PTB_STD)

#: Parameters of the PTB-like length distribution and where each comes from, for the notebook to print.
PTB_LIKE: dict[str, object] = {
    "distribution": "log-normal, rounded to the nearest integer and clipped to [min_length, max_length]",
    "sentences": 42068,
    "tokens": 887521,
    "mean": _PTB_MEAN,
    "std": _PTB_STD,
    "mu": _PTB_MU,
    "sigma": _PTB_SIGMA,
    "min_length": 1,
    "max_length": 82,
    "source": {
        "sentences": "PTB training set, Mikolov's ptb.train.txt: 42,068 sentences",
        "tokens": "887,521 tokens in ptb.train.txt, counting the end-of-sentence token",
        "mean": "887,521 / 42,068 = 21.1 tokens per sentence, end-of-sentence token included",
        "std": "ASSUMPTION: about 10 tokens; not measured here (no PTB text is available offline)",
        "max_length": "longest PTB training sentence, about 82 tokens; used as the clip",
        "mu, sigma": "the log-normal with that mean and standard deviation, before rounding and clipping",
    },
}


# ----------------------------------------------------------------------------------------------------
# validation


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ParameterError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _seed(name: str, value: object, allow_none: bool = True) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        expected = "a non-negative integer or None" if allow_none else "a non-negative integer"
        raise ParameterError(f"{name} must be {expected}, got {value!r}")
    return int(value)


def _lengths(lengths: Lengths) -> np.ndarray:
    """Lengths as a 1-D int64 array; every one a positive integer, at least one sequence."""
    if hasattr(lengths, "__array__") and not isinstance(lengths, (Sequence, np.ndarray)):
        lengths = np.asarray(lengths)  # a pandas Series, a tensor
    if isinstance(lengths, (str, bytes)) or not isinstance(lengths, (Sequence, np.ndarray)):
        raise ParameterError(f"lengths must be a sequence of positive integers, got {type(lengths).__name__}")
    if isinstance(lengths, np.ndarray):
        if lengths.ndim != 1 or lengths.dtype.kind not in "iu":
            raise ParameterError(
                f"lengths must be a 1-D integer array, got shape {lengths.shape} of dtype {lengths.dtype}")
        array = lengths.astype(np.int64)
    elif all(type(v) is int for v in lengths):  # the common case, checked without isinstance per value
        array = np.asarray(lengths, dtype=np.int64)
    else:
        for value in lengths:
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
                raise ParameterError(f"lengths must hold positive integers, got {value!r}")
        array = np.asarray([int(v) for v in lengths], dtype=np.int64)
    if array.size == 0:
        raise ParameterError("lengths must hold at least one sequence, got none")
    if (array <= 0).any():
        raise ParameterError(f"lengths must be positive integers, got {int(array.min())}")
    return array


def _index_tuple(batch: object, n: int) -> tuple[int, ...]:
    if isinstance(batch, np.ndarray):
        if batch.ndim != 1 or batch.dtype.kind not in "iu":
            raise ParameterError(f"plan must hold 1-D integer batches of sequence indices, got {batch!r}")
        values = batch.tolist()
    elif isinstance(batch, Sequence) and not isinstance(batch, (str, bytes)):
        values = list(batch)
        if not all(type(i) is int for i in values):
            for i in values:
                if isinstance(i, (bool, np.bool_)) or not isinstance(i, numbers.Integral):
                    raise ParameterError(f"plan holds {i!r}, not an index of the {n} lengths")
            values = [int(i) for i in values]
    else:
        raise ParameterError(f"plan must hold batches of sequence indices, got {batch!r}")
    if not values:
        raise ParameterError("plan must hold non-empty batches, got an empty one")
    if min(values) < 0 or max(values) >= n:
        bad = next(i for i in values if not 0 <= i < n)
        raise ParameterError(f"plan holds {bad!r}, not an index of the {n} lengths")
    return tuple(values)


def _batches(batches: Batches, n: int) -> tuple[tuple[int, ...], ...]:
    """A plan's batches as tuples; every batch non-empty and every index in range(n)."""
    if isinstance(batches, (str, bytes)) or not isinstance(batches, Sequence):
        raise ParameterError(f"plan must be a sequence of batches, got {type(batches).__name__}")
    out = tuple(_index_tuple(batch, n) for batch in batches)
    if not out:
        raise ParameterError("plan must hold at least one batch, got none")
    return out


def _batch_maxima(array: np.ndarray, batches: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """The longest sequence of each batch, in one vectorised pass."""
    flat = np.fromiter((i for b in batches for i in b), dtype=np.int64)
    offsets = np.cumsum([0] + [len(b) for b in batches[:-1]])
    return np.maximum.reduceat(array[flat], offsets)


def _boundaries(boundaries: Sequence[float]) -> tuple[float, ...]:
    """Bucket boundaries: positive, strictly increasing, integers except for a last `inf`."""
    if isinstance(boundaries, (str, bytes)) or not isinstance(boundaries, (Sequence, np.ndarray)):
        raise ParameterError(f"boundaries must be a sequence of increasing lengths, got {boundaries!r}")
    out: list[float] = []
    for b in boundaries:
        ok = not isinstance(b, (bool, np.bool_)) and isinstance(b, numbers.Real)
        ok = ok and (b == math.inf or (math.isfinite(b) and float(b).is_integer() and b > 0))
        if not ok:
            raise ParameterError(f"boundaries must be positive integers (the last may be inf), got {b!r}")
        out.append(math.inf if b == math.inf else int(b))
    if not out:
        raise ParameterError("boundaries must hold at least one boundary, got none")
    if any(b >= c for b, c in zip(out, out[1:])):
        raise ParameterError(f"boundaries must be strictly increasing, got {tuple(out)}")
    return tuple(out)


# ----------------------------------------------------------------------------------------------------
# the cost of a plan


def real_steps(lengths: Lengths) -> int:
    """The ideal work: every sequence computed over its own length and no further."""
    return int(_lengths(lengths).sum())


def plan_cost(lengths: Lengths, plan: Batches | BatchPlan) -> int:
    """Padded steps of a plan whose batches are each padded to their own longest sequence.

    sum over batches of len(batch) x max length in batch. A `BatchPlan` is costed by its batches alone
    (use its `padded_steps` for its own, possibly wider, padding).
    """
    array = _lengths(lengths)
    batches = _batches(plan.batches if isinstance(plan, BatchPlan) else plan, array.size)
    sizes = np.fromiter((len(b) for b in batches), dtype=np.int64, count=len(batches))
    return int((sizes * _batch_maxima(array, batches)).sum())


def _chunks(order: Sequence[int], batch_size: int) -> tuple[tuple[int, ...], ...]:
    items = np.asarray(order, dtype=np.int64).tolist()
    return tuple(tuple(items[s:s + batch_size]) for s in range(0, len(items), batch_size))


def padded_steps(lengths: Lengths, batch_size: int, order: Sequence[int] | None = None) -> int:
    """Work of cutting the sequences, taken in `order` (default: as given), into consecutive batches
    of `batch_size` (the last may be shorter), each padded to its own longest sequence."""
    array = _lengths(lengths)
    batch_size = _positive_int("batch_size", batch_size)
    if order is None:
        order = range(array.size)
    elif sorted(_batches([order], array.size)[0]) != list(range(array.size)):
        raise ParameterError(f"order must be a permutation of range({array.size})")
    return plan_cost(array, _chunks(list(order), batch_size))


@dataclass(frozen=True)
class BatchPlan:
    """A batching plan: which sequences go together, and the width each batch is padded to.

    `batches` holds sequence indices (each exactly once, checked); `widths[k]` is the padded length of
    batch k, never shorter than its longest sequence.
    """

    name: str
    lengths: tuple[int, ...]
    batches: tuple[tuple[int, ...], ...]
    widths: tuple[int, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise ParameterError(f"BatchPlan.name must be a string, got {self.name!r}")
        array = _lengths(self.lengths)
        batches = _batches(self.batches, array.size)
        flat = np.fromiter((i for b in batches for i in b), dtype=np.int64)
        if flat.size != array.size or not (np.bincount(flat, minlength=array.size) == 1).all():
            raise ParameterError(f"BatchPlan.batches must hold each of the {array.size} sequences exactly once")
        widths = np.asarray([_positive_int("BatchPlan.widths", w) for w in self.widths], dtype=np.int64)
        if widths.size != len(batches):
            raise ParameterError(f"BatchPlan.widths must give one width per batch ({len(batches)}), "
                                 f"got {widths.size}")
        short = np.flatnonzero(widths < _batch_maxima(array, batches))
        if short.size:
            raise ParameterError(f"BatchPlan.widths: width {int(widths[short[0]])} of batch {int(short[0])} "
                                 f"is shorter than a sequence of that batch")
        object.__setattr__(self, "lengths", tuple(int(v) for v in array))
        object.__setattr__(self, "batches", batches)
        object.__setattr__(self, "widths", tuple(widths.tolist()))

    @property
    def n_batches(self) -> int:
        return len(self.batches)

    @property
    def real_steps(self) -> int:
        return sum(self.lengths)

    @property
    def padded_steps(self) -> int:
        return sum(len(b) * w for b, w in zip(self.batches, self.widths))

    @property
    def waste_fraction(self) -> float:
        """Share of the computed steps that are padding: 1 - real / padded."""
        return 1.0 - self.real_steps / self.padded_steps

    @property
    def overhead(self) -> float:
        """Extra work over the ideal: padded / real - 1 (the slides' "~36% more work")."""
        return self.padded_steps / self.real_steps - 1.0

    def summary(self) -> dict[str, object]:
        """One row for a notebook table."""
        return {"plan": self.name, "sequences": len(self.lengths), "batches": self.n_batches,
                "real_steps": self.real_steps, "padded_steps": self.padded_steps,
                "waste_fraction": self.waste_fraction, "overhead": self.overhead}


def _plan(name: str, array: np.ndarray, batches: Sequence[Sequence[int]], widths: Sequence[int] | None = None,
          ) -> BatchPlan:
    batches = tuple(tuple(b.tolist()) if isinstance(b, np.ndarray) else tuple(b) for b in batches)
    if widths is None:
        widths = _batch_maxima(array, batches).tolist()
    return BatchPlan(name, tuple(int(v) for v in array), batches, tuple(int(w) for w in widths))


def _shuffled(items: Sequence, rng: np.random.Generator | None) -> list:
    items = list(items)
    if rng is None:
        return items
    return [items[i] for i in rng.permutation(len(items))]


# ----------------------------------------------------------------------------------------------------
# the plans


def pad_to_global_max(lengths: Lengths, batch_size: int) -> BatchPlan:
    """Consecutive batches in the given order, every one padded to the corpus maximum.

    What `pad_sequences` on the whole data set (Keras' default `maxlen=None`) followed by plain batching
    computes: padded steps = n x max(lengths), whatever the order.
    """
    array = _lengths(lengths)
    batch_size = _positive_int("batch_size", batch_size)
    batches = _chunks(range(array.size), batch_size)
    return _plan("pad_to_global_max", array, batches, [int(array.max())] * len(batches))


def pad_per_batch(lengths: Lengths, batch_size: int, seed: int | None = None) -> BatchPlan:
    """Consecutive batches of a random (seeded) order, each padded to its own longest sequence.

    A shuffled `DataLoader` with a padding collate, or `tf.data.Dataset.padded_batch`. With `seed=None`
    the sequences stay in the given order, which reproduces the slides' 8 + 8 + 7 + 7 = 30.
    """
    array = _lengths(lengths)
    batch_size = _positive_int("batch_size", batch_size)
    seed = _seed("seed", seed)
    order = range(array.size) if seed is None else np.random.default_rng(seed).permutation(array.size)
    return _plan("pad_per_batch", array, _chunks(list(order), batch_size))


def static_buckets(lengths: Lengths, batch_size: int, boundaries: Sequence[float] = (10, 20, 30, 40, 60, math.inf),
                   pad_to: str = "batch", seed: int | None = None) -> BatchPlan:
    """User-specified buckets: a sequence goes to the first bucket whose boundary >= its length.

    Boundaries are inclusive upper bounds, as in MXNet (`bisect_left`); `tf.data`'s are exclusive.

    Within each bucket (in bucket order) the sequences, in the given order or shuffled when `seed` is
    given, are cut into consecutive batches of `batch_size`; a bucket's last batch may be shorter (it is
    kept, not dropped). With a seed the batch order is shuffled too, as a training loop would.

    `pad_to="batch"` (the default) pads each batch to its own longest sequence, as
    `tf.data.experimental.bucket_by_sequence_length` does by default (`pad_to_bucket_boundary=False`) and
    as a padding collate in PyTorch does. `pad_to="boundary"` pads to the bucket boundary, as MXNet's
    `BucketSentenceIter` does (one unrolled graph per bucket length); a batch of the `inf` bucket is then
    padded to its own longest sequence. A sequence longer than the last boundary is an error (MXNet
    discards it; end the boundaries with `inf` to keep everything).
    """
    array = _lengths(lengths)
    batch_size = _positive_int("batch_size", batch_size)
    bounds = _boundaries(boundaries)
    if pad_to not in PAD_TO:
        raise ParameterError(f"pad_to must be one of {PAD_TO}, got {pad_to!r}")
    seed = _seed("seed", seed)
    if array.max() > bounds[-1]:
        raise ParameterError(f"boundaries end at {bounds[-1]} but the longest sequence has length "
                             f"{int(array.max())}; end the boundaries with inf to keep it")
    rng = None if seed is None else np.random.default_rng(seed)
    bucket_of = np.searchsorted(np.asarray(bounds, dtype=float), array, side="left")
    batches: list[tuple[int, ...]] = []
    bucket: list[float] = []
    for k, bound in enumerate(bounds):
        for batch in _chunks(_shuffled(np.flatnonzero(bucket_of == k), rng), batch_size):
            batches.append(batch)
            bucket.append(bound)
    longest = _batch_maxima(array, tuple(batches)).tolist()
    widths = [int(b) if pad_to == "boundary" and b != math.inf else w for b, w in zip(bucket, longest)]
    pairs = _shuffled(list(zip(batches, widths)), rng)
    return _plan("static_buckets", array, [b for b, _ in pairs], [w for _, w in pairs])


def auto_buckets(lengths: Lengths, batch_size: int, seed: int | None = None) -> BatchPlan:
    """Buckets generated greedily from the data: sort, then batch neighbours in length.

    The rule: sort the sequences longest first (ties by index) and cut consecutive batches of
    `batch_size`, each padded to its own longest sequence, so each batch takes the longest sequences not
    yet placed. When `batch_size` does not divide n, the one short batch of r = n % batch_size sequences
    goes at the slot of the sorted order where it pads least (ties: the shortest slot). Among all plans
    with the same batch sizes as `pad_per_batch` (n // batch_size full batches and one of r) none pads
    less: for fixed batch sizes an optimal plan is made of runs of the sorted order, and only the place of
    the short batch is left to choose. The batches come longest first, or shuffled when `seed` is given.

    On the slides' example [4, 8, 3, 7] in batches of two this gives [8, 7] and [4, 3]: 8+8+4+4 = 24.
    """
    array = _lengths(lengths)
    batch_size = _positive_int("batch_size", batch_size)
    seed = _seed("seed", seed)
    order = np.argsort(-array, kind="stable")
    s = array[order]
    n, full, r = array.size, array.size // batch_size, array.size % batch_size
    if r == 0:
        starts = list(range(0, n, batch_size))
    else:
        # short batch at slot k: full batches start at 0, B, ..., (k-1)B; it starts at kB; the rest at kB+r+jB
        a = s[0::batch_size]  # first (longest) element of a batch starting at a multiple of B; m+1 of them
        c = s[r::batch_size]  # first element of a batch starting r past a multiple of B; m of them
        before = np.concatenate(([0], np.cumsum(a[:full])))
        after = np.concatenate((np.cumsum(c[::-1])[::-1], [0]))
        cost = batch_size * before + r * a + batch_size * after
        k = full - int(np.argmin(cost[::-1]))  # the last slot among the cheapest
        starts = [j * batch_size for j in range(k)] + [k * batch_size]
        starts += [k * batch_size + r + j * batch_size for j in range(full - k)]
    ends = starts[1:] + [n]
    batches = [order[a_:b_] for a_, b_ in zip(starts, ends)]
    rng = None if seed is None else np.random.default_rng(seed)
    return _plan("auto_buckets", array, _shuffled(batches, rng))


def mxnet_autogen_boundaries(lengths: Lengths, batch_size: int) -> tuple[int, ...]:
    """Bucket boundaries as MXNet's `BucketSentenceIter` generates them when given none.

    Every length that at least `batch_size` sequences have becomes a boundary (MXNet's
    `[i for i, j in enumerate(np.bincount(lengths)) if j >= batch_size]`). MXNet discards sequences
    longer than the last one; here the longest length is appended when needed, so `static_buckets` with
    these boundaries keeps every sequence. On data with too few sequences per length (the slides' toy
    example) this is just the longest length: one bucket.
    """
    array = _lengths(lengths)
    batch_size = _positive_int("batch_size", batch_size)
    bounds = [int(i) for i, count in enumerate(np.bincount(array)) if count >= batch_size]
    if not bounds or bounds[-1] < array.max():
        bounds.append(int(array.max()))
    return tuple(bounds)


def mxnet_autogen(lengths: Lengths, batch_size: int, seed: int | None = None) -> BatchPlan:
    """Static buckets at the boundaries MXNet's `BucketSentenceIter` generates when given none
    (`mxnet_autogen_boundaries`), each batch padded to its bucket's boundary, as MXNet unrolls one graph per
    bucket. Unlike MXNet, which drops the sentences longer than its last boundary and each bucket's last
    short batch, every sentence is kept: the sentences above the last common length form one bucket padded
    to the longest. The batch order is shuffled when `seed` is given."""
    bounds = mxnet_autogen_boundaries(lengths, batch_size)
    return replace(static_buckets(lengths, batch_size, bounds, pad_to="boundary", seed=seed), name="mxnet_autogen")


def sorted_batches(lengths: Lengths, batch_size: int, seed: int | None = None) -> BatchPlan:
    """Sort by length, cut consecutive batches, shuffle their order: the bucketing a PyTorch user writes by hand.

    With `seed` the sequences are shuffled before a stable sort, so sequences of equal length are mixed at
    random, and the batch order is shuffled. It differs from `auto_buckets` only where the one short batch
    falls (here: among the longest sequences), so its padded work is within one batch of auto buckets'.
    """
    array = _lengths(lengths)
    batch_size = _positive_int("batch_size", batch_size)
    seed = _seed("seed", seed)
    rng = None if seed is None else np.random.default_rng(seed)
    start = np.arange(array.size) if rng is None else rng.permutation(array.size)
    order = start[np.argsort(array[start], kind="stable")]
    return _plan("sorted_batches", array, _shuffled(_chunks(order, batch_size), rng))


#: Every batching plan, by name: each is `plan(lengths, batch_size, ...)`, in the order the study shows them
#: (the two baselines first, then the bucketed plans).
PLANS = {"pad_to_global_max": pad_to_global_max, "pad_per_batch": pad_per_batch,
         "static_buckets": static_buckets, "mxnet_autogen": mxnet_autogen, "sorted_batches": sorted_batches,
         "auto_buckets": auto_buckets}


# ----------------------------------------------------------------------------------------------------
# the study's corpus and its plans, as the bucketing claim measures them


def check_corpus(source: object) -> int | str:
    """A corpus as a grid names it: one of `PTB_CORPORA` (the real lengths) or a number of synthetic sentences."""
    if isinstance(source, str) and source in PTB_CORPORA:
        return source
    if isinstance(source, bool) or not isinstance(source, numbers.Integral) or source <= 0:
        raise ParameterError(f"corpus must be one of {list(PTB_CORPORA)} (the real Penn Treebank lengths) or a "
                             f"positive number of synthetic PTB-like sentences, got {source!r}")
    return int(source)


def corpus_label(source: int | str) -> str:
    """How a page names a corpus: "Penn Treebank valid (real, 3,370 sentences)" or "synthetic PTB-like, 42,068
    sentences"."""
    source = check_corpus(source)
    if isinstance(source, str):
        split = source.removeprefix("ptb-")
        return f"Penn Treebank {split} (real, {len(ptb_lengths(split)):,} sentences)"
    return f"synthetic PTB-like, {source:,} sentences"


@lru_cache(maxsize=8)
def corpus(source: int | str, seed: int = 0) -> np.ndarray:
    """A corpus' sentence lengths (read-only): the real PTB lengths of `PTB_CORPORA` in a seeded random order
    (the shipped counts keep no sentence order; a shuffled loader would not keep it either), or the first
    `source` lengths of the synthetic PTB-like draw (already in random order: they are i.i.d. draws)."""
    source = check_corpus(source)
    if isinstance(source, str):
        real = ptb_lengths(source.removeprefix("ptb-"))
        lengths = real[np.random.default_rng(seed).permutation(real.size)]
    else:
        lengths = ptb_like_lengths(source, seed)
    lengths.flags.writeable = False
    return lengths


def make_plan(name: str, lengths: np.ndarray, batch_size: int, *, seed: int = 0,
              boundaries: Sequence[int] = BOUNDARIES, pad_to: str = "boundary") -> BatchPlan:
    """One of `PLANS`; the random ones (and the batch order of the bucketed ones) seeded.

    `pad_to_global_max` keeps the corpus order, which `corpus` makes random. Static buckets end with an
    `inf` bucket so no sentence is dropped; `pad_to='boundary'` pads each batch to its bucket's boundary,
    as MXNet's `BucketSentenceIter` does (one unrolled graph per bucket).
    """
    if name not in PLANS:
        raise ParameterError(f"unknown plan {name!r}; plans: {list(PLANS)}")
    if name == "pad_to_global_max":
        return pad_to_global_max(lengths, batch_size)
    if name == "static_buckets":
        return static_buckets(lengths, batch_size, (*boundaries, math.inf), pad_to=pad_to, seed=seed)
    return PLANS[name](lengths, batch_size, seed=seed)


@lru_cache(maxsize=64)
def cached_plan(name: str, source: int | str, seed: int, batch_size: int, boundaries: tuple[int, ...],
                pad_to: str) -> BatchPlan:
    return make_plan(name, corpus(source, seed), batch_size, seed=seed, boundaries=boundaries, pad_to=pad_to)


def plans(source: int | str, batch_size: int, *, seed: int = 0, boundaries: Sequence[int] = BOUNDARIES,
          pad_to: str = "boundary") -> dict[str, BatchPlan]:
    """Every plan of `PLANS` over the corpus `source` (see `corpus`)."""
    return {name: cached_plan(name, source, seed, batch_size, tuple(boundaries), pad_to) for name in PLANS}


def timing_sample(plan: BatchPlan, k: int) -> BatchPlan:
    """The plan's `k` representative batches as a plan of their own: the batches sorted by padded steps
    (then real steps) are cut into `k` strata of equal count, and the middle batch of each is kept (a
    midpoint rule over the distribution of batch costs). With `k` at least the plan's batches, the plan
    itself: a whole epoch, no sampling.

    The result is a `BatchPlan` over just the sampled sequences (re-indexed 0..m-1) with the original
    batches' widths, in the original plan's order, ready for `data.torch_batches`/`data.keras_batches`.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        raise ParameterError(f"sample_batches must be a positive integer, got {k!r}")
    if k >= plan.n_batches:
        return plan
    lengths = np.asarray(plan.lengths)
    padded = np.array([len(b) * w for b, w in zip(plan.batches, plan.widths)])
    real = np.array([int(lengths[list(b)].sum()) for b in plan.batches])
    order = np.lexsort((np.arange(plan.n_batches), real, padded))  # by padded, then real steps, then position
    chosen = sorted(int(stratum[len(stratum) // 2]) for stratum in np.array_split(order, k))
    sub_lengths, sub_batches, start = [], [], 0
    for index in chosen:
        batch = plan.batches[index]
        sub_lengths += [int(lengths[i]) for i in batch]
        sub_batches.append(tuple(range(start, start + len(batch))))
        start += len(batch)
    return BatchPlan(f"{plan.name} (sample of {k})", tuple(sub_lengths), tuple(sub_batches),
                     tuple(plan.widths[i] for i in chosen))


def sample_for(config: dict) -> BatchPlan:
    """The batches a bucketing point's `config` times (plan, corpus, seed, batch size, sample size): a
    stratified sample (`timing_sample`), or the whole epoch when `sample_batches` covers every batch."""
    plan = cached_plan(str(config["plan"]), check_corpus(config["corpus"]), int(config["seed"]),
                       int(config["batch_size"]), tuple(config.get("boundaries", BOUNDARIES)),
                       str(config.get("pad_to", "boundary")))
    return timing_sample(plan, int(config["sample_batches"]))


def worked_example() -> dict[str, object]:
    """The slides' numbers, computed: [4, 8, 3, 7] in batches of two, real 22, padded 30, bucketed 24."""
    lengths = list(WORKED_EXAMPLE_LENGTHS)
    real = real_steps(lengths)
    padded = pad_per_batch(lengths, 2, seed=None).padded_steps
    bucketed = auto_buckets(lengths, 2).padded_steps
    return {"lengths": lengths, "real": real, "padded": padded, "bucketed": bucketed,
            "padded_overhead": padded / real - 1}


# ----------------------------------------------------------------------------------------------------
# the Penn Treebank's real sentence lengths, and a synthetic PTB-like corpus


@cache
def _ptb_counts() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The shipped table (`lstmstudy/corpora/ptb_sentence_lengths.csv`): per split, its lengths and counts."""
    text = resources.files("lstmstudy").joinpath("corpora", "ptb_sentence_lengths.csv").read_text()
    table = np.loadtxt(text.splitlines(), delimiter=",", skiprows=1, dtype=str)
    return {split: (table[table[:, 0] == split, 1].astype(np.int64), table[table[:, 0] == split, 2].astype(np.int64))
            for split in ("valid", "test")}


def ptb_lengths(split: str = "valid+test") -> np.ndarray:
    """The real sentence lengths (tokens, no end-of-sentence token) of the Penn Treebank's `split`, sorted.

    `split` is "valid" (3,370 sentences), "test" (3,761) or "valid+test" (7,131): Mikolov's preprocessed
    `ptb.valid.txt` and `ptb.test.txt` (Marcus et al. 1993; Mikolov et al. 2010), counted per length; the
    provenance is in `lstmstudy/corpora/README.md`. Only the counts are shipped, so the order is by length.
    """
    if split not in PTB_SPLITS:
        raise ParameterError(f"split must be one of {list(PTB_SPLITS)}, got {split!r}")
    counts = _ptb_counts()
    parts = [np.repeat(*counts[name]) for name in split.split("+")]
    return np.sort(np.concatenate(parts))


def ptb_like_lengths(n: int = 42068, seed: int = 0) -> np.ndarray:
    """Sentence lengths (tokens, end-of-sentence included) resembling PTB's training set, seeded.

    Drawn from the log-normal in `PTB_LIKE` (mean 21.1 as published; standard deviation 10, an
    ASSUMPTION, not a measured figure), rounded and clipped to [1, 82]: right-skewed with a long tail.
    """
    n = _positive_int("n", n)
    seed = _seed("seed", seed, allow_none=False)
    draws = np.random.default_rng(seed).lognormal(_PTB_MU, _PTB_SIGMA, size=n)
    low, high = PTB_LIKE["min_length"], PTB_LIKE["max_length"]
    return np.clip(np.rint(draws), low, high).astype(np.int64)


# ----------------------------------------------------------------------------------------------------
# tensors for timing


def _resolve(lengths: Lengths, plan: BatchPlan | Batches) -> tuple[np.ndarray, tuple, tuple]:
    array = _lengths(lengths)
    if isinstance(plan, BatchPlan):
        if plan.lengths != tuple(int(v) for v in array):
            raise ParameterError(f"plan was made for other lengths than the ones given (plan {plan.name!r})")
        return array, plan.batches, plan.widths
    batches = _batches(plan, array.size)
    return array, batches, tuple(_batch_maxima(array, batches).tolist())


def _padded_numpy(lengths: Lengths, plan: BatchPlan | Batches, features: int, seed: int,
                  limit: int | None) -> list[tuple[np.ndarray, np.ndarray]]:
    """(x of shape (B, width, F) float32, zero past each length; lengths (B,) int64) for each batch."""
    array, batches, widths = _resolve(lengths, plan)
    features = _positive_int("features", features)
    seed = _seed("seed", seed, allow_none=False)
    if limit is not None:
        batches, widths = batches[:_positive_int("limit", limit)], widths[:limit]
    rng = np.random.default_rng(seed)
    out = []
    for batch, width in zip(batches, widths):
        lens = array[list(batch)]
        x = rng.standard_normal((len(batch), width, features), dtype=np.float32)
        x[np.arange(width)[None, :] >= lens[:, None]] = 0.0
        out.append((x, lens.copy()))
    return out


def keras_batches(lengths: Lengths, plan: BatchPlan | Batches, features: int, seed: int = 0,
                  limit: int | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Padded NumPy batches for Keras: x (B, T_max, F) float32, zero-padded on the right, and a boolean
    mask (B, T_max), True on real steps. Right padding is what Keras' cuDNN LSTM path requires of a mask.

    T_max is the plan's width for the batch. `limit` builds only the first batches; with the same seed
    the values equal those of `torch_batches`, so both frameworks time the same numbers.
    """
    out = []
    for x, lens in _padded_numpy(lengths, plan, features, seed, limit):
        out.append((x, np.arange(x.shape[1])[None, :] < lens[:, None]))
    return out


def torch_batches(lengths: Lengths, plan: BatchPlan | Batches, features: int, seed: int = 0,
                  limit: int | None = None, device: str | torch.device = "cpu",
                  ) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Padded PyTorch batches: x (B, T_max, F) float32 on `device`, zero-padded on the right, and the
    lengths (B,) int64 on the CPU, where `pack_padded_sequence` wants them. Same values as `keras_batches`."""
    import torch

    return [(torch.from_numpy(x).to(device), torch.from_numpy(lens))
            for x, lens in _padded_numpy(lengths, plan, features, seed, limit)]


def pack_batch(x: torch.Tensor, lengths: torch.Tensor) -> PackedSequence:
    """A padded batch as a `PackedSequence`, so cuDNN/ATen skip the padding: the slides' ideal workload.

    Its `batch_sizes` sum to the real steps of the batch; the batch need not be sorted by length.
    """
    from torch.nn.utils.rnn import pack_padded_sequence

    return pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)

"""Order statistics: numpy's quantile, percentile and median (and their nan forms),
found by ooc's radix select (a few reads of the file, bounded memory), numpy 1.24's bits."""

import operator
import os
import warnings

import numpy as np

from . import _ooc

__all__ = ["quantile", "percentile", "median", "nanquantile", "nanpercentile", "nanmedian", "unique", "sort", "argsort"]

_METHODS = ("linear", "lower", "higher", "nearest", "midpoint")
# numpy's other methods: known to numpy (so not its "is not a valid method"), not to ooc.
_NUMPY_ONLY_METHODS = ("inverted_cdf", "averaged_inverted_cdf", "closest_observation", "interpolated_inverted_cdf",
                       "hazen", "weibull", "median_unbiased", "normal_unbiased")


def _numpy_methods():
    return ("dict_keys(['inverted_cdf', 'averaged_inverted_cdf', 'closest_observation', "
            "'interpolated_inverted_cdf', 'hazen', 'weibull', 'linear', 'median_unbiased', 'normal_unbiased', "
            "'lower', 'higher', 'midpoint', 'nearest'])")


def _check_method(method):
    if method in _METHODS:
        return method
    if method in _NUMPY_ONLY_METHODS:
        raise ValueError(f"{method!r}: ooc computes the methods {', '.join(_METHODS)} (not numpy's others)")
    raise ValueError(f"{method!r} is not a valid method. Use one of: {_numpy_methods()}")


def _axis_of(axis, ndim):
    if axis is None:
        return None
    if isinstance(axis, tuple):
        if len(axis) != 1:
            raise ValueError(f"ooc reduces along one axis at a time, not {axis}")
        axis = axis[0]
    return int(np.core.multiarray.normalize_axis_index(operator.index(axis), ndim))


def _order_statistic(name, a, q, axis, out, keepdims, method, median, skip_nan, memory_budget, options):
    from . import open as _open, _source, _common  # the package imports this module first
    array = _open(a)
    shape, dtype = tuple(array.shape), np.dtype(array.dtype)
    axis = _axis_of(axis, len(shape))
    empty = np.empty(shape, dtype)  # no memory: every dimension it has is kept, one is 0
    if 0 in shape:
        # numpy's own results, errors and warnings for an empty array (no data to read)
        if median:
            f = np.nanmedian if skip_nan else np.median
            return f(empty, axis=axis, out=out, keepdims=keepdims)
        f = np.nanquantile if skip_nan else np.quantile
        return f(empty, q, axis=axis, out=out, method=method, keepdims=keepdims)
    if dtype.kind == "b" and not median and method in ("linear", "midpoint"):
        raise TypeError("numpy boolean subtract, the `-` operator, is not supported, use the bitwise_xor, "
                        "the `^` operator, or the logical_xor function instead.")
    qs = np.zeros(0) if median else q
    call, progress = _common(options)
    values, all_nan, _, _ = _ooc.quantile(_source(array), [float(v) for v in np.ravel(qs)], np.ndim(qs) == 0,
                                          method, median, skip_nan, axis, int(memory_budget or 0), call, progress)
    if not median:
        values = values.reshape(np.shape(q) + values.shape[1:])
        if method not in ("linear", "midpoint") and values.ndim > 0 and not (skip_nan and axis is not None
                                                                            and len(shape) > 1 and np.ndim(q) == 0):
            values = values.astype(dtype)  # numpy's take keeps the input's byte order
        elif skip_nan and dtype.kind == "f" and np.ndim(q) > 0 and values.size:
            # numpy's all-NaN slice is np.full(q.shape, nan, dtype=the input's), byte order
            # too; along an axis np.apply_along_axis gives all slices the first one's dtype.
            one_d = axis is None or len(shape) == 1
            first = values.reshape(values.shape[:np.ndim(q)] + (-1,))[..., 0]
            # (ooc gives the first slice's dtype as numpy does, float16/32; float64 tells nothing)
            if one_d:
                in_input_dtype = all_nan > 0
            elif dtype.itemsize < 8:
                in_input_dtype = values.dtype != np.float64
            else:
                in_input_dtype = bool(np.all(np.isnan(first)))
            if in_input_dtype:
                values = values.astype(dtype)
    if all_nan:
        warnings.warn("All-NaN slice encountered", RuntimeWarning, stacklevel=3)
    if keepdims:
        kept = list(values.shape)
        lead = 0 if median else np.ndim(q)
        if axis is None:
            kept[lead:] = [1] * len(shape)
        else:
            kept.insert(lead + axis, 1)
        values = values.reshape(kept)
    if out is not None:
        out[...] = values
        return out
    return values[()] if values.ndim == 0 else values


def _fractions(q, percent):
    q = np.asanyarray(q)
    if percent:
        q = np.asanyarray(np.true_divide(q, 100))
    if q.ndim > 2:
        raise ValueError("q must be a scalar or 1d")
    if not (np.all(0 <= q) and np.all(q <= 1)):
        raise ValueError("Percentiles must be in the range [0, 100]" if percent
                         else "Quantiles must be in the range [0, 1]")
    return q


def _make(name, median, skip_nan, percent):
    if median:
        def statistic(a, axis=None, out=None, overwrite_input=False, keepdims=False, *, memory_budget=None,
                      **options):
            return _order_statistic(name, a, None, axis, out, keepdims, "linear", True, skip_nan, memory_budget,
                                    options)
    else:
        def statistic(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
                      memory_budget=None, **options):
            q = _fractions(q, percent)
            return _order_statistic(name, a, q, axis, out, keepdims, _check_method(method), False, skip_nan,
                                    memory_budget, options)
    statistic.__name__ = statistic.__qualname__ = name
    statistic.__doc__ = (
        f"np.{name} of an array out of core, bit for bit: a radix select over the values' bit patterns "
        f"(a few reads, memory bounded by memory_budget bytes, default 256 MiB), no sort. axis is None or one "
        f"axis{'' if median else '; method is linear, lower, higher, nearest or midpoint'}. overwrite_input is "
        f"accepted and has no effect (the file is never modified).")
    return statistic


quantile = _make("quantile", False, False, False)
percentile = _make("percentile", False, False, True)
median = _make("median", True, False, False)
nanquantile = _make("nanquantile", False, True, False)
nanpercentile = _make("nanpercentile", False, True, True)
nanmedian = _make("nanmedian", True, True, False)


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *, equal_nan=True,
           out=None, temp_dir=None, memory_budget=None, overwrite=False, **options):
    """np.unique(ar, return_counts=return_counts, equal_nan=equal_nan) of the flattened array,
    out of core: a hash table per thread, merged, one read (values ascending in ar's dtype;
    counts int64). Without out=, the values must fit the tables (memory_budget bytes, default
    256 MiB; more raise MemoryError). out= (x.npy or file.h5:/dataset) writes the values to a
    file and returns an ooc.Array over it, for any number of distinct values: when the tables
    cannot hold them, the array is sorted first (ooc.sort's runs, in temp_dir, default out's
    directory) and read once more; counts are then returned as an ndarray, and must fit the
    budget. equal_nan=False is not supported with out=."""
    from . import open as _open, _source, _common, _check_out, Array
    if return_index or return_inverse:
        raise ValueError("ooc.unique: return_index and return_inverse are not supported (values and counts are)")
    if axis is not None:
        raise ValueError("ooc.unique: axis= is not supported (the flattened array's distinct values are)")
    array = _open(ar)
    dtype = np.dtype(array.dtype)
    call, progress = _common(options)
    out = _check_out(out, "unique")
    if out is not None:
        if not equal_nan:
            raise ValueError("ooc.unique: equal_nan=False is not supported with out=")
        _, counts, _, _ = _ooc.unique_to(_source(array), out, bool(return_counts),
                                         None if temp_dir is None else os.fspath(temp_dir), int(memory_budget or 0),
                                         bool(overwrite), call, progress)
        return (Array(out), counts) if return_counts else Array(out)
    values, counts, _ = _ooc.unique(_source(array), int(memory_budget or 0), call, progress)
    values = values.astype(dtype)  # numpy's sorted copy keeps the byte order
    if not equal_nan and values.size and dtype.kind == "f" and np.isnan(values[-1]):
        nans = int(counts[-1])  # each NaN a value of its own, as numpy's equal_nan=False
        values = np.concatenate([values[:-1], np.full(nans, np.nan, dtype)]).astype(dtype)
        counts = np.concatenate([counts[:-1], np.ones(nans, counts.dtype)])
    return (values, counts) if return_counts else values

def _sort(name, indices, a, axis, out, kind, temp_dir, memory_budget, overwrite, options):
    from . import open as _open, _source, _common, _check_out, Array
    if kind not in (None, "stable", "mergesort", "quicksort", "heapsort"):
        raise ValueError(f"{name}: kind must be one of 'quicksort', 'mergesort', 'heapsort' or 'stable', not {kind!r}")
    array = _open(a)
    if axis is not None:
        axis = int(np.core.multiarray.normalize_axis_index(operator.index(axis), len(array.shape)))
    out = _check_out(out, name)
    call, progress = _common(options)
    result = _ooc.sort(_source(array), axis, indices, out, None if temp_dir is None else os.fspath(temp_dir),
                       int(memory_budget or 0), bool(overwrite), call, progress)
    return Array(out) if out is not None else result


def sort(a, axis=-1, kind=None, order=None, *, out=None, temp_dir=None, memory_budget=None, overwrite=False,
         **options):
    """np.sort(a, axis, kind='stable') out of core: NaNs last, equal values in their input order
    (whatever kind= names: the result is the stable sort's, which numpy's kinds differ from only
    in the order of -0.0 and 0.0 and of NaN payloads). axis=None sorts the flattened array. A
    slab along the axis that fits a tile is sorted where it lies (axis=-1 of an (N, 8) array);
    otherwise runs of memory_budget bytes (default 256 MiB) are radix-sorted on every core into
    one temporary file in temp_dir (default: out's directory; unlinked from the start, so nothing
    is left behind) and merged once. out= (x.npy, file.h5:/dataset or x.zarr) writes the result
    and returns an ooc.Array over it; without out= the result is an np.ndarray."""
    if order is not None:
        raise ValueError("ooc.sort: order= (structured arrays) is not supported")
    return _sort("sort", False, a, axis, out, kind, temp_dir, memory_budget, overwrite, options)


def argsort(a, axis=-1, kind=None, order=None, *, out=None, temp_dir=None, memory_budget=None, overwrite=False,
            **options):
    """np.argsort(a, axis, kind='stable') out of core, int64: each value's index along the axis
    (of the flattened array, in C order, for axis=None), ties in input order. As ooc.sort for
    out=, temp_dir= and memory_budget=."""
    if order is not None:
        raise ValueError("ooc.argsort: order= (structured arrays) is not supported")
    return _sort("argsort", True, a, axis, out, kind, temp_dir, memory_budget, overwrite, options)

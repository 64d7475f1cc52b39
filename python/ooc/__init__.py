"""ooc: numpy arrays larger than memory, streamed tile by tile through ooc's C++ engine.

    import ooc
    a = ooc.open("big.npy")            # or "run.h5:/sim/p", "x.npy[::5, 3]", a memmap, an h5py.Dataset
    ooc.sum(a); ooc.mean(a, axis=0)    # numpy's answers, bit for bit
    ooc.apply("log1p", a, out="b.npy")

Every call takes threads= (0: every core), tile_bytes= (an int, or "64M"), io= ("auto",
"mmap", "direct") and progress= (True for a bar on stderr, or a callable). The GIL is
released while ooc works; Ctrl-C raises KeyboardInterrupt and leaves no output behind.
"""
import os
import sys
import time
import warnings
import weakref

import numpy as np

from . import _lazy, _ooc

__all__ = [
    "Array", "Error", "Expression", "open", "apply", "copy", "eval", "histogram", "reduce", "map_blocks", "import_text",
    "export_text",
    "sum", "prod", "mean", "min", "max", "argmin", "argmax", "var", "std", "count_nonzero",
    "any", "all", "nansum", "nanmean", "nanmin", "nanmax", "norm",
    "gram", "cov", "corrcoef", "matmul", "qr", "svd", "lstsq",
    "quantile", "percentile", "median", "nanquantile", "nanpercentile", "nanmedian", "unique",
]

# ooc.Error: a runtime failure with ooc's one-line message (a subclass of OSError).
Error = _ooc.Error
Error.__module__ = "ooc"

_builtin_sum, _builtin_min, _builtin_max, _builtin_any, _builtin_all = sum, min, max, any, all


# ---- arrays -------------------------------------------------------------------------

class Array(_lazy.Shaped):
    """An array in a file (.npy, or an HDF5 dataset), possibly a selection of one.

    Nothing is read when it is made or indexed: a[::10, [2, 5]] is another ooc.Array.
    np.asarray(a) or a.read() reads it into memory; the functions of this module stream it.
    """

    __slots__ = ("_source", "shape", "dtype", "order", "format", "_keep")

    def __init__(self, path, selections=()):
        self._keep = ()  # what must live as long as the array: the temporary files of masks
        self._source = _ooc.Source(os.fspath(path), list(selections))
        info = _ooc.info(self._source)
        self.shape = tuple(int(n) for n in info["shape"])
        self.dtype = np.dtype(info["descr"])
        self.order = info["order"]
        self.format = info["format"]

    @property
    def path(self):
        """What this array was opened from: "x.npy", "run.h5:/p" or "x.npy[::5, 3]"."""
        return self._source.path

    @property
    def selections(self):
        """Selections applied after opening, one per indexing, as text ("::10, [2, 5]")."""
        return tuple(self._source.selections)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __repr__(self):
        where = self.path + "".join(f"[{text}]" for text in self.selections)
        return f"ooc.Array({where!r}, shape={self.shape}, dtype={self.dtype}, order={self.order!r})"

    def __getitem__(self, key):
        key, keep = _lazy.mask_key(key, Array)  # a lazy boolean expression is computed into a mask file
        text, masks = _selection_text(key, self.shape)
        result = Array(self._source.path, self.selections + (text,))
        result._keep = self._keep + keep + masks
        return result

    def read(self, **options):
        """Every element, in a numpy array of this dtype and memory order. MemoryError
        when it does not fit in the memory available."""
        return _ooc.read(self._source, *_common(options))

    def __array__(self, dtype=None, copy=None):  # copy=: numpy 2 passes it; the result is always new
        values = self.read()
        return values if dtype is None else values.astype(dtype, copy=False)


def open(array):
    """An ooc.Array over `array`: a path ("x.npy", "run.h5:/sim/p", "x.npy[::5, 3]"),
    an os.PathLike, an np.memmap of a whole .npy file (np.load(..., mmap_mode=...)), an
    h5py.Dataset, or an ooc.Array or lazy ooc.Expression (returned as it is)."""
    if isinstance(array, (Array, _lazy.Expression)):
        return array
    if isinstance(array, (str, bytes, os.PathLike)):
        return Array(os.fsdecode(array))
    if isinstance(array, np.memmap):
        return Array(_memmap_path(array))
    h5py = sys.modules.get("h5py")
    if h5py is not None and isinstance(array, h5py.Dataset):
        return Array(f"{array.file.filename}:{array.name}")
    raise TypeError(f"ooc.open takes a path, an ooc.Array, an np.memmap of a .npy file or an h5py.Dataset, "
                    f"not {type(array).__name__}")


def _memmap_path(m):
    """The .npy file an np.memmap maps whole (what np.load(path, mmap_mode=...) returns)."""
    filename = getattr(m, "filename", None)
    if filename is None:
        raise ValueError("this np.memmap has no file name (a view of one made by arithmetic?)")
    header = _ooc.info(_ooc.Source(filename, []))
    order_matches = m.flags.c_contiguous if header["order"] == "C" else m.flags.f_contiguous
    if (m.shape != tuple(header["shape"]) or m.dtype != np.dtype(header["descr"]) or not order_matches
            or getattr(m, "offset", None) != header["data_offset"]):
        raise ValueError(f"this np.memmap is a view of part of {filename}: open the file with ooc.open "
                         f"and index the ooc.Array instead (ooc.open({filename!r})[...])")
    return filename


def _source(array):
    return open(array)._source


def _selection_text(key, shape):
    """numpy's index `key` into an array of `shape` as ooc's selection text, what goes
    between the brackets (::10, [2, 5], @mask.npy), and what its masks need kept alive
    as long as the selection (an in-memory mask's file, a mask array's own)."""
    items = key if isinstance(key, tuple) else (key,)
    if _builtin_sum(1 for item in items if item is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    masks = [_mask_of(item) for item in items]
    if _builtin_any(mask is not None for mask in masks):
        _check_masks(items, masks, shape)
    indexed = _builtin_sum(1 if mask is None else len(mask.shape) for item, mask in zip(items, masks)
                           if item is not Ellipsis)
    parts, keep = [], ()
    for item, mask in zip(items, masks):
        if item is Ellipsis:  # as many whole axes as the other items leave
            parts.extend([":"] * (len(shape) - indexed))
        elif mask is not None:
            text, kept = _mask_text(mask)
            parts.append(text)
            keep += kept
        else:
            parts.append(_index_text(item))
            if isinstance(item, Array):  # an index array in a file
                keep += (item,)
    return ", ".join(parts), keep


def _mask_of(item):
    """A boolean mask item (a bool np.ndarray or list of bools, a bool ooc.Array) as
    itself (an ndarray for a list), else None."""
    if isinstance(item, Array):
        if item.dtype.kind != "b":
            if item.dtype.kind in "iu":
                return None
            raise IndexError("arrays used as indices must be of integer (or boolean) type")
        return item
    if isinstance(item, (list, np.ndarray)):
        values = np.asarray(item)
        if values.dtype == bool and values.ndim > 0:
            return values
    return None


def _check_masks(items, masks, shape):
    """numpy's IndexError for a key with a mask that does not fit `shape`."""
    indexed = _builtin_sum(1 if mask is None else len(mask.shape) for item, mask in zip(items, masks)
                           if item is not Ellipsis and item is not None)
    if indexed > len(shape):
        raise IndexError(f"too many indices for array: array is {len(shape)}-dimensional, but {indexed} were indexed")
    axis = 0
    for item, mask in zip(items, masks):
        if item is Ellipsis:
            axis += len(shape) - indexed
        elif mask is None:
            axis += 1
        else:
            for j, n in enumerate(mask.shape):
                if n != shape[axis + j]:
                    raise IndexError(f"boolean index did not match indexed array along dimension {axis + j}; "
                                     f"dimension is {shape[axis + j]} but corresponding boolean dimension is {n}")
            axis += len(mask.shape)


def _mask_text(mask):
    """`@FILE` for a mask, and what keeps FILE alive. A bool ooc.Array names its own file
    (and selections). An in-memory mask is written, as a .npy, into an anonymous memory
    file (memfd) named /proc/self/fd/N, closed when the last selection made with it goes:
    nothing is ever left on disk, even by a killed process."""
    if isinstance(mask, Array):
        return "@" + mask.path + "".join(f"[{text}]" for text in mask.selections), (mask,)
    memory = _MaskInMemory(mask)
    return "@" + memory.path, (memory,)


class _MaskInMemory:
    """A bool ndarray as a .npy in an anonymous memory file, open until this is collected."""
    __slots__ = ("path", "_finalizer", "__weakref__")

    def __init__(self, mask):
        fd = os.memfd_create("ooc-mask.npy", os.MFD_CLOEXEC)
        self._finalizer = weakref.finalize(self, os.close, fd)
        with os.fdopen(fd, "wb", closefd=False) as f:
            np.save(f, mask)
        self.path = f"/proc/self/fd/{fd}"


_NOT_AN_INDEX = ("only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and integer or boolean "
                 "arrays are valid indices")  # numpy's IndexError for any other item


def _index_text(item):
    if isinstance(item, slice):
        def bound(value):
            if value is None:
                return ""
            if not hasattr(value, "__index__"):
                raise TypeError("slice indices must be integers or None or have an __index__ method")
            return str(int(value.__index__()))
        text = bound(item.start) + ":" + bound(item.stop)
        return text + (":" + bound(item.step) if item.step is not None else "")
    if item is None:
        raise ValueError("ooc selections do not add axes (None / np.newaxis)")
    if isinstance(item, (bool, np.bool_)):
        raise ValueError("ooc selections take no boolean scalar index")
    if isinstance(item, Array):  # an integer array in a file: an index array
        return "@" + item.path + "".join(f"[{text}]" for text in item.selections)
    if isinstance(item, (list, np.ndarray)):
        values = np.asarray(item)
        if values.dtype == bool:
            raise ValueError("ooc selections take no 0-d boolean index (it adds an axis)")
        if values.size and values.dtype.kind not in "iu":
            raise IndexError(_NOT_AN_INDEX if isinstance(item, list) else
                             "arrays used as indices must be of integer (or boolean) type")
        if values.ndim != 1:
            raise ValueError("an index list must be 1-d")
        return "[" + ", ".join(str(int(v)) for v in values) + "]"
    if not hasattr(item, "__index__"):
        raise IndexError(_NOT_AN_INDEX)
    return str(int(item.__index__()))


def _as_index(value):
    try:
        return value.__index__()
    except AttributeError:
        raise ValueError(f"{value!r} is not an integer index") from None


# ---- options and progress -----------------------------------------------------------

_OPTION_NAMES = ("threads", "tile_bytes", "io", "prefetch", "progress")


def _common(options):
    """(CallOptions, progress callable or None) from the keywords every call takes."""
    unknown = set(options) - set(_OPTION_NAMES)
    if unknown:
        raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(unknown))}")
    threads = options.get("threads")
    tile_bytes = options.get("tile_bytes")
    call = _ooc.call_options(
        0 if threads is None else int(threads),
        _ooc.default_tile_bytes if tile_bytes is None else tile_bytes,
        options.get("io") or "auto",
        int(options.get("prefetch", 2)))
    return call, _progress_reporter(options.get("progress"))


def _progress_reporter(progress):
    """progress=True: tqdm's bar where tqdm is installed, else ooc's own, on stderr.
    A callable is called as progress(done_bytes, total_bytes)."""
    if not progress:
        return None
    if callable(progress):
        return lambda done, total, before: progress(done, total)
    try:
        from tqdm import tqdm
    except ImportError:
        return _Bar()
    return _TqdmBar(tqdm)


class _TqdmBar:
    def __init__(self, tqdm):
        self._tqdm = tqdm
        self._bar = None

    def __call__(self, done, total, before):
        if self._bar is None:
            self._bar = self._tqdm(total=total, initial=before, unit="B", unit_scale=True, file=sys.stderr)
        self._bar.update(done - self._bar.n)
        if done >= total:
            self._bar.close()


class _Bar:
    """A bar redrawn in place on a terminal (percent, GB/s, time left); a line every 10%
    otherwise, as oocrun --progress draws it."""

    def __init__(self):
        self._start = time.monotonic()
        self._next_percent = 10
        self._tty = sys.stderr.isatty()

    def __call__(self, done, total, before):
        if total <= 0:
            return
        percent = 100 * done // total
        seconds = time.monotonic() - self._start
        rate = (done - before) / seconds if seconds > 0 else 0.0
        left = f"{(total - done) / rate:.0f} s" if rate > 0 else "?"
        if self._tty:
            filled = percent * 30 // 100
            sys.stderr.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {percent:3d}%  "
                             f"{rate / 1e9:.2f} GB/s  ETA {left} ")
            if done >= total:
                sys.stderr.write("\n")
        elif percent >= self._next_percent or done >= total:
            sys.stderr.write(f"progress: {percent}% ({rate / 1e9:.2f} GB/s, ETA {left})\n")
            self._next_percent = percent // 10 * 10 + 10
        sys.stderr.flush()


# ---- reductions ---------------------------------------------------------------------

def _check_out(out, what):
    if out is not None and not isinstance(out, (str, os.PathLike)):
        raise TypeError(f"{what}: out= is a path (x.npy or file.h5:/dataset), not {type(out).__name__}")
    return None if out is None else os.fspath(out)


def _reduce(op, array, axis=None, out=None, ddof=0, overwrite=False, **options):
    source = _source(array)
    out = _check_out(out, op)
    call, progress = _common(options)
    if axis is None:
        if out is not None:
            raise ValueError(f"{op}: out= goes with axis= (a full reduction is one value)")
        if isinstance(array, _lazy.Expression) and not ddof:  # eval's outermost reduction: one fused pass
            value = _lazy.reduce_fused(array, op, call, progress)
        else:
            value = _ooc.reduce(source, op, int(ddof), call, progress)
        if op in _NAN_WHEN_EMPTY and np.isnan(value) and open(array).size == 0:
            # numpy warns here, as oocrun does on stderr
            warnings.warn(f"{op} of an empty array is nan", RuntimeWarning, stacklevel=3)
        return value
    if isinstance(axis, tuple):
        if len(axis) != 1:
            raise ValueError(f"{op}: ooc reduces along one axis at a time, not {axis}")
        axis = axis[0]
    result = _ooc.reduce_axis(source, op, int(ddof), int(_as_index(axis)), out, overwrite, call, progress)
    return Array(out) if out is not None else result


_NAN_WHEN_EMPTY = {"mean", "nanmean", "var", "std"}


def _make_reduction(op, doc, takes_ddof=False):
    # dtype= and keepdims= are numpy's (np.sum(ooc_array) calls the method with them):
    # their defaults are accepted, anything else is refused rather than ignored.
    def reduction(a, axis=None, dtype=None, out=None, keepdims=False, *, ddof=0, overwrite=False, **options):
        if dtype is not None or keepdims:
            raise ValueError(f"{op}: ooc gives numpy's result dtype and no kept dimensions "
                             "(dtype= and keepdims= are not supported)")
        if ddof and not takes_ddof:
            raise TypeError(f"{op}() got an unexpected keyword argument 'ddof'")
        return _reduce(op, a, axis, out, ddof, overwrite, **options)
    reduction.__name__ = reduction.__qualname__ = op
    reduction.__doc__ = (f"{doc}, as np.{op if op != 'norm' else 'linalg.norm'}(a, axis=axis"
                         f"{', ddof=ddof' if takes_ddof else ''}): a numpy scalar of numpy's dtype, or with "
                         f"axis= an np.ndarray (with out=PATH written to that file and returned as an ooc.Array).")
    return reduction


_REDUCTIONS = {
    "sum": "Sum", "prod": "Product", "mean": "Mean", "min": "Minimum", "max": "Maximum",
    "argmin": "C-order index of the minimum", "argmax": "C-order index of the maximum",
    "var": "Variance", "std": "Standard deviation", "count_nonzero": "Count of nonzero elements",
    "any": "Whether any element is true", "all": "Whether every element is true",
    "nansum": "Sum ignoring NaN", "nanmean": "Mean ignoring NaN", "nanmin": "Minimum ignoring NaN",
    "nanmax": "Maximum ignoring NaN", "norm": "Euclidean norm of the flattened array",
}
for _op, _doc in _REDUCTIONS.items():
    _function = _make_reduction(_op, _doc, takes_ddof=_op in ("var", "std"))
    globals()[_op] = _function
    setattr(Array, _op, _function)
    setattr(_lazy.Expression, _op, _function)
del _op, _doc, _function


def histogram(a, bins=10, range=None, **options):
    """np.histogram(a, bins, range) with equal bins: (counts, edges), numpy's arrays."""
    call, progress = _common(options)
    if not isinstance(bins, (int, np.integer)):
        raise ValueError("histogram: bins is a number of equal bins (edges given as an array are not supported)")
    if range is not None:
        range = tuple(_python_number(v) for v in range)
    return _ooc.histogram(_source(a), int(bins), range, call, progress)


def _linalg(op, a, rowvar=True, bias=False, ddof=None, options=None):
    call, progress = _common(options)
    value, raised = _ooc.linalg(_source(a), op, bool(rowvar), bool(bias), ddof, call, progress)
    for warning in raised:  # numpy's RuntimeWarnings, in numpy's words
        warnings.warn(warning, RuntimeWarning, stacklevel=3)
    return value


def gram(a, **options):
    """X.T @ X of a tall 2-d array (x @ x of a 1-d one), in one streamed pass: an
    np.ndarray (M, M) of numpy's dtype for it (float32 stays float32, integers wrap)."""
    value = _linalg("gram", a, options=options)
    return value[()] if value.ndim == 0 else value


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *, dtype=None, **options):
    """np.cov(m, rowvar=, bias=, ddof=) in one streamed pass, stable for large means:
    float64, (M, M), or 0-d for one variable. Tall data (observations in rows) take
    rowvar=False."""
    if y is not None or fweights is not None or aweights is not None or dtype is not None:
        raise ValueError("cov: ooc takes one array (y=, fweights=, aweights= and dtype= are not supported)")
    if ddof is not None:
        if ddof != int(ddof):
            raise ValueError("ddof must be integer")
        ddof = int(ddof)
    return _linalg("cov", m, rowvar, bias, ddof, options)


def corrcoef(x, y=None, rowvar=True, *, dtype=None, **options):
    """np.corrcoef(x, rowvar=) in one streamed pass: float64 (M, M), clipped to [-1, 1]
    (a single variable gives a float64 scalar, as numpy's)."""
    if y is not None or dtype is not None:
        raise ValueError("corrcoef: ooc takes one array (y= and dtype= are not supported)")
    value = _linalg("corrcoef", x, rowvar, options=options)
    return value[()] if value.ndim == 0 else value


def matmul(x, w, out=None, *, overwrite=False, **options):
    """x @ w for a tall (N, M) x streamed by rows and a small w, (M, K) or (M,): an
    array in memory or a small file (a path, ooc.Array, np.memmap). numpy's dtype and
    shape; an np.ndarray, or with out=PATH that file, returned as an ooc.Array."""
    out = _check_out(out, "matmul")
    if isinstance(w, (str, bytes, os.PathLike, Array)):
        w = open(w).read()
    w = np.asarray(w)
    if w.dtype.kind not in "biuf":
        raise TypeError(f"matmul: ooc takes bool, integer and float arrays, not {w.dtype}")
    w = np.ascontiguousarray(w, dtype=w.dtype.newbyteorder("="))
    call, progress = _common(options)
    result = _ooc.matmul(_source(x), w, out, bool(overwrite), call, progress)
    if out is not None:
        return Array(out)
    return result[()] if result.ndim == 0 else result


def _numpy_linalg_error(call):
    """call(), with ooc's "SVD did not converge" ValueError raised as numpy's LinAlgError."""
    try:
        return call()
    except ValueError as e:
        if "SVD did not converge" in str(e):
            raise np.linalg.LinAlgError(str(e)) from None
        raise


def qr(a, mode="r", out=None, *, overwrite=False, **options):
    """np.linalg.qr of a tall 2-d array by TSQR. mode='r' (ooc's default: one streamed
    pass) returns R, min(N, M) x M, with a non-negative diagonal (numpy's R up to the sign
    of each row). mode='reduced' returns (Q, R), Q (N, min(N, M)) from a second pass with
    the matching signs (Q R = a): an np.ndarray (MemoryError when it cannot fit), or with
    out=PATH written to that file and returned as an ooc.Array."""
    if mode not in ("r", "reduced", "complete", "raw"):
        raise ValueError(f"Unrecognized mode '{mode}'")
    if mode in ("complete", "raw"):
        raise ValueError(f"ooc.qr: mode='{mode}' is not supported; 'reduced' gives Q (N, min(N, M)), 'r' R alone")
    out = _check_out(out, "qr")
    if mode == "r":
        if out is not None:
            raise ValueError("qr: out= is where Q goes, with mode='reduced'")
        return _linalg("qr", a, options=options)
    call, progress = _common(options)
    q, r = _ooc.factor(_source(a), "qr", out, bool(overwrite), call, progress)
    return (Array(out) if out is not None else q), r


def svd(a, full_matrices=False, compute_uv=True, hermitian=False, out=None, *, overwrite=False, **options):
    """np.linalg.svd(a, full_matrices=False) of a tall 2-d array by TSQR: (U, s, Vt), s
    descending, U (N, min(N, M)) from a second pass (U s Vt = a; each pair's sign as
    arbitrary as numpy's): an np.ndarray (MemoryError when it cannot fit), or with
    out=PATH written to that file and returned as an ooc.Array. compute_uv=False returns
    s alone, in one pass. full_matrices=True (an N x N U) is refused, hence ooc's default."""
    if hermitian:
        raise ValueError("ooc.svd: hermitian=True is not supported")
    out = _check_out(out, "svd")
    if not compute_uv:
        if out is not None:
            raise ValueError("svd: out= is where U goes, with compute_uv=True")
        return _numpy_linalg_error(lambda: _linalg("svd", a, options=options))
    if full_matrices:
        raise ValueError("ooc.svd: full_matrices=True would make U N x N; ooc gives the reduced U (full_matrices=False)")
    call, progress = _common(options)
    u, s, vt = _numpy_linalg_error(lambda: _ooc.factor(_source(a), "svd", out, bool(overwrite), call, progress))
    return (Array(out) if out is not None else u), s, vt


def lstsq(a, b, rcond=None, **options):
    """np.linalg.lstsq(a, b, rcond) of a tall (N, M) a and a (N,) or (N, K) b, both
    files, streamed side by side (TSQR of [a b], then the SVD of R): (x, residuals, rank, s)."""
    x, y = open(a), open(b)
    if len(x.shape) == 2 and len(y.shape) in (1, 2) and x.shape[0] != y.shape[0]:
        raise np.linalg.LinAlgError("Incompatible dimensions")  # numpy's, before any reading
    call, progress = _common(options)
    return _numpy_linalg_error(
        lambda: _ooc.lstsq(x._source, y._source, None if rcond is None else float(rcond), call, progress))


def _python_number(value):
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    return float(value)


Array.histogram = _lazy.Expression.histogram = histogram


def reduce(a, ops, axis=None, ddof=0, *, bins=10, range=None, **options):
    """Several reductions of `a` over one read of it: {name: value} for the names in `ops`
    (a list, or one string "mean,std"), each value what its own call gives, bit for bit:
    ooc.reduce(a, ["mean", "std", "min", "max"]) equals {"mean": ooc.mean(a), "std":
    ooc.std(a), ...}; with axis= numpy arrays, as ooc.mean(a, axis=axis) gives them;
    "histogram" gives ooc.histogram(a, bins, range)'s (counts, edges). ddof= is var's and
    std's. The file is read once; twice where numpy's var or std along an axis takes two
    passes, or a histogram without range= first needs the data's min and max."""
    names = ops.split(",") if isinstance(ops, str) else [str(op) for op in ops]
    seen = set()
    for name in names:
        if name in seen:
            raise ValueError(f"reduce: {name!r} is named twice")
        seen.add(name)
    if not isinstance(bins, (int, np.integer)):
        raise ValueError("histogram: bins is a number of equal bins (edges given as an array are not supported)")
    if isinstance(axis, tuple):
        if len(axis) != 1:
            raise ValueError(f"reduce: ooc reduces along one axis at a time, not {axis}")
        axis = axis[0]
    call, progress = _common(options)
    bounds = None if range is None else tuple(_python_number(v) for v in range)
    values = _ooc.reduce_together(_source(a), names, int(ddof), int(bins), bounds,
                                  None if axis is None else int(_as_index(axis)), call, progress)
    result = dict(zip(names, values))
    if axis is None and open(a).size == 0:
        for name in names:
            if name in _NAN_WHEN_EMPTY:  # numpy warns here, as ooc.mean(a) does
                warnings.warn(f"{name} of an empty array is nan", RuntimeWarning, stacklevel=2)
    return result


# ---- elementwise, expressions, blocks -----------------------------------------------

def apply(op, a, out=None, *, inplace=False, journal=True, overwrite=False, **options):
    """oocrun apply's operation `op` ("add:1", "log1p", "clip:0:1", "cast:int16", ...) on
    `a`: into the new file `out` (returns an ooc.Array over it once committed), or with
    inplace=True into `a` itself, crash-journalled unless journal=False (returns `a`
    reopened). A stopped in-place run is finished by the same call again."""
    call, progress = _common(options)
    out = _check_out(out, "apply")
    written = _ooc.apply(str(op), _source(a), out, bool(inplace), bool(journal), bool(overwrite), call, progress)
    return Array(written)


def copy(a, out, *, overwrite=False, chunks=None, compression=None, shuffle=False, **options):
    """oocrun copy: `a` (an array, a selection, a lazy expression) written to the new file
    `out` (x.npy, file.h5:/dataset or out.zarr) as np.save(out, np.asarray(a)) writes it: its
    dtype, byte order included, shape and memory order; returns an ooc.Array over it once
    committed. chunks= (rows of the first axis, or "auto"), compression= ("gzip[:LEVEL]",
    "zlib[:LEVEL]", "zstd[:LEVEL]" (Zarr), "lz4", "blosc[:CODEC[:LEVEL]]", "none") and
    shuffle=True make a chunked HDF5 dataset, or set a Zarr array's chunks and compressor.
    overwrite=True replaces an existing HDF5 dataset. Writing onto `a`'s own file (or its
    own dataset) is refused before anything is written."""
    call, progress = _common(options)
    out = _check_out(out, "copy")
    if out is None:
        raise TypeError("copy: out= is needed (x.npy or file.h5:/dataset)")
    _ooc.copy(_source(a), out, bool(overwrite), None if chunks is None else str(chunks),
              None if compression is None else str(compression), bool(shuffle), call, progress)
    return Array(out)


def import_text(text, out, *, dtype="f8", delimiter=",", comments="#", skiprows=0, header=False, usecols=None,
                missing=None, ndmin=0, overwrite=False, **options):
    """oocrun import: the text file `text` (a CSV; delimiter=None for runs of whitespace, as
    np.loadtxt's default) into the new array `out` (x.npy or file.h5:/dataset), with
    np.loadtxt's values, dtype and shape; returns an ooc.Array over it once committed.
    skiprows, usecols, ndmin and comments (one character or several, "//"; None or ""
    for none) are np.loadtxt's; header=True skips one more line (column
    names); missing= is what an empty field stands for ("nan", "0"). Bad text (a field
    that does not parse, a row of another width) is an ooc.Error naming FILE:LINE:COLUMN,
    as oocrun's exit 1, and nothing is left behind; bad arguments are ValueErrors."""
    call, progress = _common(options)
    out = _check_out(out, "import_text")
    if out is None:
        raise TypeError("import_text: out= is needed (x.npy or file.h5:/dataset)")
    columns = [] if usecols is None else [int(c) for c in ([usecols] if isinstance(usecols, int) else usecols)]
    _ooc.import_text(os.fspath(text), out, np.dtype(dtype).str, delimiter, comments, int(skiprows), bool(header),
                     columns, None if missing is None else str(missing), int(ndmin), bool(overwrite), call, progress)
    return Array(out)


def export_text(a, text, *, delimiter=",", fmt="shortest", header="", **options):
    """oocrun export: the 0-, 1- or 2-d array `a` as text, one row a line, as np.savetxt
    writes it; fmt="shortest" (default) writes the shortest text that reads back to the same
    value, so np.loadtxt gives back the bits, or one %-format as Python formats it ("%.6g")."""
    call, progress = _common(options)
    _ooc.export_text(_source(a), os.fspath(text), delimiter, str(fmt), str(header), call, progress)


def eval(expr, out=None, *, overwrite=False, threads=None, tile_bytes=None, io=None, prefetch=2, progress=None,
         **arrays):
    """oocrun eval's expression over the keyword arrays (ooc.Arrays, paths, memmaps,
    h5py.Datasets): "a * b + 1", "where(a > 0, a, 0)", "sum(a * b)". A reduction gives a
    numpy scalar; otherwise the result goes to `out` (returned as an ooc.Array) or, without
    out, into a numpy array."""
    call, reporter = _common(dict(threads=threads, tile_bytes=tile_bytes, io=io, prefetch=prefetch,
                                  progress=progress))
    out = _check_out(out, "eval")
    names = list(arrays)
    sources = [_source(arrays[name]) for name in names]
    result = _ooc.eval(str(expr), names, sources, out, bool(overwrite), call, reporter)
    return Array(out) if out is not None else result


def map_blocks(f, *arrays, out=None, dtype=None, shape=None, overwrite=False, **options):
    """f(block_a, block_b, ...) for each tile of whole rows of the arrays (of one shape and
    memory order), on several threads at once. A block is a read-only numpy view of the
    rows along the slowest axis: shape (k, *shape[1:]) in C order, (*shape[:-1], k) in
    Fortran order; the tile's bytes where they are mapped, no copy.

    Without out: the results, in block order, in a list. With out=PATH: each result (of
    the block's shape, with out's other axes) is written to its rows of a new file of
    `dtype` (default: the first array's) and `shape` (default: the arrays'), returned as
    an ooc.Array once complete."""
    if not arrays:
        raise ValueError("map_blocks needs at least one array")
    call, progress = _common(options)
    out = _check_out(out, "map_blocks")
    sources = [_source(a) for a in arrays]
    dtype_text = None if dtype is None else np.dtype(dtype).str
    shape = None if shape is None else [int(n) for n in shape]
    result = _ooc.map_blocks(f, sources, out, dtype_text, shape, bool(overwrite), call, progress)
    return Array(out) if out is not None else list(result)


# numpy's operators, ufuncs, np.where and np.clip on ooc.Arrays give lazy expressions.
Expression = _lazy.Expression
Expression.__module__ = "ooc"
_lazy.install(Array, _common, open)
Array.__matmul__ = matmul  # after install: X @ W streams through ooc.matmul, not a lazy expression

# Order statistics (python/ooc/_order.py): quantile, percentile, median and their nan forms; unique;
# sort and argsort.
from ._order import quantile, percentile, median, nanquantile, nanpercentile, nanmedian, unique, sort, argsort  # noqa: E402,E501

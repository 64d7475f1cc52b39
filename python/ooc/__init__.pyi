# Type stubs for ooc (python/ooc/__init__.py, python/ooc_module.cpp).
import os
from typing import Any, Callable, Literal, Sequence, TypeAlias, overload

import numpy as np
import numpy.typing as npt

ArrayLike: TypeAlias = "Array | Expression | str | os.PathLike[str] | np.memmap[Any, Any] | Any"  # Any: an h5py.Dataset
Progress: TypeAlias = bool | Callable[[int, int], object] | None
Io: TypeAlias = Literal["auto", "mmap", "direct"]

class Error(OSError): ...

class Array:
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    order: Literal["C", "F"]
    format: Literal["npy", "hdf5"]
    @property
    def path(self) -> str: ...
    @property
    def selections(self) -> tuple[str, ...]: ...
    @property
    def ndim(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def itemsize(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    def __init__(self, path: str | os.PathLike[str], selections: Sequence[str] = ...) -> None: ...
    def __len__(self) -> int: ...
    def __getitem__(self, key: Any) -> Array: ...
    def __array__(self, dtype: npt.DTypeLike = ..., copy: bool | None = ...) -> np.ndarray[Any, Any]: ...
    def read(self, *, threads: int | None = ..., tile_bytes: int | str | None = ..., io: Io | None = ...,
             prefetch: int = ..., progress: Progress = ...) -> np.ndarray[Any, Any]: ...
    def sum(self, axis: int | None = ..., *, out: str | os.PathLike[str] | None = ..., overwrite: bool = ...,
            threads: int | None = ..., tile_bytes: int | str | None = ..., io: Io | None = ...,
            prefetch: int = ..., progress: Progress = ...) -> Any: ...
    prod = sum
    mean = sum
    min = sum
    max = sum
    argmin = sum
    argmax = sum
    count_nonzero = sum
    any = sum
    all = sum
    nansum = sum
    nanmean = sum
    nanmin = sum
    nanmax = sum
    norm = sum
    def var(self, axis: int | None = ..., *, out: str | os.PathLike[str] | None = ..., ddof: int = ...,
            overwrite: bool = ..., threads: int | None = ..., tile_bytes: int | str | None = ...,
            io: Io | None = ..., prefetch: int = ..., progress: Progress = ...) -> Any: ...
    std = var
    def histogram(self, bins: int = ..., range: tuple[float, float] | None = ..., *, threads: int | None = ...,
                  tile_bytes: int | str | None = ..., io: Io | None = ..., prefetch: int = ...,
                  progress: Progress = ...) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]: ...
    # numpy's operators, ufuncs (np.sin(a)), np.where and np.clip give a lazy Expression.
    def clip(self, min: Any = ..., max: Any = ...) -> Expression: ...
    def __add__(self, other: Any) -> Expression: ...
    __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = __add__
    __pow__ = __rpow__ = __and__ = __or__ = __xor__ = __lt__ = __le__ = __gt__ = __ge__ = __add__
    def __eq__(self, other: Any) -> Expression: ...  # type: ignore[override]
    __ne__ = __eq__  # type: ignore[assignment]
    def __neg__(self) -> Expression: ...
    __pos__ = __abs__ = __invert__ = __neg__

# A lazy expression over ooc.Arrays (np.sin(a) * 2): numpy's shape and dtype, computed by
# ooc's eval engine, one fused pass, when reduced, read, copied or used as a mask.
class Expression:
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    @property
    def ndim(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def itemsize(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def text(self) -> str: ...
    def __len__(self) -> int: ...
    def __array__(self, dtype: npt.DTypeLike = ..., copy: bool | None = ...) -> np.ndarray[Any, Any]: ...
    def read(self, *, threads: int | None = ..., tile_bytes: int | str | None = ..., io: Io | None = ...,
             prefetch: int = ..., progress: Progress = ...) -> np.ndarray[Any, Any]: ...
    sum = Array.sum
    prod = mean = min = max = argmin = argmax = count_nonzero = any = all = Array.sum
    nansum = nanmean = nanmin = nanmax = norm = Array.sum
    var = std = Array.var
    histogram = Array.histogram
    clip = Array.clip
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = Array.__add__
    __pow__ = __rpow__ = __and__ = __or__ = __xor__ = __lt__ = __le__ = __gt__ = __ge__ = Array.__add__
    __eq__ = __ne__ = Array.__eq__  # type: ignore[assignment]
    __neg__ = __pos__ = __abs__ = __invert__ = Array.__neg__

def open(array: ArrayLike) -> Array: ...

# A reduction: a numpy scalar (np.generic) without axis, an np.ndarray with axis, an
# Array with axis and out.
@overload
def sum(a: ArrayLike, axis: None = ..., *, out: None = ..., overwrite: bool = ..., threads: int | None = ...,
        tile_bytes: int | str | None = ..., io: Io | None = ..., prefetch: int = ...,
        progress: Progress = ...) -> np.generic: ...
@overload
def sum(a: ArrayLike, axis: int, *, out: None = ..., overwrite: bool = ..., threads: int | None = ...,
        tile_bytes: int | str | None = ..., io: Io | None = ..., prefetch: int = ...,
        progress: Progress = ...) -> np.ndarray[Any, Any]: ...
@overload
def sum(a: ArrayLike, axis: int, *, out: str | os.PathLike[str], overwrite: bool = ..., threads: int | None = ...,
        tile_bytes: int | str | None = ..., io: Io | None = ..., prefetch: int = ...,
        progress: Progress = ...) -> Array: ...
prod = sum
mean = sum
min = sum
max = sum
argmin = sum
argmax = sum
count_nonzero = sum
any = sum
all = sum
nansum = sum
nanmean = sum
nanmin = sum
nanmax = sum
norm = sum
@overload
def var(a: ArrayLike, axis: None = ..., *, out: None = ..., ddof: int = ..., overwrite: bool = ...,
        threads: int | None = ..., tile_bytes: int | str | None = ..., io: Io | None = ..., prefetch: int = ...,
        progress: Progress = ...) -> np.generic: ...
@overload
def var(a: ArrayLike, axis: int, *, out: None = ..., ddof: int = ..., overwrite: bool = ...,
        threads: int | None = ..., tile_bytes: int | str | None = ..., io: Io | None = ..., prefetch: int = ...,
        progress: Progress = ...) -> np.ndarray[Any, Any]: ...
@overload
def var(a: ArrayLike, axis: int, *, out: str | os.PathLike[str], ddof: int = ..., overwrite: bool = ...,
        threads: int | None = ..., tile_bytes: int | str | None = ..., io: Io | None = ..., prefetch: int = ...,
        progress: Progress = ...) -> Array: ...
std = var

def histogram(a: ArrayLike, bins: int = ..., range: tuple[float, float] | None = ..., *,
              threads: int | None = ..., tile_bytes: int | str | None = ..., io: Io | None = ...,
              prefetch: int = ..., progress: Progress = ...) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]: ...

# Linear algebra of a tall array, one streamed pass each.
def gram(a: ArrayLike, *, threads: int | None = ..., tile_bytes: int | str | None = ..., io: Io | None = ...,
         prefetch: int = ..., progress: Progress = ...) -> Any: ...
def cov(m: ArrayLike, y: None = ..., rowvar: bool = ..., bias: bool = ..., ddof: int | None = ...,
        fweights: None = ..., aweights: None = ..., *, dtype: None = ..., threads: int | None = ...,
        tile_bytes: int | str | None = ..., io: Io | None = ..., prefetch: int = ...,
        progress: Progress = ...) -> np.ndarray[Any, Any]: ...
def corrcoef(x: ArrayLike, y: None = ..., rowvar: bool = ..., *, dtype: None = ..., threads: int | None = ...,
             tile_bytes: int | str | None = ..., io: Io | None = ..., prefetch: int = ...,
             progress: Progress = ...) -> Any: ...

def matmul(x: ArrayLike, w: Any, out: str | os.PathLike[str] | None = ..., *, overwrite: bool = ...,
           threads: int | None = ..., tile_bytes: int | str | None = ..., io: Io | None = ..., prefetch: int = ...,
           progress: Progress = ...) -> Any: ...

def qr(a: ArrayLike, mode: str = ..., out: str | os.PathLike[str] | None = ..., *, overwrite: bool = ...,
       threads: int | None = ..., tile_bytes: int | str | None = ..., io: Io | None = ..., prefetch: int = ...,
       progress: Progress = ...) -> Any: ...  # R, or (Q, R) with mode='reduced'
def svd(a: ArrayLike, full_matrices: bool = ..., compute_uv: bool = ..., hermitian: bool = ...,
        out: str | os.PathLike[str] | None = ..., *, overwrite: bool = ..., threads: int | None = ...,
        tile_bytes: int | str | None = ..., io: Io | None = ..., prefetch: int = ...,
        progress: Progress = ...) -> Any: ...  # s, or (U, s, Vt) with compute_uv=True

def lstsq(a: ArrayLike, b: ArrayLike, rcond: float | None = ..., *, threads: int | None = ...,
          tile_bytes: int | str | None = ..., io: Io | None = ..., prefetch: int = ...,
          progress: Progress = ...) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], int, np.ndarray[Any, Any]]: ...

# Order statistics (numpy's signatures; a radix select, a few reads): a numpy scalar or array.
def quantile(a: ArrayLike, q: Any, axis: int | None = ..., out: np.ndarray[Any, Any] | None = ...,
             overwrite_input: bool = ..., method: str = ..., keepdims: bool = ..., *, memory_budget: int | None = ...,
             threads: int | None = ..., tile_bytes: int | str | None = ..., io: Io | None = ..., prefetch: int = ...,
             progress: Progress = ...) -> Any: ...
percentile = quantile
nanquantile = quantile
nanpercentile = quantile
def median(a: ArrayLike, axis: int | None = ..., out: np.ndarray[Any, Any] | None = ..., overwrite_input: bool = ...,
           keepdims: bool = ..., *, memory_budget: int | None = ..., threads: int | None = ...,
           tile_bytes: int | str | None = ..., io: Io | None = ..., prefetch: int = ...,
           progress: Progress = ...) -> Any: ...
nanmedian = median
def unique(ar: ArrayLike, return_index: bool = ..., return_inverse: bool = ..., return_counts: bool = ...,
           axis: None = ..., *, equal_nan: bool = ..., out: str | os.PathLike[str] | None = ...,
           temp_dir: str | os.PathLike[str] | None = ..., memory_budget: int | None = ..., overwrite: bool = ...,
           threads: int | None = ..., tile_bytes: int | str | None = ..., io: Io | None = ..., prefetch: int = ...,
           progress: Progress = ...) -> Any: ...

def sort(a: ArrayLike, axis: int | None = ..., kind: str | None = ..., order: None = ..., *,
         out: str | os.PathLike[str] | None = ..., temp_dir: str | os.PathLike[str] | None = ...,
         memory_budget: int | None = ..., overwrite: bool = ..., threads: int | None = ...,
         tile_bytes: int | str | None = ..., io: Io | None = ..., prefetch: int = ...,
         progress: Progress = ...) -> Any: ...  # np.ndarray, or an Array over out
argsort = sort

# Several reductions over one read: {name: what its own call returns}.
def reduce(a: ArrayLike, ops: str | Sequence[str], axis: int | None = ...,
           ddof: int = ..., *, bins: int = ..., range: tuple[float, float] | None = ...,
           threads: int | None = ..., tile_bytes: int | str | None = ..., io: Io | None = ...,
           prefetch: int = ..., progress: Progress = ...) -> dict[str, Any]: ...

def apply(op: str, a: ArrayLike, out: str | os.PathLike[str] | None = ..., *, inplace: bool = ...,
          journal: bool = ..., overwrite: bool = ..., threads: int | None = ...,
          tile_bytes: int | str | None = ..., io: Io | None = ..., prefetch: int = ...,
          progress: Progress = ...) -> Array: ...

def copy(a: ArrayLike | Expression, out: str | os.PathLike[str], *, overwrite: bool = ...,
         chunks: int | Literal["auto"] | None = ..., compression: str | None = ..., shuffle: bool = ...,
         threads: int | None = ..., tile_bytes: int | str | None = ..., io: Io | None = ..., prefetch: int = ...,
         progress: Progress = ...) -> Array: ...

def import_text(text: str | os.PathLike[str], out: str | os.PathLike[str], *, dtype: npt.DTypeLike = ...,
                delimiter: str | None = ..., comments: str | None = ..., skiprows: int = ..., header: bool = ...,
                usecols: int | Sequence[int] | None = ..., missing: str | float | None = ..., ndmin: int = ...,
                overwrite: bool = ..., threads: int | None = ..., tile_bytes: int | str | None = ...,
                io: Io | None = ..., prefetch: int = ..., progress: Progress = ...) -> Array: ...
def export_text(a: ArrayLike, text: str | os.PathLike[str], *, delimiter: str = ..., fmt: str = ...,
                header: str = ..., threads: int | None = ..., tile_bytes: int | str | None = ...,
                io: Io | None = ..., prefetch: int = ..., progress: Progress = ...) -> None: ...
def eval(expr: str, out: str | os.PathLike[str] | None = ..., *, overwrite: bool = ..., threads: int | None = ...,
         tile_bytes: int | str | None = ..., io: Io | None = ..., prefetch: int = ..., progress: Progress = ...,
         **arrays: ArrayLike) -> Any: ...

@overload
def map_blocks(f: Callable[..., Any], *arrays: ArrayLike, out: None = ..., dtype: npt.DTypeLike = ...,
               shape: Sequence[int] | None = ..., overwrite: bool = ..., threads: int | None = ...,
               tile_bytes: int | str | None = ..., io: Io | None = ..., prefetch: int = ...,
               progress: Progress = ...) -> list[Any]: ...
@overload
def map_blocks(f: Callable[..., Any], *arrays: ArrayLike, out: str | os.PathLike[str], dtype: npt.DTypeLike = ...,
               shape: Sequence[int] | None = ..., overwrite: bool = ..., threads: int | None = ...,
               tile_bytes: int | str | None = ..., io: Io | None = ..., prefetch: int = ...,
               progress: Progress = ...) -> Array: ...

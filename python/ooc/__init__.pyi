# Type stubs for ooc (python/ooc/__init__.py, python/ooc_module.cpp).
import os
from typing import Any, Callable, Literal, Sequence, TypeAlias, overload

import numpy as np
import numpy.typing as npt

ArrayLike: TypeAlias = "Array | str | os.PathLike[str] | np.memmap[Any, Any] | Any"  # Any: an h5py.Dataset
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

def apply(op: str, a: ArrayLike, out: str | os.PathLike[str] | None = ..., *, inplace: bool = ...,
          journal: bool = ..., overwrite: bool = ..., threads: int | None = ...,
          tile_bytes: int | str | None = ..., io: Io | None = ..., prefetch: int = ...,
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

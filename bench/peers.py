"""The peers' side of the bench: one operation, one library, one fresh process.

    /usr/bin/python3 bench/peers.py LIBRARY OPERATION INPUT [OUTPUT]

prints {"seconds": ..., "value": ...} for the operation alone (imports and process start
are not timed, as oocrun's own "seconds" leaves out its start-up). LIBRARY is numpy (a
memmap, as numpy users stream big files), dask (from_array over a memmap, 2 threads),
h5py, or python (ooc's own Python module, `import ooc`; PYTHONPATH names it). Every run
maps the file afresh, as a new oocrun process does.
"""
import json
import os
import sys
import time

import numpy as np

CHUNK_BYTES = 64 << 20  # dask chunks and h5py slabs: the size those libraries' docs suggest
SUBSET_COLUMNS = [0, 9, 18, 27, 36]  # the bench's sparse subset: every 5th row, these columns
SUBSET_STEP = 5
# Five statistics of the whole array, or of its columns (axis 0).
STATISTICS_AXES = {"statistics": None, "statistics_axis0": 0}
STATISTICS = ["sum", "mean", "std", "min", "max"]


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def durable(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def numpy_op(op, src, dst):
    if op == "sum":
        a = np.load(src, mmap_mode="r")
        return timed(lambda: float(a.sum()))
    if op == "column_sum":
        a = np.load(src, mmap_mode="r")
        return timed(lambda: float(a[:, 2].sum()))
    if op == "mean_axis0":
        a = np.load(src, mmap_mode="r")
        return timed(lambda: a.mean(axis=0).tolist())
    if op in STATISTICS_AXES:  # what `oocrun reduce sum,mean,std,min,max` is measured against: five calls
        a = np.load(src, mmap_mode="r")
        axis = STATISTICS_AXES[op]
        return timed(lambda: [np.asarray(f(a, axis=axis)).tolist() for f in (np.sum, np.mean, np.std, np.min, np.max)])
    if op == "add_one":
        def run():
            a = np.load(src, mmap_mode="r")
            out = np.lib.format.open_memmap(dst, mode="w+", dtype=np.result_type(a, 1), shape=a.shape)
            np.add(a, 1, out=out)
            out.flush()
            durable(dst)
        return timed(run)
    if op == "subset_sum":
        a = np.load(src, mmap_mode="r")
        return timed(lambda: float(a[::SUBSET_STEP, SUBSET_COLUMNS].sum()))
    if op == "log1p":  # what map_blocks(np.log1p, a, out=...) is measured against
        def run():
            a = np.load(src, mmap_mode="r")
            out = np.lib.format.open_memmap(dst, mode="w+", dtype=a.dtype, shape=a.shape)
            np.log1p(a, out=out)
            out.flush()
            durable(dst)
        return timed(run)
    if op == "sin_cos_sum":  # what `oocrun eval "sum(sin(a)*cos(a))"` is measured against
        a = np.load(src, mmap_mode="r")
        return timed(lambda: float(np.sum(np.sin(a) * np.cos(a))))
    if op == "call_overhead":  # np.load + sum of a small file, per call
        def run():
            for _ in range(CALLS):
                np.load(src, mmap_mode="r").sum()
        seconds, _ = timed(run)
        return seconds / CALLS, None
    if op == "loadtxt":  # text import: np.loadtxt, then np.save (made durable)
        def run():
            a = np.loadtxt(src, delimiter=",")
            np.save(dst, a)
            durable(dst)
            return list(a.shape)
        return timed(run)
    if op == "savetxt":  # text export: np.savetxt of a memmap, shortest round trip
        def run():
            a = np.load(src, mmap_mode="r")
            np.savetxt(dst, a, fmt="%r", delimiter=",")
            durable(dst)
        return timed(run)
    if op == "add_one_in_place":
        def run():
            a = np.load(src, mmap_mode="r+")
            a += 1
            a.flush()
            durable(src)
        return timed(run)
    raise SystemExit(f"numpy: no {op}")


def dask_op(op, src, dst):
    import dask
    import dask.array as da
    dask.config.set(scheduler="threads", num_workers=2)
    if ":/" in src:  # an HDF5 dataset, as dask's docs show: from_array over h5py
        import h5py
        path, _, name = src.partition(":")
        d = h5py.File(path, "r")[name]
        rows = max(1, CHUNK_BYTES // max(1, d.dtype.itemsize * int(np.prod(d.shape[1:]))))
        x = da.from_array(d, chunks=(rows,) + d.shape[1:], lock=True)
        if op == "sum":
            return timed(lambda: float(x.sum().compute()))
        raise SystemExit(f"dask: no {op} for HDF5")
    a = np.load(src, mmap_mode="r")
    rows = max(1, CHUNK_BYTES // max(1, a.nbytes // max(1, a.shape[0])))
    x = da.from_array(a, chunks=(rows,) + a.shape[1:])
    if op == "sum":
        return timed(lambda: float(x.sum().compute()))
    if op == "mean_axis0":
        return timed(lambda: x.mean(axis=0).compute().tolist())
    if op == "add_one":
        def run():
            out = np.lib.format.open_memmap(dst, mode="w+", dtype=a.dtype, shape=a.shape)
            da.store(x + 1, out, lock=False)
            out.flush()
            durable(dst)
        return timed(run)
    raise SystemExit(f"dask: no {op}")


def h5py_op(op, src, dst):
    import h5py
    path, _, name = src.partition(":")
    if op == "sum":
        def run():
            with h5py.File(path, "r") as f:
                d = f[name]
                rows = max(1, CHUNK_BYTES // max(1, d.dtype.itemsize * int(np.prod(d.shape[1:]))))
                buf = np.empty((rows,) + d.shape[1:], d.dtype)
                total = 0.0
                for i in range(0, d.shape[0], rows):
                    n = min(rows, d.shape[0] - i)
                    d.read_direct(buf, np.s_[i:i + n], np.s_[0:n])
                    total += float(buf[:n].sum())
                return total
        return timed(run)
    if op == "subset_sum":
        def run():
            with h5py.File(path, "r") as f:
                d = f[name]
                rows = max(SUBSET_STEP, CHUNK_BYTES // (d.dtype.itemsize * d.shape[1]) // SUBSET_STEP * SUBSET_STEP)
                total = 0.0
                for i in range(0, d.shape[0], rows):
                    total += float(d[i:i + rows:SUBSET_STEP, SUBSET_COLUMNS].sum())
                return total
        return timed(run)
    if op == "write_blosc":  # h5py writing an in-memory float32 array, blosc zstd:1 + shuffle
        out_path, _, out_name = dst.partition(":")
        data = np.load(src).astype("<f4")  # in memory before the clock starts, as the issue asks
        rows = max(1, (1 << 20) // (4 * int(np.prod(data.shape[1:]))))  # ~1 MiB chunks of whole rows, as --chunks auto

        def run():
            if os.path.exists(out_path):
                os.unlink(out_path)
            with h5py.File(out_path, "w") as f:
                f.create_dataset(out_name.lstrip("/"), data=data, chunks=(min(rows, data.shape[0]),) + data.shape[1:],
                                 compression=32001, compression_opts=(0, 0, 0, 0, 1, 1, 5))
            durable(out_path)
        return timed(run)
    raise SystemExit(f"h5py: no {op}")


CALLS = 200  # calls per measurement of one call's overhead


def python_op(op, src, dst):
    import ooc
    if op == "sum":  # src may carry a selection: "X.npy[:, 2]", "X.npy[@m.npy]"
        return timed(lambda: float(ooc.sum(src)))
    if op == "copy":
        return timed(lambda: ooc.copy(src, out=dst) and None)
    if op in STATISTICS_AXES:  # ooc.reduce: the five statistics over one read
        return timed(lambda: [np.asarray(v).tolist() for v in ooc.reduce(src, STATISTICS,
                                                                        axis=STATISTICS_AXES[op]).values()])
    if op == "log1p":
        def run():
            ooc.map_blocks(np.log1p, src, out=dst)
            durable(dst)  # committed outputs are fsynced already; the same step as numpy's
        return timed(run)
    if op == "call_overhead":
        def run():
            for _ in range(CALLS):
                ooc.sum(src)
        seconds, _ = timed(run)
        return seconds / CALLS, None
    raise SystemExit(f"python: no {op}")


def pandas_op(op, src, dst):
    import pandas as pd
    if op == "read_csv":  # pandas.read_csv with numpy's bits (round_trip), then np.save
        def run():
            a = pd.read_csv(src, header=None, float_precision="round_trip").to_numpy()
            np.save(dst, a)
            durable(dst)
            return list(a.shape)
        return timed(run)
    raise SystemExit(f"pandas: no {op}")


def main():
    library, op, src = sys.argv[1:4]
    dst = sys.argv[4] if len(sys.argv) > 4 else None
    seconds, value = {"numpy": numpy_op, "dask": dask_op, "h5py": h5py_op, "python": python_op,
                      "pandas": pandas_op}[library](op, src, dst)
    print(json.dumps({"seconds": seconds, "value": value}))


if __name__ == "__main__":
    main()

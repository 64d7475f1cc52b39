"""One bench run: ooc against numpy, dask and h5py on the same files, and against the
machine's limits measured in the same run. Prints a markdown table and saves it (with the
machine, date and command) as bench/RESULTS.md. Run it through bench/run.sh.

Each measurement is a fresh process (the file is mapped afresh, as a user's new process
would), timed around the operation alone; the libraries take turns within every
repetition and the table gives medians.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "interop"))
from memory_cgroup import MemoryGroup, Unavailable  # noqa: E402  (the tests' harness, shared)
PYTHON = "/usr/bin/python3"
PEERS = os.path.join(HERE, "peers.py")
GB = 1e9

# --large runs the default rows and adds a sum of a file 8x larger than a memory cgroup.
SIZES = {"smoke": 16 << 20, "quick": 512 << 20, "default": 2 << 30, "large": 2 << 30}
CGROUP_BYTES = 1 << 30
LARGER_THAN_MEMORY_BYTES = 8 * CGROUP_BYTES


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


GNU_TIME = "/usr/bin/time"


def peak_process(cmd):
    """Runs cmd (any output) and returns (its wall seconds, its peak RSS in bytes), the peak
    by GNU time as timed_process takes it."""
    with tempfile.NamedTemporaryFile(mode="r", suffix=".rss") as rss:
        start = time.perf_counter()
        proc = subprocess.run([GNU_TIME, "-f", "%M", "-o", rss.name, *cmd], capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
        return seconds, int(rss.read().strip().splitlines()[-1]) * 1024


def timed_process(cmd):
    """Runs cmd and returns (its JSON result, its peak RSS in bytes). A process this one
    starts has as its peak at least this process's resident set (Linux carries the
    high-water mark over the exec), so the peak is GNU time's report of cmd, which time
    starts from its own small image."""
    with tempfile.NamedTemporaryFile(mode="r", suffix=".rss") as rss:
        if os.path.exists(GNU_TIME):
            cmd = [GNU_TIME, "-f", "%M", "-o", rss.name, *cmd]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        stdout = proc.stdout.read()
        stderr = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {stderr.decode().strip()}")
        reported = rss.read().strip().splitlines()
        peak = int(reported[-1]) * 1024 if reported and reported[-1].isdigit() else usage.ru_maxrss * 1024
    return json.loads(stdout.decode().strip().splitlines()[-1]), peak


class Bench:
    def __init__(self, args):
        self.args = args
        self.oocrun = args.oocrun
        self.probe = args.probe
        self.dir = args.dir
        self.rows = []
        self.notes = []

    # ---- data -------------------------------------------------------------------------
    def make_matrix(self, name, nbytes, columns=8):
        """A tall float64 (N, columns) matrix of normal values, written in chunks."""
        path = os.path.join(self.dir, name)
        rows = nbytes // (8 * columns)
        if os.path.exists(path) and os.path.getsize(path) >= rows * 8 * columns:
            return path
        a = np.lib.format.open_memmap(path, mode="w+", dtype="<f8", shape=(rows, columns))
        rng = np.random.default_rng(7)
        step = (8 << 20) // columns
        for i in range(0, rows, step):
            a[i:i + step] = rng.standard_normal((min(step, rows - i), columns))
        a.flush()
        del a
        return path

    def make_row_mask(self, name, rows, density=0.1):
        """A bool .npy over `rows` rows, true at random with `density`."""
        path = os.path.join(self.dir, name)
        if not os.path.exists(path):
            np.save(path, np.random.default_rng(11).random(rows) < density)
        return path

    def make_hdf5(self, name, matrix):
        """The matrix again as two HDF5 datasets: contiguous, and chunked in 4 MiB chunks."""
        import h5py
        path = os.path.join(self.dir, name)
        a = np.load(matrix, mmap_mode="r")
        if not os.path.exists(path):
            with h5py.File(path, "w") as f:
                contiguous = f.create_dataset("contiguous", shape=a.shape, dtype=a.dtype)
                chunk_rows = (4 << 20) // (8 * a.shape[1])
                chunked = f.create_dataset("chunked", shape=a.shape, dtype=a.dtype, chunks=(chunk_rows, a.shape[1]))
                step = 1 << 21
                for i in range(0, a.shape[0], step):
                    contiguous[i:i + step] = a[i:i + step]
                    chunked[i:i + step] = a[i:i + step]
        return path

    # The compressed rows: int16 Poisson counts (as detectors write them) in chunks of 1M
    # elements, one dataset per codec; h5py's filter plugins write the ones HDF5 lacks.
    COMPRESSED = {
        "gzip-1+shuffle": dict(compression="gzip", compression_opts=1, shuffle=True),
        "blosc:zstd:1+shuffle": dict(compression=32001, compression_opts=(0, 0, 0, 0, 1, 1, 5)),
        "lz4+shuffle": dict(compression=32004, shuffle=True),
    }

    def make_compressed(self, name, nbytes, kind="poisson"):
        """One dataset per codec of the same values: `poisson` int16 counts (mean 20) in
        chunks of 1M elements, or `smooth` float32 (a sum of sines plus 1% noise, rounded to
        3 decimals) in chunks of 256K elements (1 MiB)."""
        import h5py
        path = os.path.join(self.dir, name)
        dtype, chunk = ("<i2", 1 << 20) if kind == "poisson" else ("<f4", 1 << 18)
        n = nbytes // np.dtype(dtype).itemsize
        if not os.path.exists(path):
            rng = np.random.default_rng(3)
            with h5py.File(path, "w") as f:
                sets = {label: f.create_dataset(label.replace(":", "_"), shape=(n,), dtype=dtype, chunks=(min(n, chunk),),
                                                **kw)
                        for label, kw in self.COMPRESSED.items() if not isinstance(kw["compression"], int)
                        or h5py.h5z.filter_avail(kw["compression"])}
                step = 1 << 24
                for i in range(0, n, step):
                    m = min(step, n - i)
                    if kind == "poisson":
                        block = rng.poisson(20.0, m).astype(dtype)
                    else:
                        x = np.arange(i, i + m) * 1e-5
                        block = (np.sin(x) + 0.5 * np.sin(7.3 * x) + 0.25 * np.sin(31.1 * x))
                        block = np.round(block * (1 + 0.01 * rng.standard_normal(m)), 3).astype(dtype)
                    for d in sets.values():
                        d[i:i + m] = block
        with h5py.File(path, "r") as f:
            ratios = {label: f[label.replace(":", "_")].nbytes / f[label.replace(":", "_")].id.get_storage_size()
                      for label in self.COMPRESSED if label.replace(":", "_") in f}
        return path, n * np.dtype(dtype).itemsize, ratios

    def compressed(self, nbytes):
        speedups = []
        for kind, name, size, what in (("poisson", "compressed.h5", nbytes // 2, "int16 Poisson"),
                                       ("smooth", "smooth.h5", nbytes * 2, "float32 smooth field")):
            path, size, ratios = self.make_compressed(name, size, kind)
            for label, ratio in ratios.items():
                spec = f"{path}:/{label.replace(':', '_')}"
                row = self.measure(f"sum of an HDF5 {label} {what} ({ratio:.1f}x compressed), warm", size,
                                   {"ooc": self.ooc("reduce", "sum", spec), "h5py": self.peer("h5py", "sum", spec)})
                speedups.append(f"{what} {label} {row['ooc'] / row['h5py']:.2f}x")
        # Writing: a float64 array cast to float32 into a blosc zstd:1 + shuffle dataset,
        # against h5py writing the same float32 values from memory with the same filters.
        import h5py
        if h5py.h5z.filter_avail(32001):
            # At most the 1 GiB of float32 (2 GiB of float64 read): h5py's side holds it in memory.
            source = os.path.join(self.dir, "smooth64.npy")
            if not os.path.exists(source):
                path, size, _ = self.make_compressed("smooth.h5", nbytes * 2, "smooth")
                with h5py.File(path, "r") as f:
                    name = next(iter(f))
                    values = f[name]
                    count = min(values.shape[0], (1 << 30) // 4)
                    out = np.lib.format.open_memmap(source, mode="w+", dtype="<f8", shape=(count,))
                    for i in range(0, count, 1 << 24):
                        out[i:i + (1 << 24)] = values[i:min(count, i + (1 << 24))]
                    out.flush()
                    del out
            written = os.path.join(self.dir, "written.h5")
            row = self.measure("apply cast:f4 of float64 into HDF5 blosc:zstd:1+shuffle, durable", os.path.getsize(source),
                               {"ooc": self.ooc("apply", "cast:f4", source, "-o", f"{written}:/y", "--compression",
                                                "blosc:zstd:1", "--shuffle", "--chunks", "auto", "--overwrite"),
                                "h5py": self.peer("h5py", "write_blosc", source, f"{written}:/y")})
            speedups.append(f"write float32 blosc:zstd:1+shuffle {row['ooc'] / row['h5py']:.2f}x (h5py from memory)")
        # Cold: where compression pays, against O_DIRECT reads of as many bytes as the data holds.
        if not self.args.smoke:
            for kind, name, size, what in (("poisson", "compressed.h5", nbytes // 2, "int16 Poisson"),
                                           ("smooth", "smooth.h5", nbytes * 2, "float32 smooth field")):
                path, size, ratios = self.make_compressed(name, size, kind)
                plain = os.path.join(self.dir, f"plain-{size}.bin")
                if not os.path.exists(plain):
                    with open(plain, "wb") as f:
                        block = os.urandom(1 << 20)
                        for _ in range(size >> 20):
                            f.write(block)
                label = "blosc:zstd:1+shuffle" if "blosc:zstd:1+shuffle" in ratios else next(iter(ratios))
                spec = f"{path}:/{label.replace(':', '_')}"
                self.measure(f"sum of an HDF5 {label} {what} ({ratios[label]:.1f}x compressed), cold", size,
                             {"ooc": self.ooc("reduce", "sum", spec), "h5py": self.peer("h5py", "sum", spec),
                              "limit": self.read_probe(plain)}, cold=True)
        self.notes.append("compressed rows: int16 Poisson counts (mean 20) in chunks of 1M elements, float32 smooth "
                          "field (sines, 1% noise, 3 decimals) in chunks of 256K; ooc looks chunks up in the serial "
                          "stage and decodes them from a mapping of the file on every thread; h5py reads 64 MiB slabs "
                          "through the library; the cold row's limit is the O_DIRECT read probe of a plain file of the "
                          "data's uncompressed size; ooc/h5py: " + ", ".join(speedups))

    # ---- runners ----------------------------------------------------------------------
    def ooc(self, *args, threads=None):
        cmd = [self.oocrun, *args, "--json", "--quiet"]
        if threads:
            cmd += ["--threads", str(threads)]
        return cmd

    def peer(self, library, op, src, dst=None):
        return [PYTHON, PEERS, library, op, src] + ([dst] if dst else [])

    def python(self, op, src, dst=None):
        """ooc's Python module (import ooc) from the build tree, in a fresh process."""
        return ["env", f"PYTHONPATH={self.args.python_module}", *self.peer("python", op, src, dst)]

    def measure(self, name, nbytes, commands, cold=False, limit=None, cgroup=None, prepare=None):
        """commands: {label: argv}. Runs every label once per repetition, in a rotating
        order, and records the median seconds (and peak RSS) of each. A "limit" label is a
        probe taking its turn with the others: this shared disk's speed drifts over minutes,
        so a disk-bound row is compared with the disk as it was during that row."""
        # The files the rows before wrote (the bench's own data, up to 4 GiB of it) finish
        # their write-back now, not during this row's disk-bound runs.
        os.sync()
        seconds = {label: [] for label in commands}
        peaks = {label: [] for label in commands}
        labels = list(commands)
        for rep in range(self.args.reps):
            order = labels[rep % len(labels):] + labels[:rep % len(labels)]
            for label in order:
                if prepare:
                    prepare(label)
                if cold:
                    drop_caches()
                cmd = cgroup.wrap(commands[label]) if cgroup else commands[label]
                result, rss = timed_process(cmd)
                seconds[label].append(result["seconds"])
                peaks[label].append(cgroup.peak() if cgroup else rss)
        row = {"operation": name, "bytes": nbytes, "limit": limit}
        for label in labels:
            row[label] = nbytes / statistics.median(seconds[label]) / GB
            row[label + "_peak"] = max(peaks[label])
        self.rows.append(row)
        print(self.format_row(row), flush=True)
        return row

    # ---- probes -----------------------------------------------------------------------
    def run_probe(self, *args):
        out = subprocess.run([self.probe, *map(str, args)], capture_output=True, text=True, check=True).stdout
        return [json.loads(line) for line in out.splitlines()]

    def probes(self, path):
        """The warm limits, measured at the start: each probe line is one way (strategy) and
        thread count; a rep's limit for a thread count is its fastest way, and the table
        gives the median over reps. The disk-bound limits (read, write, in place) take
        turns with the peers in their rows instead, as the disk's speed drifts."""
        best = {}
        for rep in range(max(1, self.args.reps)):
            fastest = {}
            for p in (self.run_probe("memory", 256 if self.args.size == "smoke" else 1024) +
                      self.run_probe("mapped", path) + self.run_probe("fold", path)):
                if p.get("best"):
                    continue
                key = (p["probe"], p["threads"])
                fastest[key] = max(fastest.get(key, 0), p["gbps"])
            for key, gbps in fastest.items():
                best.setdefault(key, []).append(gbps)
        self.limits = {key: statistics.median(values) for key, values in best.items()}

    def read_probe(self, path):
        return [self.probe, "read", path]

    def limit(self, probe):
        """The probe's best over its thread counts."""
        return max((gbps for (name, _), gbps in self.limits.items() if name == probe), default=None)

    # ---- the table --------------------------------------------------------------------
    COLUMNS = ["ooc", "python", "numpy", "dask", "h5py", "pandas"]

    @staticmethod
    def fmt(x, digits=2):
        return "—" if x is None else f"{x:.{digits}f}"

    def format_row(self, row):
        cells = [row["operation"], f"{row['bytes'] / 2**30:.2f} GiB"]
        cells += [self.fmt(row.get(c)) for c in self.COLUMNS]
        cells.append(self.fmt(row.get("limit")))
        ooc, numpy_rate, limit = row.get("ooc"), row.get("numpy"), row.get("limit")
        cells.append(self.fmt(ooc / numpy_rate if ooc and numpy_rate else None) + ("x" if ooc and numpy_rate else ""))
        cells.append(f"{100 * ooc / limit:.0f}%" if ooc and limit else "—")
        return "| " + " | ".join(cells) + " |"

    def table(self):
        head = ("| operation | bytes | ooc GB/s | ooc from Python | numpy memmap | dask (2 threads) | h5py | pandas | "
                "limit probe | ooc/numpy | ooc/limit |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
        return head + "\n".join(self.format_row(r) for r in self.rows) + "\n"

    # ---- the run ----------------------------------------------------------------------
    def text(self, nbytes):
        """Text rows: import of a CSV that np.savetxt(fmt='%.17g') wrote (ooc, np.loadtxt,
        pandas.read_csv with float_precision='round_trip'; each ends with a durable .npy,
        and the three give equal bits), and export against np.savetxt (shortest round
        trip: fmt='%r'). GB/s are of the CSV's bytes; peak RSS in the notes."""
        rows = max(nbytes // 64, 1000)  # (rows, 8) float64 of nbytes; the CSV holds ~24 bytes per value
        matrix = os.path.join(self.dir, "text-matrix.npy")
        csv = os.path.join(self.dir, "text.csv")
        a = np.random.default_rng(11).standard_normal((rows, 8))
        np.save(matrix, a)
        np.savetxt(csv, a, fmt="%.17g", delimiter=",")
        del a  # a child's peak RSS counts the pages it shares with this process until it execs
        size = os.path.getsize(csv)
        outs = {label: os.path.join(self.dir, f"text-{label}.npy") for label in ("ooc", "numpy", "pandas")}
        row = self.measure("import a CSV (np.savetxt %.17g) to .npy", size,
                           {"ooc": self.ooc("import", csv, "-o", outs["ooc"]),
                            "numpy": self.peer("numpy", "loadtxt", csv, outs["numpy"]),
                            "pandas": self.peer("pandas", "read_csv", csv, outs["pandas"])})
        got = {label: np.load(path, mmap_mode="r") for label, path in outs.items()}
        same = all(np.array_equal(got["ooc"].view("u8"), g.view("u8")) for g in got.values())
        del got
        self.notes.append(f"import row: {size / 1e6:.0f} MB CSV of ({rows}, 8) float64; equal bits in all three: "
                          f"{same}; ooc/pandas {row['ooc'] / row['pandas']:.2f}x; peak RSS " + ", ".join(
                              f"{label} {row[label + '_peak'] / 2**20:.0f} MiB" for label in outs))
        if not self.args.smoke:
            # Cold: the CSV read from disk (caches dropped before each run), against an O_DIRECT
            # read of the same file taking turns with it; ooc/limit says which side bounds it.
            row = self.measure("import a CSV (np.savetxt %.17g) to .npy, cold", size,
                               {"ooc": self.ooc("import", csv, "-o", outs["ooc"]), "limit": self.read_probe(csv)},
                               cold=True)
            self.notes.append(f"cold import row: ooc {row['ooc']:.3f} GB/s of CSV against the O_DIRECT read "
                              f"probe's {row['limit']:.3f} GB/s ({100 * row['ooc'] / row['limit']:.0f}%), on "
                              f"{os.cpu_count()} cores")
        text_out = os.path.join(self.dir, "text-out.csv")
        row = self.measure("export (N, 8) float64 to CSV, shortest round trip", size,
                           {"ooc": self.ooc("export", matrix, "-o", text_out),
                            "numpy": self.peer("numpy", "savetxt", matrix, text_out)},
                           prepare=lambda _: os.path.exists(text_out) and os.remove(text_out))
        self.notes.append("export row: GB/s of the CSV's bytes; numpy is np.savetxt(fmt='%r') (Python's repr, "
                          "the shortest round trip); peak RSS " + ", ".join(
                              f"{label} {row[label + '_peak'] / 2**20:.0f} MiB" for label in ("ooc", "numpy")))
        for path in [matrix, csv, text_out, *outs.values()]:
            if os.path.exists(path):
                os.remove(path)

    def run(self):
        nbytes = SIZES[self.args.size]
        if self.args.only == "text":
            self.limits = {}
            print(self.table().split("\n")[0], flush=True)
            self.text(self.args.text_bytes or nbytes)
            return
        matrix = self.make_matrix("matrix.npy", nbytes)
        out = os.path.join(self.dir, "out.npy")
        inplace = os.path.join(self.dir, "inplace.npy")
        shutil.copyfile(matrix, inplace)
        print("probes ...", flush=True)
        self.probes(matrix)
        print(self.table().split("\n")[0], flush=True)

        sum_peers = {"ooc": self.ooc("reduce", "sum", matrix), "numpy": self.peer("numpy", "sum", matrix),
                     "dask": self.peer("dask", "sum", matrix)}
        if self.args.python_module:
            sum_peers["python"] = self.python("sum", matrix)
        self.measure("sum, warm", nbytes, sum_peers, limit=self.limit("mapped_sum"))
        # Thread scaling here, on the file as the warm row found it: after the cold rows'
        # reads (and the compressed rows' 10 GiB of files) it is partly out of the cache
        # or in small folios (docs/decisions/2026-11-30-warm-read-folio-size.md), and 1 thread measured 3.4 GB/s there.
        for threads in range(1, os.cpu_count() + 1):
            self.measure(f"sum, warm, {threads} thread{'s' if threads > 1 else ''}", nbytes,
                         {"ooc": self.ooc("reduce", "sum", matrix, threads=threads)},
                         limit=self.limits.get(("mapped_sum", threads)))
        if not self.args.smoke:
            self.measure("sum, cold", nbytes, {**sum_peers, "limit": self.read_probe(matrix)}, cold=True)
        self.measure("mean over axis 0 of (N, 8), warm", nbytes,
                     {"ooc": self.ooc("reduce", "mean", matrix, "--axis", "0"),
                      "numpy": self.peer("numpy", "mean_axis0", matrix),
                      "dask": self.peer("dask", "mean_axis0", matrix)},
                     limit=self.limit("fold"))
        self.notes.append("mean over axis 0: its limit is the same work without ooc (`ooc_probe fold`): each column "
                          "summed row after row, numpy's order and so one adding thread, with 0..N-1 helper threads "
                          f"filling its page tables ahead; {self.fmt(self.limit('fold'))} GB/s, "
                          f"{self.fmt(100 * self.limit('fold') / self.limit('mapped_sum'), 0)}% of the full sum's "
                          f"limit {self.fmt(self.limit('mapped_sum'))}")
        self.notes.append("limit probe: the best of several ways of doing the row's work without ooc, each with "
                          "1..N threads (bench/probe.cpp); cold rows: O_DIRECT reads with 1..N requests in flight, "
                          "read() with readahead, page faults with MADV_SEQUENTIAL; the new-file add-one: O_DIRECT "
                          "writes with 1..N requests in flight, write() with early write-back, then fsync; in place: "
                          "page faults, MADV_POPULATE_WRITE or pread+pwrite of the same file, then msync/fdatasync; the warm "
                          "subset: the same sum of the same file by page faults, MADV_POPULATE_READ or pread. "
                          "These take turns with the peers in their row (the disk's speed drifts over minutes); "
                          "the warm rows' limit (page faults, MADV_POPULATE_READ or pread into small buffers) runs "
                          "at the start")
        self.statistics(matrix, nbytes)
        self.selections(nbytes)
        self.subset(nbytes)
        self.new_file(matrix, out, nbytes)
        self.vector_math(matrix, out, nbytes)
        if self.args.python_module:
            self.python_rows(matrix)
        self.in_place(inplace, nbytes)
        h5 = self.make_hdf5("matrix.h5", matrix)
        for layout in ("contiguous", "chunked"):
            spec = f"{h5}:/{layout}"
            self.measure(f"sum of an HDF5 {layout} dataset, warm", nbytes,
                         {"ooc": self.ooc("reduce", "sum", spec), "dask": self.peer("dask", "sum", spec),
                          "h5py": self.peer("h5py", "sum", spec)},
                         limit=self.limit("mapped_sum"))
        self.compressed(nbytes)
        self.text(self.args.text_bytes or nbytes // 32)
        if self.args.size == "large":
            self.larger_than_memory()
        for path in (out, inplace):
            if os.path.exists(path):
                os.remove(path)

    def statistics(self, matrix, nbytes):
        """sum, mean, std, min and max in one `oocrun reduce` (one read of the file; two along
        axis 0, where std is numpy's two passes), against `reduce sum` alone and numpy's five
        calls on a memmap, whole array and along axis 0 (issue 28's goals: at most 1.5x the
        time of the sum alone, at least 3x faster than numpy's five calls)."""
        names = "sum,mean,std,min,max"
        ratios = []
        for axis, label, peer in ((None, "whole array", "statistics"), (0, "axis 0", "statistics_axis0")):
            extra = [] if axis is None else ["--axis", str(axis)]
            commands = {"ooc": self.ooc("reduce", names, matrix, *extra), "sum": self.ooc("reduce", "sum", matrix, *extra),
                        "numpy": self.peer("numpy", peer, matrix)}
            if self.args.python_module:
                commands["python"] = self.python(peer, matrix)
            row = self.measure(f"sum, mean, std, min, max of (N, 8), {label}, warm (one oocrun reduce)", nbytes,
                               commands)
            ratios.append(f"{label}: {row['sum'] / row['ooc']:.2f}x the time of `reduce sum` alone "
                          f"({self.fmt(row['sum'])} GB/s), {row['ooc'] / row['numpy']:.2f}x numpy's five calls")
        self.notes.append("statistics rows: `oocrun reduce sum,mean,std,min,max` (one read; along axis 0 two, std being "
                          "numpy's two passes) against numpy's np.sum, np.mean, np.std, np.min, np.max on one memmap; "
                          + "; ".join(ratios))

    def selections(self, nbytes):
        """Issue 28's selection rows. Warm, the sum of the column X[:, 2] of an (N, 8) float64
        file against the whole array's sum (GB/s of the file's bytes for both: the column
        touches every page; goal >= 0.8x). Then a file 8x the cgroup of the larger-than-memory
        row (or the largest /tmp holds): the peak resident memory of the column sum through
        the C++ API (tests/memory/selection_sum, default options), oocrun and Python, of a
        sum over a 10%-dense row mask and of copy of that masked selection, each in a 1 GiB
        memory cgroup (goal <= 128 MiB); and the cold copy against the disk's read probe
        (goal >= 0.8x)."""
        matrix = self.make_matrix("matrix.npy", nbytes)
        column = f"{matrix}[:, 2]"
        row = self.measure("sum of X[:, 2] of (N, 8), warm, against the whole array's sum", nbytes,
                           {"ooc": self.ooc("reduce", "sum", column), "sum": self.ooc("reduce", "sum", matrix),
                            "numpy": self.peer("numpy", "column_sum", matrix)})
        self.notes.append(f"column row: `oocrun reduce sum 'X.npy[:, 2]'` {self.fmt(row['ooc'])} GB/s of the file "
                          f"against {self.fmt(row['sum'])} for `reduce sum X.npy` in the same row: "
                          f"{row['ooc'] / row['sum']:.2f}x (goal >= 0.8x); numpy `a[:, 2].sum()` on a memmap")
        if self.args.smoke:  # no cold rows, no cgroup: those need root
            return
        large = LARGER_THAN_MEMORY_BYTES if self.args.size in ("default", "large") else 4 * nbytes
        free = shutil.disk_usage(self.dir).free
        if free < 1.3 * large:  # the file, its masked copy (10%), and room for the others
            large = int(free / 1.3) >> 30 << 30
            self.notes.append(f"selection memory rows: {large >> 30} GiB file, the largest /tmp held "
                              f"({free / 2**30:.0f} GiB free)")
        if large < nbytes:
            self.notes.append("selection memory rows skipped: no room in /tmp")
            return
        big = self.make_matrix("selections-large.npy", large)
        rows = large // 64
        mask = self.make_row_mask("rows10.npy", rows)
        out = os.path.join(self.dir, "masked-copy.npy")
        column, masked = f"{big}[:, 2]", f"{big}[@{mask}]"
        selection_sum = os.path.join(os.path.dirname(self.oocrun), "tests", "selection_sum")
        try:
            commands = {}
            if os.path.exists(selection_sum):
                commands["C++ sum X[:, 2]"] = [selection_sum, column]
                commands["C++ sum X[m]"] = [selection_sum, masked]
            commands["oocrun sum X[:, 2]"] = self.ooc("reduce", "sum", column)
            commands["oocrun sum X[m]"] = self.ooc("reduce", "sum", masked)
            commands["oocrun copy X[m]"] = self.ooc("copy", masked, "-o", out)
            if self.args.python_module:
                commands["Python sum X[:, 2]"] = self.python("sum", column)
                commands["Python sum X[m]"] = self.python("sum", masked)
                commands["Python copy X[m]"] = self.python("copy", masked, out)
            self.selection_memory(commands, large, out)
            self.measure(f"copy of X[m], m a 10%-dense row mask, cold, (N, 8) float64", large,
                         {"ooc": self.ooc("copy", masked, "-o", out), "limit": self.read_probe(big)},
                         cold=True, prepare=lambda _: os.path.exists(out) and os.remove(out))
            row = self.rows[-1]
            self.notes.append(f"masked copy row: `oocrun copy 'X.npy[@rows10.npy]' -o OUT.npy` (the output durable), "
                              f"GB/s of X's bytes: {row['ooc'] / row['limit']:.2f}x the O_DIRECT read probe "
                              f"(goal >= 0.8x)")
        finally:
            for path in (big, mask, out):
                if os.path.exists(path):
                    os.remove(path)

    def selection_memory(self, commands, nbytes, out):
        """Each command, cold, in a memory cgroup of CGROUP_BYTES: its peak resident memory
        (GNU time; the cgroup's own peak counts the page cache, which fills it whatever
        reads) and its seconds, medians of the reps."""
        try:
            cgroup = MemoryGroup(CGROUP_BYTES, "ooc-bench")
        except Unavailable as e:
            self.notes.append(f"selection memory rows skipped: cannot create a memory cgroup ({e})")
            return
        said = []
        try:
            for label, cmd in commands.items():
                peaks, seconds = [], []
                for _ in range(max(1, self.args.reps)):
                    if os.path.exists(out):
                        os.remove(out)
                    drop_caches()
                    wall, peak = peak_process(cgroup.wrap(cmd))
                    seconds.append(wall)
                    peaks.append(peak)
                said.append(f"{label} {max(peaks) / 2**20:.0f} MiB ({statistics.median(seconds):.1f} s)")
                print(f"peak RSS, {nbytes >> 30} GiB file, {CGROUP_BYTES >> 30} GiB cgroup: {said[-1]}", flush=True)
        finally:
            cgroup.remove()
        self.notes.append(f"selection memory (goal <= 128 MiB), a {nbytes >> 30} GiB (N, 8) float64 file, cold, each "
                          f"run in a {CGROUP_BYTES >> 30} GiB memory cgroup, default tile size, the most of "
                          f"{max(1, self.args.reps)} runs of peak RSS (GNU time) and the median seconds; m a 10%-dense "
                          f"random row mask file (@rows10.npy), X[:, 2] the third column: " + ", ".join(said))

    def new_file(self, matrix, out, nbytes):
        self.measure("add-one into a new file, durable", nbytes,
                     {"ooc": self.ooc("apply", "add-one", matrix, "-o", out),
                      "numpy": self.peer("numpy", "add_one", matrix, out),
                      "dask": self.peer("dask", "add_one", matrix, out),
                      "limit": [self.probe, "write", out, str(nbytes)]},
                     prepare=lambda _: os.path.exists(out) and os.remove(out))

    def in_place(self, inplace, nbytes):
        in_place_probe = [self.probe, "inplace", inplace]
        self.measure("add-one in place, flushed, no journal", nbytes,
                     {"ooc": self.ooc("apply", "add-one", inplace, "--in-place", "--no-journal"),
                      "numpy": self.peer("numpy", "add_one_in_place", inplace), "limit": in_place_probe})
        self.measure("add-one in place, flushed, crash journal", nbytes,
                     {"ooc": self.ooc("apply", "add-one", inplace, "--in-place"),
                      "numpy": self.peer("numpy", "add_one_in_place", inplace), "limit": in_place_probe})
        self.notes.append("in-place rows: numpy's `a += 1; a.flush()` on a memmap, then fsync, which a crash "
                          "leaves half done; ooc's default keeps a crash journal (every tile written twice, "
                          "the run resumable); `--no-journal` is numpy's guarantee")

    def only_io_rows(self, rows, nbytes):
        """--only subset | new-file | in-place | statistics | selections: those rows alone, with the probes they
        need."""
        if rows == "selections":
            self.limits = {}
            print(self.table().split("\n")[0], flush=True)
            self.selections(nbytes)
            return
        if rows == "statistics":
            self.limits = {}
            print(self.table().split("\n")[0], flush=True)
            self.statistics(self.make_matrix("matrix.npy", nbytes), nbytes)
            return
        if rows == "subset":
            self.probes(self.make_matrix("wide.npy", max(nbytes, 1 << 20), columns=40))
            print(self.table().split("\n")[0], flush=True)
            self.subset(nbytes)
            return
        self.limits = {}
        print(self.table().split("\n")[0], flush=True)
        matrix = self.make_matrix("matrix.npy", nbytes)
        if rows == "new-file":
            out = os.path.join(self.dir, "out.npy")
            self.new_file(matrix, out, nbytes)
            os.path.exists(out) and os.remove(out)
        else:
            inplace = os.path.join(self.dir, "inplace.npy")
            shutil.copyfile(matrix, inplace)
            self.in_place(inplace, nbytes)
            os.remove(inplace)

    def vector_math(self, matrix, out, nbytes):
        """Transcendental functions (issue 19): log1p into a new file, by oocrun, by numpy's
        ufunc over a memmap and, with the module, by Python's map_blocks(np.log1p); and a
        reduction of an expression, which numpy computes in full-size temporaries."""
        log1p = {"ooc": self.ooc("apply", "log1p", matrix, "-o", out),
                 "numpy": self.peer("numpy", "log1p", matrix, out)}
        if self.args.python_module:
            log1p["python"] = self.python("log1p", matrix, out)
        self.measure("log1p into a new file, durable (ooc from Python: map_blocks(np.log1p))", nbytes, log1p,
                     prepare=lambda _: os.path.exists(out) and os.remove(out))
        self.measure("sum(sin(a)*cos(a)), warm (ooc: eval)", nbytes,
                     {"ooc": self.ooc("eval", "sum(sin(a)*cos(a))", f"a={matrix}"),
                      "numpy": self.peer("numpy", "sin_cos_sum", matrix)})

    def python_rows(self, matrix):
        """What one call of ooc's Python module costs on a tiny file."""
        tiny = os.path.join(self.dir, "tiny.npy")
        np.save(tiny, np.arange(112, dtype="<f8"))  # 1 kB with its header
        seconds = {label: statistics.median(timed_process(cmd)[0]["seconds"] for _ in range(max(1, self.args.reps)))
                   for label, cmd in (("ooc.sum", self.python("call_overhead", tiny)),
                                      ("np.load(mmap_mode='r').sum()", self.peer("numpy", "call_overhead", tiny)))}
        start = time.perf_counter()
        timed_process(self.ooc("reduce", "sum", tiny))
        seconds["oocrun reduce sum (a process)"] = time.perf_counter() - start
        self.notes.append("one call on a 1 kB file: " + ", ".join(f"{label} {s * 1e6:.0f} µs"
                                                                   for label, s in seconds.items()))
        print(self.notes[-1], flush=True)

    def subset(self, nbytes):
        """A sparse subset: every 5th row, 5 of 40 columns, of a (N, 40) matrix of the bench
        size (GB/s are of the whole array's bytes, as in the other rows). Not smaller: a
        512 MiB file just written was still in the VM host's cache, where one thread's
        faults read 1.8-1.9 GB/s, against 0.84 from a 2 GiB one (docs/decisions/2026-12-02-cold-reads-willneed.md)."""
        wide_bytes = max(nbytes, 1 << 20)
        wide = self.make_matrix("wide.npy", wide_bytes, columns=40)
        h5 = self.make_hdf5("wide.h5", wide)
        nbytes = os.path.getsize(wide) - 128
        selection = "[::5, [0, 9, 18, 27, 36]]"
        for cold in ((False,) if self.args.smoke else (False, True)):
            peers = {"ooc": self.ooc("reduce", "sum", wide + selection),
                     "numpy": self.peer("numpy", "subset_sum", wide),
                     "h5py": self.peer("h5py", "subset_sum", f"{h5}:/contiguous"),
                     # Warm, the same sum without ooc; cold, a read of every page (rows 1600
                     # bytes apart touch them all).
                     "limit": self.read_probe(wide) if cold else
                     [self.probe, "select", wide, "40", "5", "0", "9", "18", "27", "36"]}
            self.measure(f"sum of a[::5, 5 of 40 columns], {'cold' if cold else 'warm'}", nbytes, peers, cold=cold)
        self.notes.append("subset rows: numpy is fancy indexing on a memmap (`a[::5][:, cols].sum()`), h5py "
                          "reads hyperslabs `d[i:j:5, cols]` of 64 MiB of rows each; ooc reads "
                          f"`wide.npy{selection}`")

    def larger_than_memory(self):
        nbytes = LARGER_THAN_MEMORY_BYTES
        matrix = self.make_matrix("larger-than-memory.npy", nbytes)
        try:
            cgroup = MemoryGroup(CGROUP_BYTES, "ooc-bench")
        except Unavailable as e:
            self.notes.append(f"larger-than-memory row skipped: cannot create a memory cgroup ({e})")
            return
        try:
            row = self.measure(f"sum, cold, in a {CGROUP_BYTES >> 30} GiB cgroup", nbytes,
                               {"ooc": self.ooc("reduce", "sum", matrix), "numpy": self.peer("numpy", "sum", matrix),
                                "dask": self.peer("dask", "sum", matrix),
                                "limit": self.read_probe(matrix)},
                               cold=True, cgroup=cgroup)
            self.notes.append("peak memory of the cgroup (page cache included) in that row: " + ", ".join(
                f"{label} {row[label + '_peak'] / 2**20:.0f} MiB" for label in ("ooc", "numpy", "dask")))
        finally:
            cgroup.remove()

    def report(self, command):
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        model = next((l.split(":", 1)[1].strip() for l in lscpu.splitlines() if l.startswith("Model name")), "?")
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
        probes = ", ".join(f"{name} {threads}t {gbps:.2f}" for (name, threads), gbps in sorted(self.limits.items()))
        lines = [
            "# Bench results", "",
            f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
            f"- machine: {model}, {os.cpu_count()} cores, {mem:.0f} GiB RAM, Linux {platform.release()}",
            f"- command: `{command}`",
            f"- numpy {np.__version__}; medians of {self.args.reps} alternating runs; GB/s = 10^9 bytes/s of input",
            f"- limit probes (GB/s): {probes}", "",
            self.table(),
        ]
        lines += [f"- {note}" for note in self.notes]
        return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--oocrun", required=True)
    parser.add_argument("--probe", required=True)
    parser.add_argument("--dir", default=None, help="where the data files go (default: a temp dir under /tmp)")
    parser.add_argument("--size", choices=list(SIZES), default="default")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--python-module", default=None,
                        help="the folder holding ooc's Python package (build/python); adds its rows")
    parser.add_argument("--out", default=os.path.join(HERE, "RESULTS.md"))
    parser.add_argument("--keep", action="store_true", help="keep the data files")
    parser.add_argument("--only", choices=["text", "compressed", "subset", "new-file", "in-place", "statistics",
                                           "selections"],
                        default=None,
                        help="run only these rows (text, compressed, statistics: no probes; subset: the warm read "
                             "probe of its file; new-file, in-place: their probes take turns in the rows)")
    parser.add_argument("--text-bytes", type=lambda s: int(float(s)), default=None,
                        help="values in the text rows' array, in bytes (the CSV is ~3x that; default: 1/32 "
                             "of the bench size, or the bench size with --only text)")
    args = parser.parse_args()
    args.smoke = args.size == "smoke"
    if args.smoke:
        args.reps = 1
    own_dir = args.dir is None
    args.dir = args.dir or tempfile.mkdtemp(prefix="ooc-bench-", dir="/tmp")
    os.makedirs(args.dir, exist_ok=True)
    bench = Bench(args)
    try:
        if args.only == "compressed":
            bench.limits = {}
            print(bench.table().split("\n")[0], flush=True)
            bench.compressed(SIZES[args.size])
        elif args.only in ("subset", "new-file", "in-place", "statistics", "selections"):
            bench.only_io_rows(args.only, SIZES[args.size])
        else:
            bench.run()
        text = bench.report(os.environ.get("OOC_BENCH_COMMAND", "bench/bench.py " + " ".join(sys.argv[1:])))
        with open(args.out, "w") as f:
            f.write(text)
        print("\n" + text)
    finally:
        if own_dir and not args.keep:
            shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()

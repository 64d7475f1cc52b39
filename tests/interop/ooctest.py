"""Shared helpers for the interop tests: run oocrun, make arrays the way numpy users do."""
import io
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import numpy as np

OOCRUN = os.environ.get("OOCRUN", "oocrun")

# Every dtype ooc accepts, in every byte-order spelling numpy writes.
DTYPES = ["|b1", "|i1", "|u1",
          "<i2", ">i2", "<i4", ">i4", "<i8", ">i8",
          "<u2", ">u2", "<u4", ">u4", "<u8", ">u8",
          "<f2", ">f2", "<f4", ">f4", "<f8", ">f8"]
# The same types without their byte order, for sweeps that take the byte order as a
# dimension of its own: sweep(TYPES, "<>", ..., valid=byte_order_applies), each row's
# dtype with_byte_order(type, order).
TYPES = ["b1", "i1", "u1", "i2", "i4", "i8", "u2", "u4", "u8", "f2", "f4", "f8"]


def byte_order_applies(kind, order, *rest):
    """False for '>' on a one-byte type, which has no byte order (numpy writes '|')."""
    return order == "<" or not kind.endswith("1")


def with_byte_order(kind, order):
    return ("|" if kind.endswith("1") else order) + kind


# Set by ctest in the AddressSanitizer tree (tests/CMakeLists.txt): the same tests run
# there, each over every third case of its sweeps. The plain tree runs every case; the
# sanitized run is there to catch memory errors, and an oocrun process costs it 2-3x.
SANITIZED = os.environ.get("OOC_TEST_SANITIZED") == "1"


def thin(cases):
    """`cases` as a list: all of them, or every fifth (the first included) under ASan, where
    each oocrun costs ~10x more. 5 shares no factor with the sweeps' sizes (21 dtypes,
    7 shapes x 2 orders, 3 x 2, 4 versions), so the sample still walks every dimension."""
    cases = list(cases)
    return cases[::5] if SANITIZED else cases


# OOC_TEST_SWEEP=full: every sweep() runs its whole cross-product, as the suite did before
# 2026-12-04 (docs/decisions/2026-12-04-ci-time.md); by default each runs its pairs.
FULL_SWEEPS = os.environ.get("OOC_TEST_SWEEP") == "full"


def pairwise(*dimensions, valid=None):
    """Rows (one value from each dimension) in which every value of each dimension meets
    every value of each other dimension at least once: all pairs, so every dtype with
    every op, every op with every memory order, ... - the product of the two largest
    dimensions in rows, not of all of them. Only rows for which valid(*row) is true are
    used (a Fortran-order 1-d array is a C one: no such row); pairs that no valid row
    holds are not asked for. Greedy (each row takes the most pairs still missing, the
    first such in product order), so the same dimensions always give the same rows."""
    dimensions = [list(d) for d in dimensions]
    n = len(dimensions)
    candidates = []
    for row in itertools.product(*(range(len(d)) for d in dimensions)):
        if valid is None or valid(*(d[i] for d, i in zip(dimensions, row))):
            candidates.append((row, {(a, row[a], b, row[b]) for a in range(n) for b in range(a + 1, n)}))
    missing = set().union(*(pairs for _, pairs in candidates))
    rows = []
    while missing:
        row, pairs = max(candidates, key=lambda candidate: len(candidate[1] & missing))
        rows.append(tuple(d[i] for d, i in zip(dimensions, row)))
        missing -= pairs
    return rows


def sweep(*dimensions, valid=None):
    """The cases of a sweep over several dimensions (dtypes, shapes, orders, ops, ...):
    all pairs of values (pairwise), or the whole product with OOC_TEST_SWEEP=full. The
    pairs are what a one-dimension bug (a dtype's loader, an op's kernel) or a
    two-dimension one (an op on one dtype, one order along one axis) needs to show, at a
    fifth to a tenth of the product's oocrun runs. Under ASan, every fifth of those rows
    and the rows it takes to meet every value of every dimension once more (a memory error
    is in a code path, which one value reaches; each ASan oocrun costs 3x a plain one)."""
    if FULL_SWEEPS:
        return [row for row in itertools.product(*dimensions) if valid is None or valid(*row)]
    rows = pairwise(*dimensions, valid=valid)
    if not SANITIZED:
        return rows
    kept = rows[::5]
    # repr: a dimension's values may be lists (unhashable).
    def cells(row):
        return {(i, repr(value)) for i, value in enumerate(row)}
    missing = set().union(*map(cells, rows)) - set().union(*map(cells, kept))
    for row in rows:
        if missing & cells(row):
            kept.append(row)
            missing -= cells(row)
    return kept


def wait_until_signals_blocked(p, timeout=60):
    """Waits until process p blocks SIGINT, SIGTERM and SIGHUP, which oocrun does at the
    first code of its own it runs (.preinit_array, src/cli/signal_watch.cpp). A signal sent
    before, while the dynamic loader maps its libraries (0.05-0.1 s on a loaded machine),
    meets the default action and ends it with no word, as it would any program not yet
    started. Returns whether p got there before exiting."""
    wanted = (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGTERM - 1)) | (1 << (signal.SIGHUP - 1))
    deadline = time.monotonic() + timeout
    while p.poll() is None and time.monotonic() < deadline:
        try:
            with open(f"/proc/{p.pid}/status") as f:
                for line in f:
                    if line.startswith("SigBlk:") and int(line.split()[1], 16) & wanted == wanted:
                        return True
        except OSError:
            pass
        time.sleep(0.001)
    return False


def run(*args, check=True, environment=None):
    """Runs oocrun, with `environment` added to this process's; returns the
    CompletedProcess (text mode)."""
    proc = subprocess.run([OOCRUN, *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **environment} if environment else None)
    if check and proc.returncode != 0:
        raise AssertionError(f"oocrun {' '.join(map(str, args))} exited {proc.returncode}: {proc.stderr}")
    return proc


# oocrun's JSON is RFC 8259 JSON: JSON has no number for NaN and the infinities, so they
# are the strings "NaN", "Infinity" and "-Infinity" (README, --json).
NONFINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def _bare_constant(name):
    raise ValueError(f"not RFC 8259 JSON: bare {name} (a non-finite number must be a string)")


def strict_loads(text):
    """json.loads refusing what strict parsers (jq, RFC 8259) refuse: bare NaN, Infinity, -Infinity."""
    return json.loads(text, parse_constant=_bare_constant)


def json_value(value):
    """A JSON value with the strings "NaN", "Infinity", "-Infinity" read back as floats, in
    nested lists too (a result array)."""
    if isinstance(value, list):
        return [json_value(v) for v in value]
    if isinstance(value, str):
        if value not in NONFINITE:
            raise AssertionError(f"a number was expected, got the string {value!r}")
        return NONFINITE[value]
    return value


def loads(text):
    """oocrun's --json object, parsed strictly, with its numbers ("value", "edges") as floats
    where they are non-finite."""
    obj = strict_loads(text)
    for key in ("value", "edges"):
        if isinstance(obj, dict) and key in obj:
            obj[key] = json_value(obj[key])
    return obj


def run_json(*args, environment=None):
    proc = run(*args, "--json", "--quiet", environment=environment)
    return loads(proc.stdout)


def sample(dtype, shape, seed=0, nan=False):
    """Values that exercise a dtype: the whole integer range (so sums wrap), signed
    floats of mixed magnitude, booleans of both values."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64))
    if dt.kind == "b":
        flat = rng.integers(0, 2, n).astype(bool)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        flat = rng.integers(info.min, info.max, n, dtype=dt.newbyteorder("="), endpoint=True)
    else:
        scale = 100.0 if dt.itemsize == 2 else 1e6
        flat = rng.standard_normal(n) * rng.choice([1e-3, 1.0, scale], n)
        if nan and n > 3:
            flat[n // 3] = np.nan
    return flat.astype(dt).reshape(shape)


def npy_bytes(array, version=None):
    buf = io.BytesIO()
    if version is None:
        np.save(buf, array)
    else:
        np.lib.format.write_array(buf, np.asanyarray(array), version=version)
    return buf.getvalue()


def same_scalar(json_value, expected):
    """True if a JSON value is exactly numpy's scalar (NaN equals NaN)."""
    expected = np.asarray(expected)
    if isinstance(json_value, str):  # "NaN", "Infinity", "-Infinity"
        json_value = NONFINITE[json_value]
    got = np.asarray(json_value).astype(expected.dtype) if expected.dtype.kind != "b" else np.asarray(bool(json_value))
    if expected.dtype.kind == "f" and np.isnan(expected):
        return bool(np.isnan(got))
    return got.tobytes() == expected.tobytes()


def numpy_or_error(fn, *args, **kwargs):
    """fn(*args, **kwargs) as an array, numpy's warnings silenced, or the ValueError numpy raised."""
    import warnings
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return np.asarray(fn(*args, **kwargs))
        except ValueError as e:
            return e


def same_bits(got, expected):
    """Equal element for element, bit for bit for floats (so -0.0 != 0.0), NaN equal to NaN."""
    if got.dtype.kind != "f":
        return bool(np.array_equal(got, expected))
    uint = f"u{got.itemsize}"
    return bool(np.all((got.view(uint) == expected.view(uint)) | (np.isnan(got) & np.isnan(expected))))


# numpy's own SIMD code for transcendental functions (exp log log1p expm1 sin cos tanh, and
# power) differs between CPUs (AVX2, AVX-512 with SVML) by a few units in the last
# place; ooc's contract is to stay within this many of whichever path numpy takes.
TRANSCENDENTAL_ULP = 4
TRANSCENDENTAL = ("exp", "log", "log1p", "expm1", "sin", "cos", "tanh", "pow")

_AVX512_FEATURES = ["AVX512F", "AVX512CD", "AVX512_KNL", "AVX512_KNM", "AVX512_SKX", "AVX512_CLX", "AVX512_CNL",
                    "AVX512_ICL"]


def numpy_simd_paths():
    """[(name, environment)] for each SIMD path numpy can take on this CPU: its default,
    and with NPY_DISABLE_CPU_FEATURES turning AVX-512 off, then AVX2 too, where the CPU has
    them. numpy reads the variable at import, so each path is a fresh process (see
    numpy_in); ooc reads it too, to pick the lanes numpy's min/max loops compare in."""
    features = np.core._multiarray_umath.__cpu_features__
    paths = [("default", {})]
    avx512 = [f for f in _AVX512_FEATURES if features.get(f)]
    if avx512:
        paths.append(("without AVX-512", {"NPY_DISABLE_CPU_FEATURES": " ".join(avx512)}))
    if features.get("AVX2"):
        paths.append(("without AVX2", {"NPY_DISABLE_CPU_FEATURES": " ".join(avx512 + ["AVX2"])}))
    return paths


def numpy_in(environment, code, **arrays):
    """Runs `code` in a fresh numpy with `environment` added, the arrays bound to their
    names, and returns the value it assigns to `result` (anything np.save writes)."""
    import sys
    import textwrap
    with tempfile.TemporaryDirectory(prefix="ooc-numpy-") as tmp:
        for name, array in arrays.items():
            np.save(os.path.join(tmp, name + ".npy"), array)
        script = ("import os, warnings, numpy as np\nwarnings.simplefilter('ignore')\nnp.seterr(all='ignore')\n"
                  f"tmp = {tmp!r}\n"
                  + "".join(f"{n} = np.load(os.path.join(tmp, {n + '.npy'!r}))\n" for n in arrays)
                  + textwrap.dedent(code)
                  + "\nnp.save(os.path.join(tmp, 'result.npy'), np.asarray(result))\n")
        subprocess.run([sys.executable, "-c", script], check=True, env={**os.environ, **environment})
        return np.load(os.path.join(tmp, "result.npy"))


def units_apart(got, expected):
    """Distance in units in the last place between two float arrays of one dtype (NaN to
    NaN is 0, -0.0 to 0.0 is 1); integers and bools must be equal."""
    got, expected = np.asarray(got), np.asarray(expected)
    if expected.dtype.kind != "f":
        return np.where(got == expected, 0, np.iinfo(np.int64).max)
    signed = np.dtype(f"i{expected.itemsize}")
    g = got.astype(expected.dtype.newbyteorder("=")).view(signed).astype(np.int64)
    e = expected.astype(expected.dtype.newbyteorder("=")).view(signed).astype(np.int64)
    # Map the sign-magnitude bit patterns onto a line, so that -0.0 and 0.0 are one apart.
    g = np.where(g < 0, np.iinfo(signed).min - g, g)
    e = np.where(e < 0, np.iinfo(signed).min - e, e)
    distance = np.abs(g - e)
    both_nan = np.isnan(got) & np.isnan(expected)
    return np.where(both_nan, 0, np.where(np.isnan(got) | np.isnan(expected), np.iinfo(np.int64).max, distance))


class TempDir:
    def __init__(self):
        self._dir = tempfile.TemporaryDirectory(prefix="ooc-test-")
        self.path = self._dir.name

    def file(self, name):
        return os.path.join(self.path, name)

    def save(self, name, array, version=None):
        path = self.file(name)
        with open(path, "wb") as f:
            f.write(npy_bytes(array, version))
        return path

    def cleanup(self):
        self._dir.cleanup()


def mount_small_tmpfs(test, mountpoint, size="1m"):
    """Mounts a tmpfs of `size` at `mountpoint` (created) for the rest of `test`, or skips
    the test where mounting is not allowed."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        test.skipTest("needs root to mount a small tmpfs")
    os.mkdir(mountpoint)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", mountpoint], capture_output=True)
    if r.returncode != 0:
        test.skipTest(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    test.addCleanup(subprocess.run, ["umount", mountpoint], capture_output=True)
    return mountpoint


# ---- Nothing lost: helpers of the fault, power-cut and kill tests -----------------------

def leftovers(directory):
    """Temporaries and journals: the files ooc names with '.ooc-' in `directory`."""
    return sorted(n for n in os.listdir(directory) if ".ooc-" in n)


def file_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def h5_objects(path):
    """{name: (kind, dtype, shape, bytes, attributes)} of every object in an HDF5 file, the
    root group as "/": two files hold the same objects when these are equal."""
    import h5py
    out = {}

    def attributes(obj):
        return {k: np.asarray(v).tobytes() for k, v in obj.attrs.items()}

    with h5py.File(path, "r") as h:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                out[name] = ("dataset", obj.dtype.str, obj.shape, obj[()].tobytes(), attributes(obj))
            else:
                out[name] = ("group", None, None, None, attributes(obj))
        h.visititems(visit)
        out["/"] = ("group", None, None, None, attributes(h))
    return out

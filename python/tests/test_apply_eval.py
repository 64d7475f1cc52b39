"""ooc.apply (every oocrun apply op, in place too), ooc.eval and ooc.map_blocks."""
import os
import threading

import numpy as np
import pytest

import ooc
from conftest import DTYPES, leftovers, sample, save

# oocrun apply's operations and what numpy computes for them.
OPS = {
    "add:1": lambda x: np.add(x, 1), "add-one": lambda x: np.add(x, 1), "sub:2.5": lambda x: np.subtract(x, 2.5),
    "mul:3": lambda x: np.multiply(x, 3), "scale:0.5": lambda x: np.multiply(x, 0.5),
    "div:2": lambda x: np.divide(x, 2), "pow:2": lambda x: np.power(x, 2), "add:300": lambda x: np.add(x, 300),
    "neg": np.negative, "abs": np.absolute, "sqrt": np.sqrt, "exp": np.exp, "log": np.log, "log1p": np.log1p,
    "expm1": np.expm1, "sin": np.sin, "cos": np.cos, "tanh": np.tanh, "clip:0:1": lambda x: np.clip(x, 0, 1),
    "cast:int16": lambda x: x.astype("int16"), "cast:>f4": lambda x: x.astype(">f4"),
}
# The transcendental functions and pow are within 4 ulp of numpy on whichever SIMD path
# numpy takes on this CPU (README's contract); everything else is bit for bit.
TRANSCENDENTAL = {"exp", "log", "log1p", "expm1", "sin", "cos", "tanh", "pow"}


def ulp_tolerance(op, dtype):
    return 4 if op.split(":")[0] in TRANSCENDENTAL and dtype.kind == "f" else 0


def within_ulp(ours, theirs, ulps):
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    both_nan = np.isnan(ours) & np.isnan(theirs)
    with np.errstate(all="ignore"):
        close = np.abs(ours.astype(np.float64) - theirs.astype(np.float64)) <= ulps * np.abs(np.spacing(theirs))
    return bool(np.all(both_nan | close | (ours == theirs)))


@pytest.mark.parametrize("code", DTYPES)
def test_every_op_on_every_dtype(module_tmp, code):
    data = sample(code, (41, 5), seed=7)
    for byteorder, order in (("<", "C"), ("<", "F"), (">", "C"), (">", "F")):
        path = save(module_tmp, f"in_{code}{byteorder}{order}.npy", data, byteorder if data.itemsize > 1 else "=",
                    order)
        loaded = np.load(path)
        for op, reference in OPS.items():
            out = os.path.join(module_tmp, f"out_{code}{byteorder}{order}_{op.replace(':', '_')}.npy")
            try:
                with np.errstate(all="ignore"):
                    expected = reference(loaded)
            except TypeError:  # numpy refuses (negative of bool): so does ooc
                with pytest.raises(ValueError):
                    ooc.apply(op, path, out=out)
                assert not os.path.exists(out)
                continue
            result = ooc.apply(op, path, out=out)
            assert isinstance(result, ooc.Array) and result.path == out
            got = np.load(out)
            assert got.dtype == expected.dtype, (op, code)
            assert got.shape == expected.shape
            ulps = ulp_tolerance(op, expected.dtype)
            if ulps:
                assert within_ulp(got, expected, ulps), (op, code)
            else:
                assert got.tobytes() == np.ascontiguousarray(expected).tobytes() or \
                    np.array_equal(got, expected, equal_nan=True), (op, code)


@pytest.mark.parametrize("code", DTYPES)
def test_in_place_on_every_dtype_as_numpys_augmented_assignment(tmp, code):
    data = sample(code, (300, 3), seed=14)
    for byteorder, order in (("<", "C"), (">", "F")):
        path = save(tmp, f"x{byteorder}{order}.npy", data, byteorder if data.itemsize > 1 else "=", order)
        for op, constant in (("add:1", 1), ("mul:2.5", 2.5)):
            expected = np.load(path)
            try:
                if op.startswith("add"):
                    expected += constant
                else:
                    expected *= constant
            except TypeError:  # numpy refuses the cast back (same_kind): so does ooc, untouched
                with open(path, "rb") as f:
                    before = f.read()
                with pytest.raises(ValueError):
                    ooc.apply(op, path, inplace=True)
                with open(path, "rb") as f:
                    assert f.read() == before
                continue
            ooc.apply(op, path, inplace=True)
            got = np.load(path)
            assert got.dtype == expected.dtype and np.array_equal(got, expected), (op, code, byteorder, order)


def test_in_place_with_and_without_journal(tmp):
    data = sample("f8", (5000, 4))
    path = save(tmp, "x.npy", data)
    same = ooc.apply("add:1", path, inplace=True)
    assert same.path == path
    assert np.array_equal(np.load(path), data + 1)
    ooc.apply("add:1", ooc.open(path), inplace=True, journal=False, tile_bytes="64K")
    assert np.array_equal(np.load(path), (data + 1) + 1)
    assert leftovers(tmp) == ["x.npy"]
    with pytest.raises(ValueError, match="same_kind|cannot|cast"):
        ooc.apply("add:2.5", save(tmp, "ints.npy", np.arange(10, dtype="i4")), inplace=True)
    with pytest.raises(ValueError):
        ooc.apply("add:1", path)  # neither out nor inplace
    with pytest.raises(ValueError):
        ooc.apply("add:1", ooc.open(path)[::2], inplace=True)
    with pytest.raises(ValueError, match="input"):
        ooc.apply("add:1", path, out=path)


def test_eval(tmp):
    a_data, b_data = sample("f8", (3000, 3), 1), sample("f4", (3000, 3), 2)
    a, b = ooc.open(save(tmp, "a.npy", a_data)), save(tmp, "b.npy", b_data)
    c = ooc.eval("a * b + 1", a=a, b=b, out=f"{tmp}/c.npy")
    assert isinstance(c, ooc.Array)
    assert np.load(f"{tmp}/c.npy").tobytes() == (a_data * b_data + 1).tobytes()
    s = ooc.eval("sum(a * b)", a=a, b=b)
    assert isinstance(s, np.generic) and s.tobytes() == np.sum(a_data * b_data).tobytes()
    in_memory = ooc.eval("where(a > 0, a, 0) + sqrt(abs(b))", a=a, b=b)
    assert isinstance(in_memory, np.ndarray)
    assert np.array_equal(in_memory, np.where(a_data > 0, a_data, 0) + np.sqrt(np.abs(b_data)))
    column_means = ooc.mean(a, axis=0, out=f"{tmp}/m.npy")
    centred = ooc.eval("(a - m) * (a - m)", a=a, m=column_means)
    assert np.array_equal(centred, (a_data - a_data.mean(axis=0)) ** 2)
    selected = ooc.eval("a * 2", a=a[::10, 1])
    assert np.array_equal(selected, a_data[::10, 1] * 2)
    with pytest.raises(ValueError, match="column"):
        ooc.eval("2*a + ", a=a)
    with pytest.raises(ValueError):
        ooc.eval("a + c", a=a)  # unknown name
    with pytest.raises(ValueError, match="one value"):
        ooc.eval("sum(a)", a=a, out=f"{tmp}/no.npy")
    assert not os.path.exists(f"{tmp}/no.npy")


def test_map_blocks_without_out_gives_each_blocks_result_in_order(tmp):
    data = sample("f8", (10000, 4), 5)
    path = save(tmp, "a.npy", data)
    a = ooc.open(path)
    shapes, flags = [], []

    def look(x):
        shapes.append(x.shape)
        flags.append((x.flags.writeable, x.flags.owndata))
        return (x[:, 0] > 1.5).sum()

    parts = ooc.map_blocks(look, a, tile_bytes="64K")
    assert len(parts) > 1 and sum(parts) == np.count_nonzero(data[:, 0] > 1.5)
    assert all(s[1:] == (4,) for s in shapes) and sum(s[0] for s in shapes) == 10000
    assert set(flags) == {(False, False)}  # read-only views, not copies
    rows = ooc.map_blocks(lambda x: x[:, 1].copy(), a, tile_bytes="64K")
    assert np.array_equal(np.concatenate(rows), data[:, 1])  # in order
    same = ooc.map_blocks(lambda x: x, a, tile_bytes="64K")  # views are copied out of the run's buffers
    assert np.array_equal(np.concatenate(same), data)


def test_map_blocks_fortran_blocks_are_whole_columns(tmp):
    data = sample("i4", (300, 40), 6)
    path = save(tmp, "f.npy", data, order="F")
    blocks = ooc.map_blocks(lambda x: x.copy(), path, tile_bytes=4096)
    assert len(blocks) > 1
    assert all(b.shape[0] == 300 for b in blocks)
    assert np.array_equal(np.concatenate(blocks, axis=1), data)


def test_map_blocks_with_out(tmp):
    a_data, b_data = np.abs(sample("f8", (20000, 3), 8)), sample("f8", (20000, 3), 9)
    a, b = save(tmp, "a.npy", a_data), save(tmp, "b.npy", b_data)
    logs = ooc.map_blocks(np.log1p, ooc.open(a), out=f"{tmp}/log.npy", tile_bytes="64K")
    assert isinstance(logs, ooc.Array)
    assert np.array_equal(np.load(f"{tmp}/log.npy"), np.log1p(a_data))
    ooc.map_blocks(lambda x, y: x * y, a, b, out=f"{tmp}/o.npy", dtype="f4", tile_bytes="64K")
    out = np.load(f"{tmp}/o.npy")
    assert out.dtype == np.float32 and np.array_equal(out, (a_data * b_data).astype("f4"))
    ooc.map_blocks(lambda x: x[:, :1] * 2, a, out=f"{tmp}/first.npy", shape=(20000, 1))
    assert np.array_equal(np.load(f"{tmp}/first.npy"), a_data[:, :1] * 2)


def test_map_blocks_on_zero_d_and_empty_arrays(tmp):
    zero_d = save(tmp, "z.npy", np.array(3.5))
    assert ooc.map_blocks(lambda x: x * 2, zero_d) == [7.0]
    ooc.map_blocks(lambda x: x * 2, zero_d, out=f"{tmp}/z2.npy")
    assert np.load(f"{tmp}/z2.npy") == 7.0 and np.load(f"{tmp}/z2.npy").shape == ()
    empty = save(tmp, "e.npy", np.zeros((0, 4), dtype="u2"))
    assert ooc.map_blocks(lambda x: 1, empty) == []
    made = ooc.map_blocks(lambda x: x, empty, out=f"{tmp}/e2.npy")
    assert made.shape == (0, 4) and made.dtype == np.dtype("u2")


def test_map_blocks_refuses_a_result_of_the_wrong_shape(tmp):
    path = save(tmp, "a.npy", sample("f8", (5000, 2)))
    with pytest.raises(ValueError, match=r"block \d+ \(rows \d+:\d+ of axis 0\) gave shape \(3,\); expected \(1024, 2\)"):
        ooc.map_blocks(lambda x: np.zeros(3), path, out=f"{tmp}/o.npy", tile_bytes="16K")
    with pytest.raises(ValueError, match="does not cast"):
        ooc.map_blocks(lambda x: x, path, out=f"{tmp}/o.npy", dtype="i4")
    with pytest.raises(ZeroDivisionError):
        ooc.map_blocks(lambda x: 1 / 0, path, out=f"{tmp}/o.npy", tile_bytes="16K")
    with pytest.raises(ValueError, match="shape"):
        ooc.map_blocks(lambda x, y: x, path, save(tmp, "b.npy", np.zeros(3)))
    assert leftovers(tmp) == ["a.npy", "b.npy"]


def test_map_blocks_runs_on_several_threads(tmp):
    path = save(tmp, "a.npy", sample("f8", (8192 * 24,)))
    threads, running, most = set(), [0], [0]
    lock = threading.Lock()
    together = threading.Event()
    waited = [False]

    def rendezvous(x):
        # Each block waits (GIL released, as numpy's ufuncs release it) until a second
        # block is running beside it: that happens only if the run gives blocks to two
        # threads at once. No timing is assumed: on a loaded 2-core machine (CI compiles
        # the sanitized tree beside these tests) the second thread may take a while to be
        # scheduled; only the first block waits, for up to 60 s.
        with lock:
            threads.add(threading.get_ident())
            running[0] += 1
            most[0] = max(most[0], running[0])
            if running[0] >= 2:
                together.set()
            first = not waited[0]
            waited[0] = True
        if first:
            together.wait(60)
        with lock:
            running[0] -= 1
        return x.sum()

    parts = ooc.map_blocks(rendezvous, path, threads=2, tile_bytes=8192 * 8)
    assert len(parts) == 24
    assert together.is_set() and most[0] == 2 and len(threads) >= 2, (
        most[0], len(threads), os.sched_getaffinity(0), os.getloadavg())


def test_apply_and_eval_on_zero_d_and_empty_arrays(tmp):
    zero_d = save(tmp, "z.npy", np.array(7, dtype="u1"))
    out = ooc.apply("add:300", zero_d, out=f"{tmp}/z1.npy")
    expected = np.add(np.load(zero_d), 300)
    assert out.shape == () and np.load(f"{tmp}/z1.npy").dtype == expected.dtype and np.load(f"{tmp}/z1.npy") == expected
    assert ooc.eval("a * 2", a=zero_d) == 14
    empty = save(tmp, "e.npy", np.zeros((3, 0), dtype=">f4"), order="F")
    made = ooc.apply("sqrt", empty, out=f"{tmp}/e1.npy")
    assert made.shape == (3, 0) and made.dtype == np.dtype("f4")
    assert ooc.eval("sum(a)", a=empty) == 0 and ooc.eval("a + 1", a=empty).shape == (3, 0)


def test_map_blocks_views_of_buffers_and_direct_reads(tmp):
    data = sample("i8", (6000, 3), 12)
    path = save(tmp, "a.npy", data)
    a = ooc.open(path)
    for source, expected in ((a[::2], data[::2]), (a, data), (a[:, [2, 0]], data[:, [2, 0]])):
        for io in ("mmap", "direct"):
            blocks = ooc.map_blocks(lambda x: x, source, io=io, tile_bytes="16K")  # the run's own buffers, kept
            axis = 0 if source.order == "C" else source.ndim - 1
            assert np.array_equal(np.concatenate(blocks, axis=axis), expected), (source, io)


def test_outputs_into_hdf5(tmp):
    h5py = pytest.importorskip("h5py")
    data = sample("f4", (400, 5), 13)
    path = save(tmp, "a.npy", data)
    h5 = f"{tmp}/run.h5"
    ooc.apply("mul:2", path, out=f"{h5}:/results/doubled")
    ooc.sum(path, axis=0, out=f"{h5}:/results/colsums")
    ooc.eval("a + 1", a=f"{h5}:/results/doubled", out=f"{h5}:/plus_one")
    with pytest.raises(ValueError, match="already exists"):
        ooc.apply("mul:2", path, out=f"{h5}:/results/doubled")
    ooc.apply("mul:3", path, out=f"{h5}:/results/doubled", overwrite=True)
    with h5py.File(h5, "r") as f:
        assert np.array_equal(f["results/doubled"][...], data * 3)
        assert np.array_equal(f["results/colsums"][...], data.sum(axis=0))
        assert np.array_equal(f["plus_one"][...], data * 2 + 1)

"""Errors, Ctrl-C, the GIL, progress and keywords: ooc as a well-behaved Python caller."""
import _thread
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

import numpy as np
import pytest

import ooc
from conftest import leftovers, sample, save


def test_exception_types_carry_the_one_line_message(tmp):
    with pytest.raises(FileNotFoundError, match="missing.npy: no such file or directory"):
        ooc.open(f"{tmp}/missing.npy")
    with pytest.raises(FileNotFoundError):
        ooc.sum(f"{tmp}/missing.npy")
    path = save(tmp, "a.npy", np.arange(100.0))
    with pytest.raises(ValueError, match="unknown"):
        ooc.apply("frobnicate", path, out=f"{tmp}/o.npy")
    with pytest.raises(ValueError, match="axis 3 is out of bounds"):
        ooc.sum(path, axis=3)
    with pytest.raises(ValueError, match="io must be"):
        ooc.sum(path, io="fast")
    with pytest.raises(ValueError, match="tile_bytes"):
        ooc.sum(path, tile_bytes="lots")
    with pytest.raises(TypeError, match="unexpected keyword"):
        ooc.sum(path, thread=2)
    truncated = os.path.join(tmp, "short.npy")
    with open(path, "rb") as f, open(truncated, "wb") as g:
        g.write(f.read()[:300])
    with pytest.raises(ooc.Error, match="short.npy: ") as caught:
        ooc.sum(truncated)
    assert isinstance(caught.value, OSError) and "\n" not in str(caught.value)
    with pytest.raises(ooc.Error):
        ooc.open(save(tmp, "strings.npy", np.array(["x", "y"])))
    assert issubclass(ooc.Error, OSError) and ooc.Error.__module__ == "ooc"


@pytest.mark.skipif(os.geteuid() != 0, reason="drops to another user to be refused (root is never refused)")
def test_permission_error(tmp):
    path = save(tmp, "secret.npy", np.arange(10.0))
    os.chmod(path, 0o600)
    os.chmod(tmp, 0o755)
    code = textwrap.dedent(f"""
        import os, sys
        os.setgid(65534); os.setuid(65534)
        import ooc
        try:
            ooc.sum({path!r})
        except PermissionError as e:
            print("PermissionError", e)
        try:
            ooc.apply("add:1", ooc.open({path!r}.replace("secret", "missing")), out="/x.npy")
        except FileNotFoundError:
            print("FileNotFoundError")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ))
    if "No module named" in done.stderr:
        pytest.skip("the build tree is not readable by the unprivileged user")
    assert f"PermissionError {path}: permission denied" in done.stdout, done.stderr
    assert "FileNotFoundError" in done.stdout


@pytest.fixture(scope="module")
def slow_input(module_tmp):
    """An input whose in-place, journalled run takes a while at 64 KiB tiles: 1024 tiles,
    each with its journal record synced to disk (2.3 s for half as many here; a disk ten
    times faster still gives the run well over the 50 ms between the caller's polls)."""
    data = sample("f8", (8 << 20,), seed=11)
    return save(module_tmp, "slow.npy", data), data


def interrupt_after(seconds):
    timer = threading.Timer(seconds, _thread.interrupt_main)
    timer.start()
    return timer


def test_ctrl_c_cancels_an_output_run_and_leaves_nothing(tmp, slow_input):
    path, _ = slow_input
    # A slow function per block keeps the run going long enough to be interrupted.
    timer = interrupt_after(0.3)
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        ooc.map_blocks(lambda x: (time.sleep(0.01), x)[1], path, out=f"{tmp}/o.npy", tile_bytes="64K")
    latency = time.monotonic() - start - 0.3
    timer.join()
    assert latency < 0.2 + 0.3, latency  # 0.2 s asked; the margin is this shared machine's
    assert leftovers(tmp) == []


def test_ctrl_c_in_place_then_the_same_call_finishes_it(slow_input):
    _, data = slow_input
    directory = tempfile.mkdtemp(prefix="ooc-py-", dir="/tmp")  # a disk: the journal's syncs take time
    try:
        path = save(directory, "x.npy", data)

        def interrupt_at_a_quarter(done, total):
            if total and done >= total // 4:  # total is 0 until the run's first tile (the journal's set-up)
                _thread.interrupt_main()

        with pytest.raises(KeyboardInterrupt, match="the same run again finishes it"):
            ooc.apply("add:1", path, inplace=True, tile_bytes="64K", threads=1, progress=interrupt_at_a_quarter)
        assert leftovers(directory) == ["x.npy", "x.npy.ooc-journal"]
        with pytest.raises(ooc.Error, match="add:1 --in-place"):  # readers refuse a half-done array
            ooc.sum(path)
        ooc.apply("add:1", path, inplace=True, tile_bytes="64K")
        assert leftovers(directory) == ["x.npy"]
        assert np.array_equal(np.load(path), data + 1)  # every element exactly once
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def test_sigint_to_a_process_in_a_long_call(tmp, slow_input):
    path, _ = slow_input
    code = textwrap.dedent(f"""
        import sys, time, numpy as np, ooc
        print("started", flush=True)
        ooc.map_blocks(lambda x: (time.sleep(0.01), np.log1p(x))[1], {path!r}, out={tmp!r} + "/o.npy",
                       tile_bytes="64K")
        print("finished", flush=True)
    """)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline() == "started\n"
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert "KeyboardInterrupt" in err and "finished" not in out
    assert leftovers(tmp) == []


def test_the_gil_is_released_while_ooc_works(tmp):
    path = save(tmp, "big.npy", sample("f8", (4 << 20,)))
    counted = []

    def count():
        n = 0
        end = time.monotonic() + 10
        while not stop.is_set() and time.monotonic() < end:
            n += 1
        counted.append(n)

    stop = threading.Event()
    # How far the thread counts alone in a short while, then while ooc sums.
    counter = threading.Thread(target=count)
    counter.start()
    time.sleep(0.05)
    stop.set()
    counter.join()
    stop.clear()
    counter = threading.Thread(target=count)
    start = time.monotonic()
    counter.start()
    for _ in range(5):
        ooc.sum(path, threads=1, tile_bytes="64K")
    seconds = time.monotonic() - start
    stop.set()
    counter.join()
    # With the GIL held throughout, the thread would not count at all while ooc runs.
    assert counted[1] > counted[0] * (seconds / 0.05) * 0.1, (counted, seconds)


def test_calls_from_several_python_threads_at_once(tmp):
    paths = [save(tmp, f"a{i}.npy", sample("f8", (50000, 2), seed=i)) for i in range(4)]
    expected = [np.load(p).sum() for p in paths]
    results = {}

    def work(i):
        results[i] = [ooc.sum(paths[i], tile_bytes="64K") for _ in range(5)]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        assert all(r.tobytes() == expected[i].tobytes() for r in results[i])


def test_progress_callable_and_bar(tmp, capfd):
    path = save(tmp, "a.npy", sample("f8", (1 << 18,)))
    seen = []
    ooc.sum(path, tile_bytes="64K", progress=lambda done, total: seen.append((done, total)))
    assert seen and seen[-1] == (2 << 20, 2 << 20)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    ooc.apply("add:1", path, out=f"{tmp}/b.npy", progress=True)
    err = capfd.readouterr().err
    assert "100%" in err


def test_thread_counts_give_the_same_bits(tmp):
    data = sample("f2", (20000,))  # a float16 total still short of overflowing
    path = save(tmp, "h.npy", data)
    results = {ooc.sum(path, threads=t, tile_bytes=1 << 16).tobytes() for t in (1, 2, 5)}
    assert results == {np.sum(data).tobytes()}


def test_numpy_functions_call_the_methods(tmp):
    data = sample("i4", (300, 2))
    a = ooc.open(save(tmp, "a.npy", data))
    assert np.sum(a) == data.sum() and np.mean(a, axis=0).tobytes() == data.mean(axis=0).tobytes()
    with pytest.raises(ValueError, match="keepdims"):
        np.sum(a, keepdims=True)


def test_progress_uses_tqdm_where_installed(tmp, monkeypatch):
    bars = []

    class FakeTqdm:  # what ooc needs of tqdm.tqdm
        def __init__(self, total, initial, **kwargs):
            self.total, self.n, self.closed = total, initial, False
            bars.append(self)

        def update(self, n):
            self.n += n

        def close(self):
            self.closed = True

    fake = type(sys)("tqdm")
    fake.tqdm = FakeTqdm
    monkeypatch.setitem(sys.modules, "tqdm", fake)
    path = save(tmp, "a.npy", sample("f8", (1 << 16,)))
    ooc.sum(path, progress=True, tile_bytes="64K")
    assert len(bars) == 1 and bars[0].n == bars[0].total == 1 << 19 and bars[0].closed


def test_cmake_install_puts_the_package_where_python_finds_it(tmp):
    build = os.environ.get("OOC_BUILD_DIR")
    if not build:
        pytest.skip("OOC_BUILD_DIR names the build tree to install (ctest sets it)")
    prefix = os.path.join(tmp, "prefix")
    subprocess.run(["cmake", "--install", build, "--prefix", prefix], check=True, capture_output=True)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = os.path.join(prefix, "lib", version, "dist-packages")
    assert sorted(os.listdir(os.path.join(site, "ooc")))[:4] == ["__init__.py", "__init__.pyi", "_lazy.py",
                                                                    "_ooc" + sysconfig_suffix()]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = site
    done = subprocess.run([sys.executable, "-c", "import ooc, numpy as np; print(ooc.__file__, ooc.sum("
                           f"{save(tmp, 'a.npy', np.arange(10.0))!r}))"],
                          env=env, capture_output=True, text=True, check=True)
    assert done.stdout.split() == [os.path.join(site, "ooc", "__init__.py"), "45.0"]
    # The default prefix's folder is on Debian python3's own path: no PYTHONPATH needed.
    assert os.path.join("/usr/local/lib", version, "dist-packages") in sys.path or \
        not sys.executable.startswith("/usr/bin/")


def sysconfig_suffix():
    import sysconfig
    return sysconfig.get_config_var("EXT_SUFFIX")


def test_exception_types_follow_the_error_kind_not_its_words(tmp):
    """ooc.Error's kind (ooc::ErrorKind) picks the exception type, and is its `kind`."""
    path = save(tmp, "a.npy", np.arange(100.0))
    with pytest.raises(FileNotFoundError) as caught:
        ooc.sum(f"{tmp}/missing.npy")
    assert caught.value.kind == "not_found"
    with pytest.raises(ValueError) as caught:  # a usage error, naming the option as Python does
        ooc.sum(path, tile_bytes="12Q")
    assert caught.value.kind == "usage" and "tile_bytes: '12Q' is not a size" in str(caught.value)
    assert "--" not in str(caught.value)
    empty = save(tmp, "empty.npy", np.zeros(0))
    with pytest.raises(ValueError, match="zero-size array") as caught:  # numpy's own refusal
        ooc.min(empty)
    assert caught.value.kind == "value"
    bad = os.path.join(tmp, "bad.npy")
    with open(bad, "wb") as f:
        f.write(b"not an array, but long enough to be read as one")
    with pytest.raises(ooc.Error) as caught:
        ooc.sum(bad)
    assert caught.value.kind == "corrupt"
    out = save(tmp, "o.npy", np.arange(4.0))
    h5 = f"{tmp}/o.h5:/a"
    ooc.apply("add:1", out, out=h5)
    with pytest.raises(ValueError, match=r"dataset already exists \(overwrite replaces it\)") as caught:
        ooc.apply("add:1", out, out=h5)  # the library's words: no flag of oocrun's
    assert caught.value.kind == "usage"
    with pytest.raises(ValueError, match="ddof must not be negative"):
        ooc.std(path, ddof=-1)

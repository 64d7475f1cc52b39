"""oocrun on bad input: a clear error, and nothing lost.

The contract (DESIGN.md, "Contracts users will rely on" and "The command line"):

* exactly one line on stderr, ``oocrun: FILE: PROBLEM`` where a file is involved;
* exit 1 for runtime errors, 2 for usage errors (bad or missing arguments, unknown
  operations, ``--in-place`` where numpy's ``a += C`` would refuse);
* no crash: no signal exit, no core, no traceback / "terminate called" / "Aborted";
* nothing lost: no output under the final name, no ``.NAME.ooc-XXXXXXXXXXXXXXXX``
  temporary next to it, and the input's bytes untouched unless --in-place was asked
  for (and, for a refused --in-place, untouched as well).

Every bad input is tried with ``info``, ``reduce sum``, ``apply add-one -o OUT`` and
``apply add-one --in-place``.  Run as ``OOCRUN=build/oocrun python3 test_cli_errors.py``.
"""
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from ooctest import SANITIZED, mount_small_tmpfs, thin  # noqa: E402

RUN_TIMEOUT = 60      # seconds; every case here takes milliseconds
HANG_TIMEOUT = 3      # for inputs that could block open() (a FIFO)
NOBODY = 65534

# Text that means something crashed rather than reported.
CRASH_WORDS = ("Traceback", "terminate called", "Aborted", "core dumped", "Segmentation",
               "what():", "Assertion", "AddressSanitizer", "runtime error:", "Bus error")


def find_oocrun():
    path = os.environ.get("OOCRUN")
    if not path and os.environ.get("OOC_BUILD_DIR"):
        path = os.path.join(os.environ["OOC_BUILD_DIR"], "oocrun")
    return path


OOCRUN = find_oocrun()


def setUpModule():
    if not OOCRUN or not os.access(OOCRUN, os.X_OK):
        raise RuntimeError(f"set OOCRUN to the oocrun binary (got {OOCRUN!r})")


# ---------------------------------------------------------------------------------------
# Hand-made .npy files

def npy_file(header_text, data=b"", version=(1, 0), header_len=None):
    """A .npy file with the given header dict text, padded the way numpy pads it.

    header_len overrides the length field (to lie about it)."""
    major, minor = version
    preamble = 10 if major == 1 else 12
    text = header_text.encode("latin-1") if isinstance(header_text, str) else header_text
    body = text + b" " * ((64 - (preamble + len(text) + 1) % 64) % 64) + b"\n"
    length = len(body) if header_len is None else header_len
    fmt = "<H" if major == 1 else "<I"
    return b"\x93NUMPY" + bytes([major, minor]) + struct.pack(fmt, length) + body + data


GOOD_DICT = "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }"
GOOD_DATA = np.arange(3, dtype="<f8").tobytes()


def numpy_bytes(array):
    path = tempfile.mktemp(suffix=".npy")
    try:
        np.save(path, array)
        with open(path, "rb") as f:
            return f.read()
    finally:
        if os.path.exists(path):
            os.remove(path)


def write(dirpath, name, content):
    with open(os.path.join(dirpath, name), "wb") as f:
        f.write(content)
    return name


def builder_bytes(content_fn):
    def build(d):
        return write(d, "bad.npy", content_fn())
    return build


def build_missing(d):
    return "missing.npy"


def build_directory(d):
    os.mkdir(os.path.join(d, "dir.npy"))
    return "dir.npy"


def build_dangling_symlink(d):
    os.symlink("nowhere.npy", os.path.join(d, "link.npy"))
    return "link.npy"


def build_fifo(d):
    os.mkfifo(os.path.join(d, "fifo.npy"))
    return "fifo.npy"


def build_dev_null(d):
    return "/dev/null"


def build_npz(d):
    np.savez(os.path.join(d, "bad.npy"), a=np.arange(3))  # savez appends .npz
    os.rename(os.path.join(d, "bad.npy.npz"), os.path.join(d, "bad.npy"))
    return "bad.npy"


def build_header_too_large(d):
    # A version 2.0 header claiming 2 MiB (ooc's cap is 1 MiB) in a sparse 4 MiB file.
    name = write(d, "bad.npy", npy_file(GOOD_DICT, version=(2, 0), header_len=2 << 20))
    os.truncate(os.path.join(d, name), 4 << 20)
    return name


def truncated_numpy_file():
    content = numpy_bytes(np.arange(1000, dtype="<f8"))
    return content[:-8]  # one element short


def truncated_in_header():
    return numpy_bytes(np.arange(10, dtype="<f8"))[:100]


# name -> (builder, words the error line must contain, case-insensitively; a tuple: any of them)
BAD_INPUTS = {
    "missing_file": (build_missing, ["no such file"]),
    "directory": (build_directory, ["directory"]),
    "dangling_symlink": (build_dangling_symlink, ["no such file"]),
    "fifo": (build_fifo, ["regular file"]),
    "character_device": (build_dev_null, ["regular file"]),
    "empty_file": (builder_bytes(lambda: b""), [("not a .npy", "empty", "0 bytes")]),
    "five_bytes": (builder_bytes(lambda: b"\x93NUMP"), ["npy"]),
    "bad_magic": (builder_bytes(lambda: b"\x93NUMPZ" + npy_file(GOOD_DICT, GOOD_DATA)[6:]), [("magic", "not a .npy")]),
    "text_file": (builder_bytes(lambda: b"hello, world\n" * 20), [("magic", "not a .npy")]),
    "npz_archive": (build_npz, [("magic", "not a .npy")]),
    "version_4_0": (builder_bytes(lambda: npy_file(GOOD_DICT, GOOD_DATA, version=(4, 0))), ["version", "4.0"]),
    "version_1_1": (builder_bytes(lambda: npy_file(GOOD_DICT, GOOD_DATA, version=(1, 1))), ["version", "1.1"]),
    "version_0_0": (builder_bytes(lambda: npy_file(GOOD_DICT, GOOD_DATA, version=(0, 0))), ["version"]),
    "version_2_0_cut_preamble": (builder_bytes(lambda: b"\x93NUMPY\x02\x00\x10"), []),
    "header_length_past_eof_v1": (builder_bytes(lambda: npy_file(GOOD_DICT, GOOD_DATA, header_len=0xFFFF)),
                                  ["past the end"]),
    "header_length_past_eof_v2": (builder_bytes(
        lambda: npy_file(GOOD_DICT, GOOD_DATA, version=(2, 0), header_len=0xFFFFFFF0)), ["past the end"]),
    "header_too_large": (build_header_too_large, ["too large"]),
    "header_cut_short": (builder_bytes(truncated_in_header), []),
    "header_not_a_dict": (builder_bytes(lambda: npy_file("[1, 2, 3]", GOOD_DATA)), ["dict"]),
    "header_empty": (builder_bytes(lambda: npy_file("", GOOD_DATA)), []),
    "header_code_not_literal": (builder_bytes(lambda: npy_file(
        "{'descr': '<f8', 'fortran_order': False, 'shape': __import__('os').getpid()}", GOOD_DATA)), ["shape"]),
    "header_trailing_text": (builder_bytes(lambda: npy_file(GOOD_DICT + " junk", GOOD_DATA)), []),
    "header_not_ascii": (builder_bytes(lambda: npy_file(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), 'x\xe9': 1}", GOOD_DATA)), []),
    "header_nul_byte": (builder_bytes(lambda: npy_file(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (3,)}\0", GOOD_DATA)), []),
    "missing_key_descr": (builder_bytes(lambda: npy_file("{'fortran_order': False, 'shape': (3,), }", GOOD_DATA)),
                          ["descr"]),
    "missing_key_fortran_order": (builder_bytes(lambda: npy_file("{'descr': '<f8', 'shape': (3,), }", GOOD_DATA)),
                                  ["fortran_order"]),
    "missing_key_shape": (builder_bytes(lambda: npy_file("{'descr': '<f8', 'fortran_order': False, }", GOOD_DATA)),
                          ["shape"]),
    "extra_key": (builder_bytes(lambda: npy_file(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), 'extra': 1, }", GOOD_DATA)), ["extra"]),
    "repeated_key": (builder_bytes(lambda: npy_file(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), 'shape': (3,), }", GOOD_DATA)), ["repeat", "shape"]),
    "fortran_order_not_bool": (builder_bytes(lambda: npy_file(
        "{'descr': '<f8', 'fortran_order': 0, 'shape': (3,), }", GOOD_DATA)), ["fortran_order"]),
    # An object array: numpy would need pickle to read it.  Written by hand, never pickled.
    "object_dtype": (builder_bytes(lambda: npy_file(
        "{'descr': '|O', 'fortran_order': False, 'shape': (3,), }", b"\x80\x04N." + b"\0" * 20)), ["object"]),
    "structured_dtype": (builder_bytes(lambda: numpy_bytes(np.zeros(3, dtype=[("a", "<i4")]))), ["structured"]),
    "complex128_dtype": (builder_bytes(lambda: numpy_bytes(np.zeros(3, dtype=np.complex128))), ["<c16"]),
    "unicode_dtype": (builder_bytes(lambda: numpy_bytes(np.array(["ab", "c"]))), ["<u2"]),
    "bytes_dtype": (builder_bytes(lambda: numpy_bytes(np.array([b"ab", b"c"]))), ["|s2"]),
    "datetime_dtype": (builder_bytes(lambda: numpy_bytes(np.zeros(3, dtype="datetime64[s]"))), ["m8"]),
    "longdouble_dtype": (builder_bytes(lambda: numpy_bytes(np.zeros(3, dtype=np.longdouble))), ["dtype"]),
    "dtype_garbage": (builder_bytes(lambda: npy_file(
        "{'descr': 'hello', 'fortran_order': False, 'shape': (3,), }", GOOD_DATA)), ["hello"]),
    "negative_dimension": (builder_bytes(lambda: npy_file(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (-1,), }", GOOD_DATA)), ["negative"]),
    "dimension_overflows_int64": (builder_bytes(lambda: npy_file(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,), }", GOOD_DATA)), ["overflow"]),
    "shape_product_overflows": (builder_bytes(lambda: npy_file(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (9223372036854775807, 3), }", GOOD_DATA)),
        ["overflow"]),
    "shape_bytes_overflow": (builder_bytes(lambda: npy_file(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,), }", GOOD_DATA)), ["overflow"]),
    # A 0 dimension does not hide an overflow of the others: numpy ("array is too big")
    # multiplies the nonzero dimensions and the itemsize whatever the 0.
    "zero_dimension_first_hides_overflow": (builder_bytes(lambda: npy_file(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 9223372036854775807, 9223372036854775807), }")),
        ["(0, 9223372036854775807, 9223372036854775807) overflows"]),
    "zero_dimension_middle_hides_overflow": (builder_bytes(lambda: npy_file(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (9223372036854775807, 0, 9223372036854775807), }")),
        ["(9223372036854775807, 0, 9223372036854775807) overflows"]),
    "zero_dimension_hides_bytes_overflow": (builder_bytes(lambda: npy_file(
        "{'descr': '<f8', 'fortran_order': True, 'shape': (1152921504606846976, 0), }")), ["overflow"]),
    # numpy's NPY_MAXDIMS (np.load: "maximum supported dimension for an ndarray is 32, found 33")
    "more_than_32_dimensions": (builder_bytes(lambda: npy_file(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (%s), }" % ("1, " * 33), GOOD_DATA[:8])),
        ["maximum supported dimension for an ndarray is 32, found 33"]),
    "shape_not_a_tuple": (builder_bytes(lambda: npy_file(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (3), }", GOOD_DATA)), ["tuple"]),
    "shape_is_a_list": (builder_bytes(lambda: npy_file(
        "{'descr': '<f8', 'fortran_order': False, 'shape': [3], }", GOOD_DATA)), ["shape"]),
    "truncated_data": (builder_bytes(truncated_numpy_file), ["8000", "7992"]),
    "data_missing_entirely": (builder_bytes(lambda: numpy_bytes(np.arange(5, dtype="<i4"))[:128]), ["bytes"]),
}

COMMANDS = {
    "info": lambda f: ["info", f],
    "info_json": lambda f: ["info", f, "--json"],
    "reduce_sum": lambda f: ["reduce", "sum", f],
    "apply_out": lambda f: ["apply", "add-one", f, "-o", "out.npy"],
    "apply_in_place": lambda f: ["apply", "add-one", f, "--in-place"],
}

# Known library bugs, kept as expected failures (see the comments on each).
# (case, command) pairs known to fail; empty now that a FIFO input is refused at once
# (os::open_existing opens with O_NONBLOCK, then refuses anything but a regular file).
EXPECTED_FAILURES = set()


# ---------------------------------------------------------------------------------------
# Running oocrun and checking that nothing was lost

def snapshot(directory):
    """name -> what it is (sha256 for regular files), for everything in directory."""
    state = {}
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, directory)
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode):
                h = hashlib.sha256()
                with open(path, "rb") as f:
                    for block in iter(lambda: f.read(1 << 20), b""):
                        h.update(block)
                state[rel] = ("file", h.hexdigest(), stat.S_IMODE(st.st_mode))
            elif stat.S_ISLNK(st.st_mode):
                state[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                state[rel] = ("dir", stat.S_IMODE(st.st_mode))
            else:
                state[rel] = ("special", stat.S_IFMT(st.st_mode))
    return state


def run_oocrun(args, cwd, timeout=RUN_TIMEOUT, **popen):
    try:
        p = subprocess.run([OOCRUN, *args], cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=timeout, **popen)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"oocrun {' '.join(args)} hung for more than {timeout} s "
                             f"(stderr so far: {e.stderr!r})") from None
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def temporaries(directory):
    found = []
    for root, dirs, files in os.walk(directory):
        found += [os.path.join(root, n) for n in files if ".ooc-" in n]
    return found


class CliCase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="ooc-cli-errors-")
        self.addCleanup(self.remove_dir)

    def remove_dir(self):
        for root, dirs, _ in os.walk(self.dir):
            for d in dirs:
                try:
                    os.chmod(os.path.join(root, d), 0o755)
                except OSError:
                    pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def save(self, name, array):
        np.save(self.path(name), array)
        return name

    def assert_clean_failure(self, args, code, names=(), words=(), watch=(), timeout=RUN_TIMEOUT, **popen):
        """Run oocrun, expect exit `code` with one clean stderr line; check that nothing in
        self.dir (and the extra directories in `watch`) changed."""
        dirs = [self.dir, *watch]
        before = [snapshot(d) for d in dirs]
        rc, out, err = run_oocrun(args, self.dir, timeout=timeout, **popen)
        what = f"oocrun {' '.join(args)}"
        self.assertGreaterEqual(rc, 0, f"{what} was killed by signal {-rc}; stderr: {err!r}")
        self.assertEqual(rc, code, f"{what}: exit status; stderr: {err!r}")
        for word in CRASH_WORDS:
            self.assertNotIn(word, err, f"{what}: crash text on stderr")
        self.assertTrue(err.endswith("\n") and err.count("\n") == 1,
                        f"{what}: stderr should be exactly one line, got {err!r}")
        line = err.rstrip("\n")
        self.assertTrue(line.startswith("oocrun: "), f"{what}: {line!r}")
        for name in names:
            self.assertIn(f"{name}: ", line, f"{what}: the error should name {name}")
        for word in words:  # a tuple: any one of its spellings will do
            spellings = word if isinstance(word, tuple) else (word,)
            self.assertTrue(any(w.lower() in line.lower() for w in spellings),
                            f"{what}: the error should mention {' or '.join(map(repr, spellings))}: {line!r}")
        self.assertEqual(out, "", f"{what}: nothing belongs on stdout after an error")
        for d, old in zip(dirs, before):
            self.assertEqual(temporaries(d), [], f"{what}: temporaries left behind")
            self.assertEqual(snapshot(d), old, f"{what}: files in {d} changed (output or core left, "
                                              f"or input modified)")
        return line


# ---------------------------------------------------------------------------------------
# One test per bad input and command

class BadInputTest(CliCase):
    pass


def make_bad_input_test(case, command):
    builder, words = BAD_INPUTS[case]

    def test(self):
        name = builder(self.dir)
        args = COMMANDS[command](name)
        timeout = HANG_TIMEOUT if case == "fifo" else RUN_TIMEOUT
        self.assert_clean_failure(args, 1, names=[name], words=words, timeout=timeout)

    test.__doc__ = f"{case}: oocrun {' '.join(COMMANDS[command]('FILE'))}"
    if (case, command) in EXPECTED_FAILURES:
        test = unittest.expectedFailure(test)
    return test


for _case in BAD_INPUTS:
    for _command in COMMANDS:
        setattr(BadInputTest, f"test_{_case}__{_command}", make_bad_input_test(_case, _command))


# Every way np.dtype spells the dtypes ooc reads (names, numpy's other names, one-letter
# codes, descrs), with and without a byte order, and spellings numpy reads that ooc does
# not support, or that numpy refuses.
SUPPORTED_DESCRS = {"|b1", "|i1", "|u1", "<i2", "<i4", "<i8", "<u2", "<u4", "<u8", "<f2", "<f4", "<f8",
                    ">i2", ">i4", ">i8", ">u2", ">u4", ">u8", ">f2", ">f4", ">f8"}
DESCR_SPELLINGS = (
    [p + code for p in ("", "<", ">", "=", "|") for code in "?bBhHiIlLqQpPefd"]
    + [p + f"{k}{n}" for p in ("", "<", ">", "=", "|") for k in "biuf" for n in (1, 2, 4, 8, 16)]
    + ["bool", "bool_", "bool8", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
       "float16", "float32", "float64", "float", "double", "single", "half", "float_", "int", "int_", "intp",
       "int0", "intc", "long", "longlong", "short", "byte", "uint", "uintp", "uint0", "uintc", "ulong",
       "ulonglong", "ushort", "ubyte"]
    # numpy reads these but ooc has no such dtype, or numpy refuses them
    + ["O", "|O", "object", "c8", "<c16", "complex", "complex128", "U5", "<U5", "str", "S3", "|S3", "V8",
       "M8[s]", "<m8[ns]", "g", "<f16", "longdouble", "float128", "<float32", ">bool", "Float64", "u", "f3",
       "b0", "int128", "hello", "", " <f8", "f8 "])


class NpyDescrTest(CliCase):
    """A .npy header's descr is read as numpy's reader reads it (np.dtype(descr)): writers
    other than numpy write 'float64', '<d', '?', ... Once 'float64' was an "unsupported
    dtype"."""

    def write(self, name, descr):
        try:
            dtype = np.dtype(descr)
            data = np.arange(5).astype(dtype).tobytes() if dtype.kind in "biuf" else bytes(5 * dtype.itemsize)
        except (TypeError, ValueError):
            data = bytes(40)
        with open(self.path(name), "wb") as f:
            np.lib.format._write_array_header(f, {"descr": descr, "fortran_order": False, "shape": (5,)}, (1, 0))
            f.write(data)
        return name

    def test_every_spelling_numpy_reads_is_read_as_numpy_reads_it(self):
        seen = set()
        for i, descr in enumerate(thin(DESCR_SPELLINGS)):  # every fifth under ASan
            with self.subTest(descr=descr):
                name = self.write(f"d{i}.npy", descr)
                try:
                    expected = np.load(self.path(name))
                except Exception:  # numpy refuses the file (or would need pickle)
                    expected = None
                # Every spelling through info, which reads the header as every command does;
                # the values through reduce sum once per dtype, and a refusal by reduce too
                # for every fourth spelling (every bad header with every command: BadInputTest).
                if expected is not None and expected.dtype.str in SUPPORTED_DESCRS:
                    rc, out, err = run_oocrun(["info", name, "--json"], self.dir)
                    self.assertEqual(rc, 0, err)
                    self.assertEqual(json.loads(out)["dtype"], expected.dtype.str)
                    if expected.dtype.str not in seen:
                        rc, out, err = run_oocrun(["reduce", "sum", name, "--json"], self.dir)
                        self.assertEqual(rc, 0, err)
                        self.assertEqual(json.loads(out)["value"], np.sum(expected).item())
                    seen.add(expected.dtype.str)
                else:
                    for args in (["info", name], ["reduce", "sum", name])[:2 if i % 4 == 0 else 1]:
                        line = self.assert_clean_failure(args, 1, names=[name])
                        self.assertRegex(line.lower(), "dtype|object|header")
        if not SANITIZED:
            self.assertEqual(seen, SUPPORTED_DESCRS)


class ZeroDimensionOverflowTest(CliCase):
    def test_axis_reductions_refuse_the_shape_at_once(self):
        """Once a 2**63-element result was allocated (std::bad_alloc, no file name, minutes
        to exit) or its element count wrapped."""
        with open(self.path("z2.npy"), "wb") as f:
            f.write(npy_file("{'descr': '<f8', 'fortran_order': False, "
                             "'shape': (9223372036854775807, 0, 9223372036854775807), }"))
        for args in (["reduce", "max", "z2.npy", "--axis", "2", "--json"],
                     ["reduce", "sum", "z2.npy", "--axis", "1", "--json"],
                     ["reduce", "sum", "z2.npy", "--axis", "0", "-o", "out.npy"]):
            with self.subTest(args=args):
                start = time.monotonic()
                self.assert_clean_failure(args, 1, names=["z2.npy"], words=["overflows"], timeout=20)
                self.assertLess(time.monotonic() - start, 10)

    def test_the_largest_empty_shapes_numpy_makes_still_work(self):
        # (0, 2**60 - 1) float64: the nonzero dimension times 8 fits int64, as numpy's does.
        with open(self.path("e.npy"), "wb") as f:
            f.write(npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (0, 1152921504606846975), }"))
        rc, out, err = run_oocrun(["info", "e.npy", "--json"], self.dir)
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["shape"], [0, 1152921504606846975])
        rc, out, err = run_oocrun(["reduce", "sum", "e.npy", "--json"], self.dir)
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["value"], 0.0)


class ZeroSizeReductionTest(CliCase):
    def test_min_and_max_of_an_empty_array(self):
        for dtype in ("<f8", "<i4", "|u1", "|b1"):
            for shape in ((0,), (3, 0)):
                for op in ("min", "max"):
                    with self.subTest(dtype=dtype, shape=shape, op=op):
                        name = self.save("empty.npy", np.zeros(shape, dtype=dtype))
                        self.assert_clean_failure(["reduce", op, name], 1, names=[name], words=["zero-size"])
                        self.assert_clean_failure(["reduce", op, name, "--json"], 1, names=[name],
                                                  words=["zero-size"])

    def test_sum_and_mean_of_an_empty_array_still_work(self):
        name = self.save("empty.npy", np.zeros((0,), dtype="<f8"))
        rc, out, err = run_oocrun(["reduce", "sum", name, "--json"], self.dir)
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["value"], 0.0)
        rc, out, err = run_oocrun(["reduce", "mean", name, "--json"], self.dir)
        self.assertEqual(rc, 0, err)
        # numpy warns too (RuntimeWarning); with --json the warning is in the object
        self.assertIn("mean of an empty array", json.loads(out)["warning"])
        self.assertEqual(err, "")
        rc, out, err = run_oocrun(["reduce", "mean", name], self.dir)
        self.assertEqual(rc, 0, err)
        self.assertIn("mean of an empty array", err)


# ---------------------------------------------------------------------------------------
# Usage errors: exit 2, one line, nothing touched

class UsageErrorTest(CliCase):
    def setUp(self):
        super().setUp()
        self.good = self.save("good.npy", np.arange(10, dtype="<i4"))

    def usage(self, *args, names=(), words=()):
        return self.assert_clean_failure(list(args), 2, names=names, words=words)

    def test_no_subcommand(self):
        self.usage()

    def test_only_options(self):
        self.usage("--threads", "2")

    def test_unknown_subcommand(self):
        self.usage("frobnicate", self.good)

    # The word oocrun did not understand is named, with the commands it knows.
    def test_unknown_subcommand_is_named(self):
        self.usage("frobnicate", self.good, words=["frobnicate"])

    def test_unknown_option(self):
        self.usage("info", self.good, "--frobnicate", words=["--frobnicate"])

    def test_extra_argument(self):
        self.usage("info", self.good, "other.npy", words=["other.npy"])

    def test_info_without_array(self):
        self.usage("info", words=["ARRAY"])

    def test_reduce_without_array(self):
        self.usage("reduce", "sum", words=["ARRAY"])

    def test_apply_without_op(self):
        self.usage("apply", words=["OP"])

    def test_unknown_elementwise_op(self):
        self.usage("apply", "frobnicate", self.good, "-o", "out.npy", words=["frobnicate"])

    def test_unknown_elementwise_op_in_place(self):
        self.usage("apply", "frobnicate", self.good, "--in-place", words=["frobnicate"])

    def test_unknown_reduction(self):
        self.usage("reduce", "frobnicate", self.good, words=["frobnicate"])

    def test_reduction_name_is_case_sensitive(self):
        self.usage("reduce", "SUM", self.good, words=["SUM"])

    def test_apply_without_output_or_in_place(self):
        self.usage("apply", "add-one", self.good, words=["-o"])

    def test_output_together_with_in_place(self):
        self.usage("apply", "add-one", self.good, "-o", "out.npy", "--in-place", words=["in-place"])

    def test_no_journal_without_in_place(self):
        self.usage("apply", "add-one", self.good, "-o", "out.npy", "--no-journal", words=["--no-journal", "--in-place"])

    def test_tile_bytes_with_bad_unit(self):
        self.usage("reduce", "sum", self.good, "--tile-bytes", "12Q", words=["--tile-bytes", "12Q"])
        self.usage("apply", "add-one", self.good, "-o", "out.npy", "--tile-bytes", "12Q", words=["12Q"])

    # The leaves that parse text (a dtype, a constant, a size) throw a UsageError naming no
    # file; oocrun says which option or operation the text came from, and exits 2.
    def test_leaf_errors_say_where_the_text_came_from(self):
        self.usage("reduce", "histogram", self.good, "--range", "1:x", words=["--range: 'x' is not a number"])
        self.usage("apply", "cast:complex64", self.good, "-o", "out.npy",
                   words=["operation 'cast:complex64': unsupported dtype 'complex64'", "(known: bool"])
        self.usage("apply", "add:0x10", self.good, "-o", "out.npy", words=["operation 'add:0x10': '0x10' is not a number"])
        self.usage("eval", "1.5.2+a", f"a={self.good}", words=["bad number: '1.5.2' is not a number", "column 1"])
        text = os.path.join(self.dir, "t.csv")
        with open(text, "w") as f:
            f.write("1,2\n")
        self.usage("import", text, "-o", "out.npy", "--dtype", "complex", words=["--dtype: unsupported dtype 'complex'"])
        for columns in ("0,x", "99999999999", "1x"):
            self.usage("import", text, "-o", "out.npy", "--columns", columns,
                       words=[f"--columns '{columns}': expected column numbers"])

    def test_tile_bytes_zero(self):
        self.usage("reduce", "sum", self.good, "--tile-bytes", "0", words=["--tile-bytes"])

    def test_tile_bytes_empty(self):
        self.usage("reduce", "sum", self.good, "--tile-bytes", "", words=["--tile-bytes"])

    def test_tile_bytes_negative(self):
        self.usage("reduce", "sum", self.good, "--tile-bytes=-4M", words=["--tile-bytes"])

    def test_tile_bytes_too_large(self):
        self.usage("reduce", "sum", self.good, "--tile-bytes", "99999999999T", words=["too large"])

    def test_tile_bytes_missing_value(self):
        self.usage("reduce", "sum", self.good, "--tile-bytes", words=["--tile-bytes"])

    def test_threads_zero(self):
        self.usage("reduce", "sum", self.good, "--threads", "0", words=["--threads"])
        self.usage("apply", "add-one", self.good, "-o", "out.npy", "--threads", "0", words=["--threads"])

    def test_threads_negative(self):
        self.usage("reduce", "sum", self.good, "--threads", "-1", words=["--threads"])

    def test_threads_not_a_number(self):
        self.usage("reduce", "sum", self.good, "--threads", "abc", words=["--threads"])

    # A bad --threads says what range is allowed, in a line a person reads.
    def test_threads_zero_message_is_readable(self):
        line = self.usage("reduce", "sum", self.good, "--threads", "0")
        self.assertLess(len(line), 160, line)
        self.assertNotIn("not in range 0", line)

    def test_prefetch_negative(self):
        self.usage("reduce", "sum", self.good, "--prefetch", "-1", words=["--prefetch"])

    def test_add_without_constant(self):
        self.usage("apply", "add:", self.good, "-o", "out.npy", words=["add:"])
        self.usage("apply", "add:", self.good, "--in-place", words=["add:"])

    def test_add_with_non_number(self):
        self.usage("apply", "add:abc", self.good, "-o", "out.npy", words=["abc"])
        self.usage("apply", "add:abc", self.good, "--in-place", words=["abc"])

    def test_scale_without_constant(self):
        self.usage("apply", "scale:", self.good, "-o", "out.npy", words=["scale:"])

    def test_add_one_with_constant(self):
        self.usage("apply", "add-one:3", self.good, "-o", "out.npy")

    def test_output_is_the_input(self):
        self.usage("apply", "add-one", self.good, "-o", self.good, names=[self.good], words=["in-place"])

    def test_output_is_the_input_by_another_spelling(self):
        self.usage("apply", "add-one", self.good, "-o", "./" + self.good, names=["./" + self.good])
        self.usage("apply", "add-one", self.good, "-o", self.path(self.good), names=[self.path(self.good)])

    def test_output_is_a_symlink_to_the_input(self):
        os.symlink(self.good, self.path("link.npy"))
        self.usage("apply", "add-one", self.good, "-o", "link.npy", names=["link.npy"])

    def test_output_is_a_hard_link_to_the_input(self):
        os.link(self.path(self.good), self.path("hard.npy"))
        self.usage("apply", "add-one", self.good, "-o", "hard.npy", names=["hard.npy"])

    def test_usage_errors_ignore_quiet(self):
        self.usage("apply", "frobnicate", self.good, "-o", "out.npy", "--quiet")

    def test_unbalanced_brackets_in_a_selection_are_named(self):
        """'X.npy[:, [2, 5]' once said "X.npy[:, : no such file or directory"."""
        self.save("m.npy", np.ones((4, 6)))
        cases = [("m.npy[:, [2, 5]", "the '[' at column 1 is never closed"),
                 ("m.npy[1]]", "the ']' at column 4 closes no '['"),
                 ("m.npy[[1, 2]", "the '[' at column 1 is never closed"),
                 ("m.npy[:, [2, 5", "the '[' at column 1 is never closed"),
                 ("m.npy[[0, 1]]]", "the ']' at column 9 closes no '['")]
        for spec, words in cases:
            for args in (["info", spec], ["reduce", "sum", spec], ["apply", "add-one", spec, "-o", "out.npy"],
                         ["eval", "a * 2", f"a={spec}"]):
                with self.subTest(args=args):
                    self.usage(*args, names=["m.npy"], words=["unbalanced brackets", words])

    def test_unbalanced_brackets_are_named_before_a_missing_file_is(self):
        for spec in ("missing.npy[:, [2", "missing.h5:/x[1]]"):
            with self.subTest(spec=spec):
                self.usage("reduce", "sum", spec, names=[spec.split("[")[0]], words=["unbalanced brackets"])

    def test_an_empty_selection_is_a_usage_error_as_pythons_x_brackets_is_a_syntax_error(self):
        for spec in (f"{self.good}[]", f"{self.good}[ ]"):
            for args in (["info", spec], ["reduce", "sum", spec], ["apply", "add-one", spec, "-o", "out.npy"],
                         ["eval", "a * 2", f"a={spec}"]):
                with self.subTest(args=args):
                    self.usage(*args, names=[self.good], words=["empty selection"])

    def test_usage_error_on_a_missing_file_still_one_line(self):
        # Argument errors are found before the file is opened; either way: one line.
        self.assert_clean_failure(["apply", "frobnicate", "missing.npy", "-o", "out.npy"], 2)


class InPlaceRefusalTest(CliCase):
    """--in-place where numpy's `a += C` (or `a *= C`) refuses: exit 2, file byte-identical."""

    CASES = [
        ("add:2.5", "<i4", lambda a: a.__iadd__(2.5)),
        ("add-one", "|b1", lambda a: a.__iadd__(1)),
        ("scale:0.5", "<i8", lambda a: a.__imul__(0.5)),
        ("add:2.5", "|u1", lambda a: a.__iadd__(2.5)),
        ("add:1.5", ">i2", lambda a: a.__iadd__(1.5)),
        ("add:2", "|b1", lambda a: a.__iadd__(2)),
    ]

    def test_in_place_refusals_leave_the_file_byte_identical(self):
        for op, dtype, numpy_op in self.CASES:
            with self.subTest(op=op, dtype=dtype):
                a = (np.arange(100) % 7).astype(dtype)
                with self.assertRaises(TypeError, msg="numpy refuses this too"):
                    numpy_op(a.copy())
                name = self.save(f"a{dtype[1:]}.npy", a)
                with open(self.path(name), "rb") as f:
                    original = f.read()
                stat_before = os.stat(self.path(name))
                self.assert_clean_failure(["apply", op, name, "--in-place"], 2, names=[name])
                with open(self.path(name), "rb") as f:
                    self.assertEqual(f.read(), original)
                self.assertEqual(os.stat(self.path(name)).st_mtime_ns, stat_before.st_mtime_ns,
                                 "a refused --in-place must not even touch the file")

    def test_refused_in_place_with_json_prints_nothing(self):
        name = self.save("b.npy", np.ones(4, dtype=bool))
        self.assert_clean_failure(["apply", "add-one", name, "--in-place", "--json"], 2, names=[name])


# ---------------------------------------------------------------------------------------
# Output problems: exit 1, and neither output nor temporary appears

def can_run_as_nobody(oocrun):
    try:
        p = subprocess.run([oocrun, "--help"], capture_output=True, user=NOBODY, group=NOBODY,
                           extra_groups=[], timeout=RUN_TIMEOUT)
        return p.returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


class OutputErrorTest(CliCase):
    def setUp(self):
        super().setUp()
        self.good = self.save("good.npy", np.arange(1000, dtype="<f8"))

    def test_output_directory_does_not_exist(self):
        out = os.path.join("no-such-dir", "out.npy")
        self.assert_clean_failure(["apply", "add-one", self.good, "-o", out], 1, names=[out],
                                  words=["no such file"])

    def test_output_directory_does_not_exist_absolute(self):
        out = self.path("no/such/dir/out.npy")
        self.assert_clean_failure(["apply", "add-one", self.good, "-o", out], 1, names=[out])

    def test_output_parent_is_a_file(self):
        out = os.path.join(self.good, "out.npy")
        self.assert_clean_failure(["apply", "add-one", self.good, "-o", out], 1, names=[out])

    def test_output_is_an_existing_directory(self):
        os.mkdir(self.path("out.npy"))
        self.assert_clean_failure(["apply", "add-one", self.good, "-o", "out.npy"], 1, names=["out.npy"],
                                  words=["directory"])

    def test_an_output_is_never_put_in_place_of_a_device_fifo_or_socket(self):
        # The rename that puts a finished output in place would replace the node (as
        # root, `-o /dev/null` would leave a regular file there for every program).
        os.mkfifo(self.path("fifo.npy"))
        nodes = ["fifo.npy"]
        try:
            os.mknod(self.path("null.npy"), 0o666 | stat.S_IFCHR, os.makedev(1, 3))
            nodes.append("null.npy")
        except PermissionError:
            pass  # not root: the FIFO stands for them all
        os.symlink("fifo.npy", self.path("to_fifo.npy"))
        import socket
        sock = socket.socket(socket.AF_UNIX)
        self.addCleanup(sock.close)
        sock.bind(self.path("sock.npy"))
        for out in nodes + ["to_fifo.npy", "sock.npy"]:
            for args in (["apply", "add-one", self.good, "-o", out], ["eval", "a * 2", f"a={self.good}", "-o", out],
                         ["reduce", "sum", "m.npy", "--axis", "0", "-o", out],
                         ["apply", "add-one", self.good, "-o", out + ":/x"]):
                if args[2] == "m.npy" and not os.path.exists(self.path("m.npy")):
                    self.save("m.npy", np.ones((4, 3)))
                self.assert_clean_failure(args, 2, names=[out], words=["not a regular file"], timeout=HANG_TIMEOUT)
        for node in nodes:
            self.assertFalse(stat.S_ISREG(os.lstat(self.path(node)).st_mode))

    def test_an_output_named_by_a_symbolic_link_is_written_through_it_as_numpy_does(self):
        self.save("target.npy", np.zeros(3))
        os.symlink("target.npy", self.path("link.npy"))
        os.mkdir(self.path("sub"))
        os.symlink(os.path.join("..", "new.npy"), self.path("sub/dangling.npy"))  # relative to its own directory
        for link, target in (("link.npy", "target.npy"), ("sub/dangling.npy", "new.npy")):
            rc, _, err = run_oocrun(["apply", "add-one", self.good, "-o", link, "--quiet"], self.dir)
            self.assertEqual(rc, 0, err)
            self.assertTrue(os.path.islink(self.path(link)))
            np.testing.assert_array_equal(np.load(self.path(target)), np.arange(1000.0) + 1)
        self.assertEqual(temporaries(self.dir), [])
        self.assertEqual(temporaries(self.path("sub")), [])

    def test_output_with_trailing_slash(self):
        self.assert_clean_failure(["apply", "add-one", self.good, "-o", "out.npy/"], 2, names=["out.npy/"])

    def test_outputs_that_are_neither_npy_files_nor_hdf5_datasets_are_refused(self):
        """`-o /dev/stdout` once failed on /proc/self/fd/pipe:[...], `-o -` made a file
        named '-', `-o Z.txt` wrote a .npy under that name."""
        self.save("m.npy", np.ones((4, 3)))
        for out in ("/dev/stdout", "-", "Z.txt", "out.h5", "out", "out.npy.bak", "/dev/null", "/proc/self/fd/1"):
            for args in (["apply", "add-one", self.good, "-o", out], ["eval", "a * 2", f"a={self.good}", "-o", out],
                         ["reduce", "sum", "m.npy", "--axis", "0", "-o", out],
                         ["reduce", "sum", "m.npy", "--axis", "0", "--json", "-o", out]):
                with self.subTest(args=args):
                    self.assert_clean_failure(args, 2, names=[out], words=[".npy", "file.h5:/dataset"])

    def test_existing_output_survives_a_failed_run(self):
        old = self.save("out.npy", np.full(5, 7.0))
        write(self.dir, "bad.npy", truncated_numpy_file())
        self.assert_clean_failure(["apply", "add-one", "bad.npy", "-o", old], 1, names=["bad.npy"])
        np.testing.assert_array_equal(np.load(self.path(old)), np.full(5, 7.0))

    def test_existing_output_survives_a_usage_error(self):
        old = self.save("out.npy", np.full(5, 7.0))
        self.assert_clean_failure(["apply", "add:abc", self.good, "-o", old], 2)
        np.testing.assert_array_equal(np.load(self.path(old)), np.full(5, 7.0))

    def test_output_in_read_only_directory(self):
        ro = self.path("ro")
        os.mkdir(ro)
        out = os.path.join("ro", "out.npy")
        popen = {}
        if os.geteuid() == 0:
            # root ignores directory permissions: run oocrun as nobody instead, if we can.
            os.chmod(self.dir, 0o755)
            os.chmod(self.path(self.good), 0o644)
            if not can_run_as_nobody(OOCRUN):
                self.skipTest("running as root, which writes into read-only directories regardless, "
                              "and oocrun cannot be run as user nobody here (binary not reachable)")
            popen = dict(user=NOBODY, group=NOBODY, extra_groups=[])
        os.chmod(ro, 0o555)
        probe = subprocess.run(["sh", "-c", f"touch {ro}/probe"], capture_output=True, **popen)
        if probe.returncode == 0:
            os.remove(os.path.join(ro, "probe"))
            self.skipTest("the read-only directory is writable for this user (root or capabilities "
                          "ignore permissions), so the refusal cannot be observed")
        self.assert_clean_failure(["apply", "add-one", self.good, "-o", out], 1, names=[out],
                                  words=["permission denied"], **popen)

    def test_in_place_in_a_read_only_directory_says_the_journal_cannot_be_made(self):
        ro = self.path("ro")
        os.mkdir(ro)
        array = os.path.join("ro", "a.npy")
        np.save(self.path(array), np.arange(1000.0))
        popen = {}
        if os.geteuid() == 0:  # root ignores directory permissions: run oocrun as nobody
            os.chmod(self.dir, 0o755)
            if not can_run_as_nobody(OOCRUN):
                self.skipTest("running as root, and oocrun cannot be run as user nobody here")
            popen = dict(user=NOBODY, group=NOBODY, extra_groups=[])
        os.chmod(self.path(array), 0o666)  # the array itself may be rewritten
        os.chmod(ro, 0o555)
        probe = subprocess.run(["sh", "-c", f"touch {ro}/probe"], capture_output=True, **popen)
        if probe.returncode == 0:
            os.remove(os.path.join(ro, "probe"))
            self.skipTest("the read-only directory is writable for this user")
        self.assert_clean_failure(["apply", "add-one", array, "--in-place"], 1, names=[array + ".ooc-journal"],
                                  words=["cannot create the in-place journal: permission denied",
                                         "--no-journal runs in place without one"], **popen)
        rc, out, err = run_oocrun(["apply", "add-one", array, "--in-place", "--no-journal", "--quiet"],
                                  self.dir, **popen)
        self.assertEqual(rc, 0, err)
        np.testing.assert_array_equal(np.load(self.path(array)), np.arange(1000.0) + 1)

    def test_unreadable_input_and_read_only_input_in_place(self):
        popen = {}
        if os.geteuid() == 0:
            os.chmod(self.dir, 0o755)
            if not can_run_as_nobody(OOCRUN):
                self.skipTest("running as root, which reads and writes files regardless of their "
                              "permissions, and oocrun cannot be run as user nobody here")
            popen = dict(user=NOBODY, group=NOBODY, extra_groups=[])
            # The output directory must be writable by nobody for the -o case.
            os.chmod(self.dir, 0o777)
        secret = self.save("secret.npy", np.arange(5.0))
        os.chmod(self.path(secret), 0o000)
        for args in (["info", secret], ["reduce", "sum", secret], ["apply", "add-one", secret, "-o", "out.npy"]):
            with self.subTest(args=args):
                self.assert_clean_failure(args, 1, names=[secret], words=["permission denied"], **popen)
        os.chmod(self.path(secret), 0o444)
        self.assert_clean_failure(["apply", "add-one", secret, "--in-place"], 1, names=[secret],
                                  words=["permission denied"], **popen)

    def test_output_filesystem_full(self):
        """Running out of disk is an error before work starts, with nothing left behind."""
        mnt = mount_small_tmpfs(self, self.path("small"))
        big = self.save("big.npy", np.zeros(512 * 1024, dtype="<f8"))  # 4 MiB into 1 MiB
        out = os.path.join("small", "out.npy")
        # The sizes: header and data needed, and what the tmpfs has free.
        line = self.assert_clean_failure(["apply", "add-one", big, "-o", out], 1, names=[out],
                                         words=["disk space", "needs 4.19 MB (4194432 bytes)", "free"], watch=[mnt])
        self.assertRegex(line, r", \d+(\.\d\d [kM]B \(\d+ bytes\)| bytes) free$")
        # What the tmpfs had free before (1 MiB less the header's page), measured before
        # any block was taken: not the 0 left after a failing posix_fallocate filled it.
        free = int(re.search(r"(\d+) bytes\)? free$", line).group(1))
        self.assertGreater(free, 900 * 1024, line)

    def test_newline_in_file_name_keeps_the_error_on_one_line(self):
        self.assert_clean_failure(["info", "a\nb.npy"], 1, words=["no such file"])
        self.assert_clean_failure(["apply", "add-one", self.good, "-o", "x/a\nb.npy"], 1)

    def test_errors_ignore_quiet(self):
        self.assert_clean_failure(["reduce", "sum", "missing.npy", "--quiet"], 1, names=["missing.npy"])


class InterruptTest(CliCase):
    # Ctrl-C during apply -o cancels the pipeline; the temporary is removed and
    # oocrun exits 130 with one line saying no output was written.
    def test_interrupted_apply_leaves_no_temporary(self):
        # A sparse 256 MiB input: reading it costs nothing, writing the output ~1 s.
        m = np.lib.format.open_memmap(self.path("big.npy"), mode="w+", dtype="<f8", shape=(32 << 20,))
        del m
        before = snapshot(self.dir)
        p = subprocess.Popen([OOCRUN, "apply", "add-one", "big.npy", "-o", "out.npy", "--threads", "1",
                              "--tile-bytes", "1M"], cwd=self.dir, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + RUN_TIMEOUT
            while not temporaries(self.dir) and p.poll() is None and time.monotonic() < deadline:
                time.sleep(0.005)
            if p.poll() is not None:
                self.skipTest("oocrun finished before it could be interrupted")
            time.sleep(0.1)
            p.send_signal(signal.SIGINT)  # what Ctrl-C sends
            _, err = p.communicate(timeout=RUN_TIMEOUT)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        self.assertEqual(p.returncode, 130, err)
        lines = err.decode().splitlines()
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("big.npy: SIGINT: cancelled after", lines[0])
        self.assertIn("no output written", lines[0])
        self.assertEqual(temporaries(self.dir), [], "an interrupted apply left its temporary behind")
        self.assertEqual(snapshot(self.dir), before)


def wait_until_mapped(p, name, timeout=RUN_TIMEOUT):
    """Waits until process p has file `name` mapped (its signal watch is running by then:
    a signal sent earlier could find the default action still in place)."""
    deadline = time.monotonic() + timeout
    while p.poll() is None and time.monotonic() < deadline:
        try:
            with open(f"/proc/{p.pid}/maps") as f:
                if any(line.rstrip().endswith("/" + name) for line in f):
                    return True
        except OSError:
            pass
        time.sleep(0.002)
    return False


class RepeatedSignalTest(CliCase):
    """Ctrl-C pressed twice (or `timeout -s INT`, which signals twice), SIGTERM after
    SIGINT, at any moment: the run either finishes (exit 0, the whole output) or is
    cancelled (exit 128 + the first signal, one line) with no output and no temporary;
    in place, the journal is left only where a tile was started, and running the
    command again finishes the array exactly once (README, "What a stopped run leaves").
    Once a second signal exited at once and left the 1 GiB temporary behind."""

    ELEMENTS = 16 << 20  # 128 MiB of float64: long enough to be caught half way

    def setUp(self):
        super().setUp()
        self.rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))

    def zeros(self, name, elements=ELEMENTS):
        # A sparse file of zeros costs nothing to make; its outputs are written for real.
        m = np.lib.format.open_memmap(self.path(name), mode="w+", dtype="<f8", shape=(elements,))
        del m
        return name

    def interrupt(self, args, delay):
        """Runs oocrun; once it has mapped its input, after `delay` s, sends 1 to 4
        SIGINT/SIGTERM, 0-50 ms apart. Returns (exit status, first signal, stderr)."""
        p = subprocess.Popen([OOCRUN, *args, "--quiet"], cwd=self.dir, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            wait_until_mapped(p, args[2])
            time.sleep(delay)
            signals = [int(self.rng.choice([signal.SIGINT, signal.SIGTERM])) for _ in range(self.rng.integers(1, 5))]
            for i, sig in enumerate(signals):
                if i:
                    time.sleep(float(self.rng.uniform(0, 0.05)))
                if p.poll() is None:
                    p.send_signal(sig)
            _, err = p.communicate(timeout=RUN_TIMEOUT)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        return p.returncode, signals[0], err.decode()

    def check_cancelled(self, what, rc, first, err):
        self.assertEqual(rc, 128 + first, f"{what}: {err!r}")
        lines = err.splitlines()
        self.assertEqual(len(lines), 1, f"{what}: {lines!r}")
        self.assertIn(f"{signal.Signals(first).name}: cancelled after", lines[0], what)
        for word in CRASH_WORDS:
            self.assertNotIn(word, err, what)

    def test_new_npy_and_hdf5_outputs(self):
        src = self.zeros("big.npy")
        import h5py
        with h5py.File(self.path("existing.h5"), "w") as f:
            f["keep"] = np.arange(3)
        cases = [("npy", "L.npy")] * 5 + [("new h5", "new.h5:/g/x")] * 2 + [("existing h5", "existing.h5:/x")] * 2
        for trial, (kind, out) in enumerate(cases):
            for old in ("L.npy", "new.h5"):
                if os.path.exists(self.path(old)):
                    os.remove(self.path(old))
            delay = float(self.rng.uniform(0, 0.4))
            with self.subTest(trial=trial, kind=kind, delay=delay):
                args = ["apply", "log1p", src, "-o", out, "--tile-bytes", "64K", "--threads", "2"]
                rc, first, err = self.interrupt(args, delay)
                self.assertEqual(temporaries(self.dir), [], f"{kind}: a temporary was left ({err!r})")
                if rc == 0:  # finished before the signals arrived
                    self.assertEqual(err, "", err)
                else:
                    self.check_cancelled(kind, rc, first, err)
                    self.assertIn("no output written", err)
                if kind == "npy":
                    self.assertEqual(os.path.exists(self.path(out)), rc == 0, err)
                    if rc == 0:
                        self.assertFalse(np.load(self.path(out), mmap_mode="r").any())
                        os.remove(self.path(out))
                elif kind == "new h5":
                    self.assertEqual(os.path.exists(self.path("new.h5")), rc == 0, err)
                    if rc == 0:
                        os.remove(self.path("new.h5"))
                else:
                    with h5py.File(self.path("existing.h5"), "r") as f:
                        names = []
                        f.visit(names.append)
                        np.testing.assert_array_equal(f["keep"][()], np.arange(3))
                        if rc == 0:
                            self.assertEqual(f["x"].shape, (self.ELEMENTS,))
                    self.assertEqual(sorted(names), ["keep", "x"] if rc == 0 else ["keep"], err)
                    if rc == 0:
                        with h5py.File(self.path("existing.h5"), "a") as f:
                            del f["x"]

    def test_timeout_signalling_twice(self):
        src = self.zeros("big.npy")
        p = subprocess.run(["timeout", "-s", "INT", "0.3", OOCRUN, "apply", "log1p", src, "-o", "L.npy",
                            "--tile-bytes", "64K"], cwd=self.dir, capture_output=True, text=True, timeout=RUN_TIMEOUT)
        self.assertIn(p.returncode, (0, 124, 130), p.stderr)
        self.assertEqual(temporaries(self.dir), [])
        self.assertEqual(os.path.exists(self.path("L.npy")), p.returncode == 0, p.stderr)

    def test_in_place_keeps_the_journal_semantics(self):
        for trial in range(4):
            delay = float(self.rng.uniform(0, 0.3))
            with self.subTest(trial=trial, delay=delay):
                src = self.zeros("a.npy", 4 << 20)  # 32 MiB: every tile is written twice
                args = ["apply", "add-one", src, "--in-place", "--tile-bytes", "256K", "--threads", "2"]
                rc, first, err = self.interrupt(args, delay)
                self.assertEqual([t for t in temporaries(self.dir) if not t.endswith(".ooc-journal")], [], err)
                journal = self.path("a.npy.ooc-journal")
                a = np.load(self.path(src), mmap_mode="r")
                if rc == 0:
                    self.assertFalse(os.path.exists(journal))
                    self.assertTrue((a == 1).all())
                    continue
                self.check_cancelled("in place", rc, first, err)
                if os.path.exists(journal):
                    self.assertIn("run the same command again to finish it", err)
                    del a
                    rc2, out2, err2 = run_oocrun(args + ["--json"], self.dir)
                    self.assertEqual((rc2, err2), (0, ""), "resumed with --json: no note on stderr")
                    self.assertIs(strict_json(out2)["resumed"], True)  # the note is in the object
                    self.assertFalse(os.path.exists(journal))
                    self.assertTrue((np.load(self.path(src), mmap_mode="r") == 1).all(), "not exactly once")
                else:
                    self.assertIn("the array is unchanged", err)
                    self.assertFalse(a.any())
                self.assertEqual(sorted(os.listdir(self.dir)), ["a.npy"])


class CancelMessageTest(CliCase):
    """A cancelled run names what it was making: eval once printed `oocrun: : SIGTERM`."""

    def cancel(self, args, source="big.npy"):
        m = np.lib.format.open_memmap(self.path("big.npy"), mode="w+", dtype="<f8", shape=(16 << 20,))
        del m
        p = subprocess.Popen([OOCRUN, *args, "--tile-bytes", "64K", "--threads", "1"], cwd=self.dir,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            wait_until_mapped(p, source)
            if p.poll() is not None:
                self.skipTest("oocrun finished before it could be interrupted")
            p.send_signal(signal.SIGTERM)
            _, err = p.communicate(timeout=RUN_TIMEOUT)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        self.assertEqual(p.returncode, 143, err)
        lines = err.decode().splitlines()
        self.assertEqual(len(lines), 1, lines)
        self.assertEqual(temporaries(self.dir), [])
        return lines[0]

    def test_eval_names_its_output(self):
        line = self.cancel(["eval", "a * 2", "a=big.npy", "-o", "out.npy"])
        self.assertRegex(line, r"^oocrun: out\.npy: SIGTERM: cancelled after \d+ of \d+ tiles .*; no output written$")
        self.assertFalse(os.path.exists(self.path("out.npy")))

    def test_eval_without_output_names_its_inputs(self):
        line = self.cancel(["eval", "sum(a * 2)", "a=big.npy"])
        self.assertRegex(line, r"^oocrun: big\.npy: SIGTERM: cancelled after \d+ of \d+ tiles")

    def test_reduce_along_an_axis_into_a_file_says_no_output_was_written(self):
        np.save(self.path("m.npy"), np.zeros((4 << 20, 4)))
        line = self.cancel(["reduce", "sum", "m.npy", "--axis", "1", "-o", "out.npy"], source="m.npy")
        self.assertRegex(line, r"^oocrun: m\.npy: SIGTERM: cancelled after .*; no output written$")
        self.assertFalse(os.path.exists(self.path("out.npy")))


# ---------------------------------------------------------------------------------------
# Successful runs: the input stays as it was, JSON is JSON

class SuccessTest(CliCase):
    def setUp(self):
        super().setUp()
        self.a = np.arange(200000, dtype="<f8").reshape(400, 500) * 0.25
        self.good = self.save("good.npy", self.a)
        with open(self.path(self.good), "rb") as f:
            self.original = f.read()

    def input_unchanged(self):
        with open(self.path(self.good), "rb") as f:
            self.assertEqual(f.read(), self.original, "the input changed")

    def test_apply_to_a_new_file_leaves_the_input_alone(self):
        for extra in ([], ["--tile-bytes", "64K", "--threads", "2"], ["--threads", "1"]):
            with self.subTest(extra=extra):
                rc, out, err = run_oocrun(["apply", "add-one", self.good, "-o", "out.npy", *extra], self.dir)
                self.assertEqual(rc, 0, err)
                self.assertEqual(out, "")
                self.input_unchanged()
                self.assertEqual(temporaries(self.dir), [])
                np.testing.assert_array_equal(np.load(self.path("out.npy")), self.a + 1)
                self.assertEqual(sorted(os.listdir(self.dir)), ["good.npy", "out.npy"])
                os.remove(self.path("out.npy"))

    def test_apply_replaces_an_existing_output_whole(self):
        self.save("out.npy", np.zeros(3))
        rc, out, err = run_oocrun(["apply", "scale:0.5", self.good, "-o", "out.npy", "--quiet"], self.dir)
        self.assertEqual((rc, out, err), (0, "", ""))
        np.testing.assert_array_equal(np.load(self.path("out.npy")), self.a * 0.5)
        self.input_unchanged()
        self.assertEqual(temporaries(self.dir), [])

    def test_in_place_changes_the_file_and_leaves_no_temporary(self):
        rc, out, err = run_oocrun(["apply", "add-one", self.good, "--in-place", "--quiet"], self.dir)
        self.assertEqual(rc, 0, err)
        np.testing.assert_array_equal(np.load(self.path(self.good)), self.a + 1)
        self.assertEqual(sorted(os.listdir(self.dir)), ["good.npy"])

    def json_object(self, args):
        rc, out, err = run_oocrun(args, self.dir)
        self.assertEqual(rc, 0, err)
        self.assertTrue(out.endswith("\n") and out.count("\n") == 1, f"one line of JSON expected: {out!r}")
        obj = json.loads(out)  # raises on anything but exactly one JSON value
        self.assertIsInstance(obj, dict)
        self.input_unchanged()
        return obj

    def test_info_json(self):
        obj = self.json_object(["info", self.good, "--json"])
        self.assertEqual(obj["shape"], [400, 500])
        self.assertEqual(obj["dtype"], "<f8")
        self.assertEqual(obj["path"], self.good)

    def test_reduce_json(self):
        for op, expected in (("sum", self.a.sum()), ("mean", self.a.mean()), ("min", self.a.min()),
                             ("max", self.a.max())):
            with self.subTest(op=op):
                obj = self.json_object(["reduce", op, self.good, "--json"])
                self.assertEqual(obj["op"], op)
                self.assertEqual(obj["value"], expected)

    def test_reduce_json_quiet_and_progress_keep_stdout_clean(self):
        obj = self.json_object(["reduce", "sum", self.good, "--json", "--progress", "--tile-bytes", "64K"])
        self.assertEqual(obj["value"], self.a.sum())
        obj = self.json_object(["reduce", "max", self.good, "--json", "--quiet"])
        self.assertEqual(obj["value"], self.a.max())

    def test_apply_json(self):
        obj = self.json_object(["apply", "add-one", self.good, "-o", "out.npy", "--json"])
        self.assertEqual(obj["output"], "out.npy")
        self.assertEqual(temporaries(self.dir), [])

    def test_json_with_awkward_path(self):
        name = 'we"ird\\ na\tme \u00e9.npy'
        shutil.copy(self.path(self.good), self.path(name))
        for args in (["info", name, "--json"], ["reduce", "sum", name, "--json"]):
            with self.subTest(args=args[0]):
                rc, out, err = run_oocrun(args, self.dir)
                self.assertEqual(rc, 0, err)
                self.assertEqual(json.loads(out)["path"], name)


def strict_json(text):
    """One JSON object as strict parsers read it: a bare NaN or Infinity is an error."""
    def refuse(name):
        raise ValueError(f"bare {name} is not JSON (RFC 8259)")
    return json.loads(text, parse_constant=refuse)


NONFINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def number(value):
    """A JSON number, or one of the strings oocrun writes for the non-finite floats."""
    return NONFINITE[value] if isinstance(value, str) else value


class JsonOutputTest(CliCase):
    """--json is RFC 8259 JSON (jq reads it) with nan, inf and -inf still told apart, and
    with --json stderr holds errors only (and --progress's lines where asked)."""

    def setUp(self):
        super().setUp()
        self.special = np.array([np.nan, np.inf, -np.inf, 1.5])
        for dtype in ("<f8", ">f4", "<f2"):
            np.save(self.path(f"s{dtype[2:]}.npy"), self.special.astype(dtype))
        np.save(self.path("cols.npy"), np.array([[np.nan, np.inf, -np.inf, 2.0]] * 3))  # column sums: nan, inf, -inf
        np.save(self.path("zero.npy"), np.zeros(4))
        np.save(self.path("one.npy"), np.array([1.0, -1.0, 0.0, 2.0]))

    def run_json(self, *args, progress=False):
        rc, out, err = run_oocrun([*args, "--json", *(["--progress"] if progress else [])], self.dir)
        self.assertEqual(rc, 0, err)
        self.assertTrue(out.endswith("\n") and out.count("\n") == 1, out)
        obj = strict_json(out)
        if progress:
            for line in err.splitlines():
                self.assertTrue(line.startswith("progress: "), f"{args}: stderr with --json --progress: {err!r}")
        else:
            self.assertEqual(err, "", f"oocrun {' '.join(args)} --json: stderr should be empty")
        return obj

    def same(self, got, expected):
        got = np.asarray(number(got) if not isinstance(got, list) else [number(v) for v in got], dtype=float)
        expected = np.asarray(expected, dtype=float)
        self.assertTrue(np.array_equal(got, expected, equal_nan=True), f"{got} != {expected}")
        finite = ~np.isnan(expected)
        self.assertTrue(np.array_equal(np.signbit(got[finite]), np.signbit(expected[finite])))

    def test_non_finite_values_are_strings_that_keep_nan_inf_and_minus_inf_apart(self):
        for dtype in ("<f8", ">f4", "<f2"):
            name = f"s{dtype[2:]}.npy"
            with self.subTest(dtype=dtype):
                self.assertEqual(self.run_json("reduce", "sum", name)["value"], "NaN")
                self.assertEqual(self.run_json("reduce", "max", name)["value"], "NaN")
                self.assertEqual(self.run_json("reduce", "nanmax", name)["value"], "Infinity")
                self.assertEqual(self.run_json("reduce", "nanmin", name)["value"], "-Infinity")
                self.assertEqual(float(self.run_json("reduce", "nanmin", name)["value"]), -np.inf)  # Python reads it
        obj = self.run_json("reduce", "sum", "cols.npy", "--axis", "0")
        self.assertEqual(obj["value"], ["NaN", "Infinity", "-Infinity", 6.0])
        with np.errstate(all="ignore"):
            counts, edges = np.histogram(np.array([1.0, 2.0]), 4, (-1.7e308, 1.7e308))
        obj = self.run_json("reduce", "histogram", "one.npy", "--bins", "4", "--range", "-1.7e308:1.7e308")
        self.same(obj["edges"], edges)
        self.assertIn("Infinity", obj["edges"])
        obj = self.run_json("eval", "a / b", "a=one.npy", "b=zero.npy")
        self.same(obj["value"], np.array([np.inf, -np.inf, np.nan, np.inf]))
        self.assertEqual(self.run_json("eval", "sum(a / b)", "a=one.npy", "b=zero.npy")["value"], "NaN")
        self.assertEqual(self.run_json("eval", "max(a)", "a=s8.npy")["value"], "NaN")

    def test_every_subcommand_writes_strict_json_and_nothing_on_stderr(self):
        import h5py
        with h5py.File(self.path("d.h5"), "w") as f:
            f["x"] = self.special
            f.create_dataset("c", data=np.arange(100.0), chunks=(10,), compression="gzip")
        runs = [
            ["info", "s8.npy"], ["info", "d.h5"], ["info", "d.h5:/c"],
            ["reduce", "sum", "s8.npy"], ["reduce", "mean", "cols.npy", "--axis", "1"],
            ["reduce", "mean", "cols.npy", "--axis", "1", "-o", "m.npy"],
            ["reduce", "histogram", "one.npy", "--bins", "3"],
            ["apply", "log1p", "s8.npy", "-o", "l.npy"], ["apply", "add-one", "d.h5:/x", "-o", "e.h5:/y"],
            ["apply", "add-one", "one.npy", "--in-place"], ["apply", "add-one", "one.npy", "--in-place", "--no-journal"],
            ["eval", "a * 2", "a=s8.npy"], ["eval", "a * 2", "a=s8.npy", "-o", "e.npy"], ["eval", "sum(a)", "a=one.npy"],
            ["eval", "1 + 2"],
        ]
        for args in runs:
            for progress in (False, True):
                with self.subTest(args=args, progress=progress):
                    for out in ("m.npy", "l.npy", "e.npy", "e.h5"):
                        if os.path.exists(self.path(out)):
                            os.remove(self.path(out))
                    self.assertIsInstance(self.run_json(*args, progress=progress), dict)

    def test_jq_reads_it(self):
        if not shutil.which("jq"):
            self.skipTest("jq is not installed")
        for args in (["reduce", "sum", "cols.npy", "--axis", "0"], ["eval", "a / b", "a=one.npy", "b=zero.npy"]):
            with self.subTest(args=args):
                rc, out, err = run_oocrun([*args, "--json"], self.dir)
                self.assertEqual(rc, 0, err)
                jq = subprocess.run(["jq", "-c", ".value"], input=out, capture_output=True, text=True)
                self.assertEqual(jq.returncode, 0, jq.stderr)
                self.assertIn('"Infinity"', jq.stdout)

    def test_a_resumed_in_place_run_says_so_in_its_json(self):
        np.save(self.path("r.npy"), np.zeros(4))
        self.assertEqual(self.run_json("apply", "add-one", "r.npy", "--in-place")["resumed"], False)

    def test_an_empty_arrays_nan_mean_is_a_warning_in_the_json_not_on_stderr(self):
        np.save(self.path("empty.npy"), np.zeros(0))
        obj = self.run_json("reduce", "mean", "empty.npy")
        self.assertEqual(obj["value"], "NaN")
        self.assertIn("mean of an empty array is nan", obj["warning"])
        rc, out, err = run_oocrun(["reduce", "mean", "empty.npy"], self.dir)
        self.assertEqual((rc, out), (0, "nan\n"))
        self.assertIn("warning: mean of an empty array is nan", err)

    def test_file_names_that_are_not_utf8_stay_valid_json_and_lose_no_byte(self):
        name = b"caf\xe9.npy"
        with open(os.path.join(os.fsencode(self.dir), name), "wb") as f:
            np.save(f, np.arange(3.0))
        p = subprocess.run([os.fsencode(OOCRUN), b"info", name, b"--json"], cwd=self.dir, capture_output=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        p.stdout.decode("utf-8")  # strict: valid UTF-8
        self.assertEqual(os.fsencode(strict_json(p.stdout)["path"]), name)

if __name__ == "__main__":
    unittest.main()

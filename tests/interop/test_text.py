"""oocrun import / export against np.loadtxt and np.savetxt.

Import: every generated file gives the bytes np.save writes for np.loadtxt's array of the
same file (header, shape and every value's bits), across delimiters, comments, skipped
rows, headers, usecols, dtypes, line ends, chunk sizes and thread counts. Bad input: one
line on stderr naming FILE:LINE:COLUMN, exit 1, nothing left behind. Export: np.loadtxt
of the text gives back the array's bits; --fmt gives np.savetxt's bytes.
Run as ``OOCRUN=build/oocrun python3 test_text.py``.
"""
import io
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from ooctest import OOCRUN, SANITIZED, run, thin  # noqa: E402

CRASH_WORDS = ("Traceback", "terminate called", "Aborted", "core dumped", "Segmentation", "AddressSanitizer")


def loadtxt(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.loadtxt(path, **kw)


def saved(array):
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def hard_values(rng, n):
    """Values that are hard to read back: subnormals, 17 digits, huge and tiny exponents."""
    kinds = rng.integers(0, 6, n)
    v = rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n)
    v[kinds == 1] = rng.standard_normal((kinds == 1).sum()) * 5e-324 * rng.integers(1, 2**40, (kinds == 1).sum())
    v[kinds == 2] = rng.standard_normal((kinds == 2).sum()) * 1e300
    v[kinds == 3] = np.round(rng.standard_normal((kinds == 3).sum()) * 1000, 2)
    v[kinds == 4] = rng.integers(-10**6, 10**6, (kinds == 4).sum()).astype(float)
    return v


SPELLINGS = ["nan", "NaN", "-nan", "inf", "-inf", "+inf", "Infinity", "-INF", "+1.5", " 1.5 ", "1e5", "1E-5",
             ".5", "5.", "-0", "+0.0", "0.30000000000000004", "4.9e-324", "2.2250738585072014e-308",
             "1.7976931348623157e308", "1e400", "9007199254740993", "  -7  "]


def text_of(rng, value):
    r = rng.random()
    if r < 0.08:
        return SPELLINGS[rng.integers(0, len(SPELLINGS))]
    if r < 0.5:
        return repr(float(value))
    if r < 0.8:
        return "%.17g" % value
    return "%.*e" % (int(rng.integers(0, 20)), value)


class Case:
    """One generated text file and the np.loadtxt call that reads it."""

    def __init__(self, seed):
        rng = np.random.default_rng(seed)
        self.seed = seed
        self.rows = int(rng.choice([0, 1, 2, 3, 17, 200, 3000]))
        self.cols = int(rng.choice([1, 1, 2, 3, 7]))
        self.delim = [",", "\t", None, ";"][int(rng.integers(0, 4))]
        self.dtype = ["f8", "f8", "f8", "f4", "i8", "i4", "u2"][int(rng.integers(0, 7))]
        self.crlf = rng.random() < 0.2
        self.final_newline = rng.random() < 0.8
        self.comments = rng.random() < 0.3
        self.skip = int(rng.integers(0, 3)) if rng.random() < 0.3 else 0
        self.header = rng.random() < 0.2 and self.rows > 0
        self.usecols = None
        if rng.random() < 0.25 and self.cols > 1:
            k = int(rng.integers(1, self.cols + 1))
            self.usecols = [int(c) - (self.cols if rng.random() < 0.3 else 0)
                            for c in rng.choice(self.cols, k, replace=False)]
        nl = "\r\n" if self.crlf else "\n"
        lines = []
        for i in range(self.skip):
            lines.append("garbage, to skip %d" % i if rng.random() < 0.5 else "")
        if self.header:
            lines.append(("," if self.delim != "," else ";").join("c%d" % j for j in range(self.cols)))
        for _ in range(self.rows):
            if self.dtype[0] == "f":
                fields = [text_of(rng, v) for v in hard_values(rng, self.cols)]
            else:
                hi = {"i8": 2**63, "i4": 2**31, "u2": 2**16}[self.dtype]
                lo = 0 if self.dtype[0] == "u" else -hi
                fields = ["%d" % int(x) for x in rng.integers(lo, hi, self.cols, dtype=np.int64
                                                              if self.dtype != "u2" else np.int64)]
                fields = [("+" + f if rng.random() < 0.05 and not f.startswith("-") else f) for f in fields]
                fields = [(" %s " % f if rng.random() < 0.1 else f) for f in fields]
            if self.delim is None:
                sep = lambda: [" ", "\t", "  ", " \t "][int(rng.integers(0, 4))]  # noqa: E731
                line = ("  " if rng.random() < 0.2 else "") + sep().join(f.strip() for f in fields)
                fields_line = line
            else:
                fields_line = self.delim.join(f if self.delim not in (" ",) else f.strip() for f in fields)
            if self.comments and rng.random() < 0.1:
                lines.append("# a comment line")
            if rng.random() < 0.03:
                lines.append("")
            if self.comments and rng.random() < 0.2:
                fields_line += " # trailing comment"
            lines.append(fields_line)
        text = nl.join(lines) + (nl if self.final_newline and lines else "")
        self.text = text.encode()

    def numpy(self, path):
        kw = dict(delimiter=self.delim, dtype=self.dtype, skiprows=self.skip + (1 if self.header else 0),
                  comments="#")
        if self.usecols is not None:
            kw["usecols"] = self.usecols
        return loadtxt(path, **kw)

    def args(self):
        a = ["--dtype", self.dtype, "--delimiter", "whitespace" if self.delim is None else self.delim]
        if self.skip:
            a += ["--skip-rows", self.skip]
        if self.header:
            a += ["--header"]
        if self.usecols is not None:
            a += ["--columns", ",".join(map(str, self.usecols))]
        return a


class TextTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="ooc-text-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def write(self, name, data):
        p = self.path(name)
        with open(p, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())
        return p

    def assert_only(self, *names):
        self.assertEqual(sorted(os.listdir(self.dir)), sorted(names))

    def assert_fails(self, text_path, *args, where=None, code=1):
        out = self.path("out.npy")
        before = sorted(os.listdir(self.dir))
        p = run("import", text_path, "-o", out, *args, check=False)
        self.assertEqual(p.returncode, code, p.stderr)
        lines = p.stderr.strip().split("\n")
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertTrue(lines[0].startswith("oocrun: "), p.stderr)
        if where is not None:
            self.assertIn(where, lines[0])
        for w in CRASH_WORDS:
            self.assertNotIn(w, p.stderr)
        self.assertEqual(sorted(os.listdir(self.dir)), before)  # no output, no temporary
        return lines[0]

    # -- import, against np.loadtxt -------------------------------------------------

    def test_generated_files_match_loadtxt(self):
        checked = 0
        for seed in thin(range(70)):
            case = Case(seed)
            src = self.write("in.txt", case.text)
            out = self.path("out.npy")
            expected = case.numpy(src)
            extra = []
            if seed % 3 == 1:
                extra = ["--tile-bytes", "64K", "--threads", str(1 + seed % 4)]
            run("import", src, "-o", out, *case.args(), *extra, "--quiet")
            with open(out, "rb") as f:
                got = f.read()
            if got != saved(expected):
                a = np.load(out)
                self.fail(f"seed {seed}: {case.__dict__} ooc {a.dtype} {a.shape} {a!r:.300} numpy "
                          f"{expected.dtype} {expected.shape} {expected!r:.300}")
            checked += 1
        self.assertGreater(checked, 10)

    def test_many_chunks_threads_and_long_lines(self):
        rng = np.random.default_rng(7)
        a = hard_values(rng, 40000).reshape(-1, 8)
        text = "\n".join(",".join(repr(float(x)) for x in row) for row in a) + "\n"
        src = self.write("big.csv", text)
        expected = saved(loadtxt(src, delimiter=","))
        for threads in (1, 2, 5):
            out = self.path("big.npy")
            run("import", src, "-o", out, "--tile-bytes", "64K", "--threads", threads, "--quiet")
            with open(out, "rb") as f:
                self.assertEqual(f.read(), expected, threads)
        # Lines of ~10 MB: each longer than a chunk.
        wide = hard_values(rng, 2 * 640000).reshape(2, -1)
        text = "\n".join(",".join(repr(float(x)) for x in row) for row in wide)
        self.assertGreater(len(text) // 2, 10 * 10**6)
        src = self.write("wide.csv", text)
        out = self.path("wide.npy")
        run("import", src, "-o", out, "--tile-bytes", "64K", "--quiet")
        with open(out, "rb") as f:
            self.assertEqual(f.read(), saved(wide))

    def test_shapes_follow_loadtxt(self):
        for text, kw, args in [("1,2,3\n", {}, []), ("5\n", {}, []), ("1\n2\n3\n", {}, []),
                               ("1\n2\n3\n", {"ndmin": 2}, ["--ndmin", "2"]), ("5\n", {"ndmin": 1}, ["--ndmin", "1"]),
                               ("5\n", {"ndmin": 2}, ["--ndmin", "2"]), ("1,2\n3,4\n", {"usecols": [1]}, ["--columns", "1"]),
                               ("1,2,3\n", {"ndmin": 2}, ["--ndmin", "2"])]:
            src = self.write("s.csv", text)
            out = self.path("s.npy")
            run("import", src, "-o", out, *args, "--quiet")
            with open(out, "rb") as f:
                self.assertEqual(f.read(), saved(loadtxt(src, delimiter=",", **kw)), (text, kw))

    def test_big_endian_dtype_is_kept(self):
        # np.loadtxt(dtype='>f8') gives a '>f8' array and np.save writes '>f8': the same
        # header and bytes, not the native-order array's.
        src = self.write("be.csv", "1.5,-2\n3,4e300\n")
        for dtype in (">f8", ">f4", ">i4", ">u2", ">f2", "<i8"):
            out = self.path("be.npy")
            missing = ["--missing", "7"] if dtype[1] != "f" else []
            run("import", src, "-o", out, "--dtype", dtype, "--quiet", *missing, check=False)
            if dtype[1] != "f":
                src_i = self.write("bei.csv", "1,-2\n3,\n" if dtype[1] == "i" else "1,2\n3,\n")
                run("import", src_i, "-o", out, "--dtype", dtype, "--missing", "7", "--quiet")
                expected = np.array([[1, -2 if dtype[1] == "i" else 2], [3, 7]], dtype=dtype)
            else:
                expected = loadtxt(src, delimiter=",", dtype=dtype)
            with open(out, "rb") as f:
                self.assertEqual(f.read(), saved(expected), dtype)
        import h5py
        h5 = self.path("be.h5")
        run("import", src, "-o", h5 + ":/d", "--dtype", ">f4", "--quiet")
        with h5py.File(h5, "r") as f:
            self.assertEqual(f["/d"].dtype, np.dtype(">f4"))
            self.assertEqual(f["/d"][...].tobytes(), loadtxt(src, delimiter=",", dtype=">f4").tobytes())

    def test_lone_carriage_returns_end_lines(self):
        # np.loadtxt opens a file with Python's universal newlines: '\r' alone ends a line
        # (old Mac files), in the rows, the skipped rows and the header alike.
        for data, kw, args in [(b"1,2\r3,4\r", {}, []), (b"1,2\r3,4", {}, []), (b"1,2\r\r\n3,4\r\n5,6\n", {}, []),
                               (b"1 2\r3 4\n", {"delimiter": None}, ["--delimiter", "whitespace"]),
                               (b"a,b\rc\r1,2\r3,4\r", {"skiprows": 2}, ["--skip-rows", "2"]),
                               (b"x,y\r# c\r1,2\r\n3,4\r", {"skiprows": 1}, ["--header"])]:
            src = self.write("cr.csv", data)
            out = self.path("cr.npy")
            for tile in ("16M", "64K"):
                run("import", src, "-o", out, *args, "--tile-bytes", tile, "--overwrite", "--quiet")
                kw.setdefault("delimiter", ",")
                with open(out, "rb") as f:
                    self.assertEqual(f.read(), saved(loadtxt(src, **kw)), data)
        src = self.write("cr.csv", b"1,2\r3,x\r")
        self.assert_fails(src, where="cr.csv:2:3: could not convert 'x'")
        big = b"".join(b"%d,%d\r" % (i, -i) for i in range(40000))  # no '\n' at all: one chunk
        src = self.write("cr.csv", big)
        run("import", src, "-o", self.path("cr.npy"), "--tile-bytes", "64K", "--overwrite", "--quiet")
        np.testing.assert_array_equal(np.load(self.path("cr.npy")), loadtxt(src, delimiter=","))

    def test_unicode_whitespace_as_loadtxt(self):
        # np.loadtxt strips fields of what str.isspace() takes, non-ASCII included (a
        # no-break space from a spreadsheet), and splits on it with delimiter=None.
        for text, kw, args in [("\u00a01.5,2\u00a0\n3,\u2003 4\n", {}, []),
                               ("1\u00a02\u3000 3\n4 5\u20096\n", {"delimiter": None}, ["--delimiter", "whitespace"]),
                               ("\u00a0\n1 2\n\u2028\n3 4\n", {"delimiter": None}, ["--delimiter", "whitespace"]),
                               ("7\u202f,\u0085-8\n", {"dtype": "i4"}, ["--dtype", "i4"])]:
            src = self.write("u.csv", text.encode("utf-8"))
            out = self.path("u.npy")
            run("import", src, "-o", out, *args, "--overwrite", "--quiet")
            kw.setdefault("delimiter", ",")
            with open(out, "rb") as f:
                self.assertEqual(f.read(), saved(loadtxt(src, encoding="utf-8", **kw)), text)
        src = self.write("u.csv", "1\u00e9,2\n".encode("utf-8"))  # not a space: still an error
        self.assert_fails(src, where="u.csv:1:1: could not convert")

    def test_accepted_oddities(self):
        cases = {
            "bom.csv": (b"\xef\xbb\xbf1,2\n3,4\n", np.array([[1.0, 2], [3, 4]])),
            "crlf.csv": (b"1,2\r\n3,4\r\n", np.array([[1.0, 2], [3, 4]])),
            "nofinal.csv": (b"1,2\n3,4", np.array([[1.0, 2], [3, 4]])),
            "emptyline.csv": (b"1,2\n\n\n3,4\n", np.array([[1.0, 2], [3, 4]])),
            "spaces.csv": (b" 1.5 , +2\n-inf,nan\n", np.array([[1.5, 2], [-np.inf, np.nan]])),
        }
        for name, (data, expected) in cases.items():
            src = self.write(name, data)
            out = self.path(name + ".npy")
            run("import", src, "-o", out, "--quiet")
            with open(out, "rb") as f:
                self.assertEqual(f.read(), saved(expected), name)

    def test_empty_inputs(self):
        for data in (b"", b"# only a comment\n", b"\n\n"):
            src = self.write("e.csv", data)
            out = self.path("e.npy")
            p = run("import", src, "-o", out)
            self.assertIn("no data", p.stderr)
            with open(out, "rb") as f:
                self.assertEqual(f.read(), saved(loadtxt(src, delimiter=",")))
        run("import", src, "-o", out, "--columns", "0,1", "--quiet")
        self.assertEqual(np.load(out).shape, (0, 2))

    def test_missing(self):
        src = self.write("m.csv", "1,,3\n,5,\n")
        out = self.path("m.npy")
        self.assert_fails(src, where="m.csv:1:3: could not convert '' to float64")
        run("import", src, "-o", out, "--missing", "nan", "--quiet")
        np.testing.assert_array_equal(np.load(out), [[1, np.nan, 3], [np.nan, 5, np.nan]])
        run("import", src, "-o", out, "--missing", "-1", "--dtype", "i2", "--quiet")
        np.testing.assert_array_equal(np.load(out), np.array([[1, -1, 3], [-1, 5, -1]], dtype="i2"))

    def test_stdin(self):
        out = self.path("p.npy")
        p = subprocess.run([OOCRUN, "import", "-", "-o", out, "--quiet"], input=b"1 2\n3 4\n".replace(b" ", b","),
                           capture_output=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        np.testing.assert_array_equal(np.load(out), [[1, 2], [3, 4]])

    def test_fast_path_lines_match_loadtxt(self):
        # Clean rows (the one-pass fast path) around rows it hands to the plain path: spaces,
        # tabs, comments, CRLF and lone CR, empty and extra fields, words, bad numbers.
        rng = np.random.default_rng(21)
        odd = ["1 ,2,3", " 1, 2 ,3 ", "1,2,3 ", "1,2,3\r", "1,2,3 # c", "1,2,3#c", "# c", "", "1\t,2,\t3",
               "nan,-inf,+1e5", "1,2,3\r4,5,6", "1e-400,4.9e-324,1e400", ".5,5.,-0"]
        lines = []
        for i in range(3000):
            if rng.random() < 0.2:
                lines.append(odd[rng.integers(len(odd))])
            else:
                lines.append(",".join(repr(v) for v in hard_values(rng, 3)))
        for end in ("\n", "\r\n"):
            src = self.write("f.csv", end.join(lines) + end)
            out = self.path("f.npy")
            for chunk in ("64K", "16M"):
                run("import", src, "-o", out, "--tile-bytes", chunk, "--quiet")
                with open(out, "rb") as f:
                    self.assertEqual(f.read(), saved(loadtxt(src, delimiter=",")), (end, chunk))
        # a field too many, too few, empty, or a bad number in the middle of clean rows
        for bad, where in [("1,2,3,4", "f.csv:1502:7: expected 3 fields, found more"),
                           ("1,2", "f.csv:1502:4: expected 3 fields, found 2"),
                           ("1,,3", "f.csv:1502:3: could not convert ''"),
                           ("1,2.5.1,3", "f.csv:1502:3: could not convert '2.5.1'"),
                           ("1,2,3e", "f.csv:1502:5: could not convert '3e'")]:
            rows = ["%d.25,%d,-%d.5" % (i, i, i) for i in range(3000)]
            rows[1501] = bad
            src = self.write("f.csv", "\n".join(rows) + "\n")
            self.assert_fails(src, "--tile-bytes", "64K", where=where)
        # a comment character a number could hold is not read as part of it
        src = self.write("e.csv", "1,2e5\n3,4e\n")
        run("import", src, "-o", self.path("e.npy"), "--comments", "e", "--ndmin", "2", "--quiet")
        with open(self.path("e.npy"), "rb") as f:
            self.assertEqual(f.read(), saved(loadtxt(src, delimiter=",", comments="e", ndmin=2)))

    def test_multicharacter_comments(self):
        text = "// head\n1,2 // x\n3,4/5\n6,7//\n/8,9\n// only\n10,11\n"
        cases = [("//", text.replace("4/5", "4.5").replace("/8", "8")), ("--", "1,2 -- c\n-3,-4--\n--\n5,-6\n"),
                 ("#!", "#!a\n1,2#!b\n3,4 #! c\n"), ("ab", "1,2ab\nab\n3,4\n")]
        for comments, data in cases:
            for end in ("\n", "\r\n"):
                src = self.write("c.csv", data.replace("\n", end) * 500)
                out = self.path("c.npy")
                run("import", src, "-o", out, "--comments", comments, "--tile-bytes", "64K", "--quiet")
                with open(out, "rb") as f:
                    self.assertEqual(f.read(), saved(loadtxt(src, delimiter=",", comments=comments)), comments)
        src = self.write("c.csv", "1,2 //x\n3,4\n")
        self.assert_fails(src, "--comments", "#", where="c.csv:1:3: could not convert")

    def test_negative_skip_rows_is_a_usage_error(self):
        src = self.write("s.csv", "1,2\n")
        line = self.assert_fails(src, "--skip-rows", "-1", code=2)
        self.assertIn("--skip-rows -1", line)
        self.assertNotIn("range", line)

    # -- bad input --------------------------------------------------------------------

    def test_bad_input(self):
        bad = [
            ("1,2,3\n4,5\n", [], "bad.csv:2:4: expected 3 fields, found 2"),
            ("1,2\n3,4,5\n", [], "bad.csv:2:5: expected 2 fields, found more"),
            ("5\n1,2\n", [], "bad.csv:2:3: expected 1 field, found more"),
            ("1,2\n3,abc\n", [], "bad.csv:2:3: could not convert 'abc' to float64"),
            ("# c\n\n1,2\n1.2.3,4\n", [], "bad.csv:4:1: could not convert '1.2.3' to float64"),
            ("1,2\n3,9223372036854775808\n", ["--dtype", "i8"], "bad.csv:2:3: integer '9223372036854775808' is out of "
                                                                 "range for int64"),
            ("1,2\n3,300\n", ["--dtype", "i1"], "bad.csv:2:3: integer '300' is out of range for int8"),
            ("1,2\n3,-1\n", ["--dtype", "u4"], "bad.csv:2:3: integer '-1' is out of range for uint32"),
            ("1,2\n3,1.0\n", ["--dtype", "i4"], "bad.csv:2:3: could not convert '1.0' to int32"),
            ("1,2\n", ["--columns", "5"], "bad.csv:1: column 5 is not in a row of 2 fields"),
            ("1,nan(1)\n", [], "could not convert 'nan(1)'"),
        ]
        for text, args, where in bad:
            src = self.write("bad.csv", text)
            self.assert_fails(src, *args, where=where)
        # Far into the file, in a later chunk, with several threads.
        good = "".join("%d,%d\n" % (i, i) for i in range(50000))
        src = self.write("bad.csv", good + "1,x\n" + good)
        self.assert_fails(src, "--tile-bytes", "64K", "--threads", "3", where="bad.csv:50001:3: could not convert 'x'")
        # Usage errors: exit 2.
        src = self.write("bad.csv", "1,2\n")
        self.assert_fails(src, "--dtype", "complex", code=2)
        self.assert_fails(src, "--delimiter", "ab", code=2)
        self.assert_fails(src, "--missing", "x", code=2)
        p = run("import", self.path("nonexistent.csv"), "-o", self.path("x.npy"), check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("nonexistent.csv", p.stderr)
        # The output is an array, named as apply's: another name is a usage error, no file
        # made (export alone writes text).
        ok = self.write("ok.csv", "1,2\n")
        for name in ("out.txt", "out.csv", "-"):
            before = sorted(os.listdir(self.dir))
            p = run("import", ok, "-o", name if name == "-" else self.path(name), check=False)
            self.assertEqual(p.returncode, 2, (name, p.stderr))
            self.assertIn("an output is a .npy file", p.stderr)
            self.assertEqual(sorted(os.listdir(self.dir)), before)

    def test_file_shrinking_while_read(self):
        row = ",".join("%.17g" % x for x in np.linspace(0, 1, 8)) + "\n"
        data = (row * 400000).encode()  # ~60 MB
        src = self.write("shrink.csv", data)
        out = self.path("shrink.npy")
        proc = subprocess.Popen([OOCRUN, "import", src, "-o", out, "--tile-bytes", "256K", "--threads", "1", "--quiet"],
                                stderr=subprocess.PIPE, text=True)
        time.sleep(0.05)
        os.truncate(src, len(data) // 2 + 7)  # mid-line
        _, err = proc.communicate(timeout=60)
        if proc.returncode == 0:  # finished before the cut
            self.assertEqual(np.load(out).shape, (400000, 8))
        else:
            self.assertEqual(proc.returncode, 1, err)
            self.assertTrue("shrank" in err or "expected 8 fields" in err, err)
            self.assert_only("shrink.csv")

    def test_ctrl_c_leaves_nothing(self):
        import signal
        row = ",".join("%.17g" % x for x in np.linspace(0, 1, 8)) + "\n"
        src = self.write("c.csv", row * 400000)
        np.save(self.path("c.npy"), np.zeros((300000, 8)))
        for args in (["import", src, "-o", self.path("out.npy")], ["export", self.path("c.npy"), "-o", self.path("o.csv")]):
            proc = subprocess.Popen([OOCRUN, *args, "--tile-bytes", "256K", "--threads", "1"], stderr=subprocess.PIPE,
                                    text=True)
            # Sent once the run has started (its output's temporary is there), not after a
            # fixed delay: on a loaded machine 0.1 s could end before oocrun had even loaded.
            deadline = time.monotonic() + 60
            while (proc.poll() is None and time.monotonic() < deadline
                   and not any(".ooc-" in n for n in os.listdir(self.dir))):
                time.sleep(0.002)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
            if proc.returncode == 0:  # finished first
                os.remove(args[-1])
                continue
            self.assertEqual(proc.returncode, 130, err)
            self.assertIn("SIGINT: cancelled; no output written", err)
            self.assert_only("c.csv", "c.npy")

    def test_growing_input_through_a_pipe(self):
        out = self.path("g.npy")
        proc = subprocess.Popen([OOCRUN, "import", "-", "-o", out, "--quiet"], stdin=subprocess.PIPE)

        def feed():
            for i in range(20):
                proc.stdin.write(("%d,%d\n" % (i, -i)).encode())
                proc.stdin.flush()
                time.sleep(0.01)
            proc.stdin.close()
        t = threading.Thread(target=feed)
        t.start()
        t.join()
        self.assertEqual(proc.wait(timeout=30), 0)
        np.testing.assert_array_equal(np.load(out), [[i, -i] for i in range(20)])

    @unittest.skipIf(SANITIZED, "ASan's shadow memory is not ooc's (memory_bound is skipped there too)")
    def test_memory_is_bounded_by_the_tile(self):
        row = ",".join("%.17g" % x for x in np.linspace(-1, 1, 10)) + "\n"
        src = self.write("rss.csv", row * 400000)  # 68 MB of text, 32 MB of values
        out = self.path("rss.npy")
        code = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True); "
                "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
        p = subprocess.run([sys.executable, "-c", code, OOCRUN, "import", src, "-o", out, "--tile-bytes", "2M",
                            "--quiet"], capture_output=True, text=True, check=True)
        peak_mib = int(p.stdout) / 1024
        self.assertLess(peak_mib, 32, f"peak RSS {peak_mib:.1f} MiB for a {os.path.getsize(src) >> 20} MiB file")
        self.assertEqual(np.load(out, mmap_mode="r").shape, (400000, 10))

    # -- HDF5 ---------------------------------------------------------------------------

    def test_hdf5_in_and_out(self):
        import h5py
        src = self.write("h.csv", "1,2\n3,4\n5,6\n")
        h5 = self.path("h.h5")
        run("import", src, "-o", h5 + ":/g/data", "--quiet")
        with h5py.File(h5, "r") as f:
            np.testing.assert_array_equal(f["/g/data"][...], [[1, 2], [3, 4], [5, 6]])
        p = run("import", src, "-o", h5 + ":/g/data", check=False)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("already exists", p.stderr)
        run("import", src, "-o", h5 + ":/g/data", "--overwrite", "--dtype", "i4", "--quiet")
        with h5py.File(h5, "r") as f:
            self.assertEqual(f["/g/data"].dtype, np.int32)
        out = self.path("h.txt")
        run("export", h5 + ":/g/data", "-o", out, "--quiet")
        with open(out) as f:
            self.assertEqual(f.read(), "1,2\n3,4\n5,6\n")
        self.assert_only("h.csv", "h.h5", "h.txt")

    # -- export ---------------------------------------------------------------------------

    def test_export_round_trips_bits(self):
        rng = np.random.default_rng(3)
        special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 2.2250738585072014e-308,
                            1.7976931348623157e308, 0.1, 1 / 3, 1e16, 1e-5, 123456789012345678.0])
        arrays = [
            np.concatenate([special, hard_values(rng, 5000 - len(special))]).reshape(-1, 10),
            hard_values(rng, 3000).astype("f4").reshape(-1, 3),
            hard_values(rng, 999).astype(">f8"),
            (rng.standard_normal(2000) * 100).astype("f2").reshape(-1, 4),
            rng.integers(-2**63, 2**63 - 1, (500, 4), dtype=np.int64, endpoint=True),
            rng.integers(0, 2**64 - 1, (300,), dtype=np.uint64, endpoint=True),
            np.array(2.5),
            np.zeros((0, 3)),
        ]
        for i, a in enumerate(arrays):
            src = self.path("x%d.npy" % i)
            np.save(src, a)
            out = self.path("x%d.csv" % i)
            run("export", src, "-o", out, "--tile-bytes", "64K", "--quiet")
            back = loadtxt(out, delimiter=",", dtype=a.dtype.newbyteorder("="), ndmin=a.ndim)
            if a.ndim == 0:
                back = back.reshape(())
            if a.size == 0:
                self.assertEqual(os.path.getsize(out), 0)
                continue
            self.assertEqual(back.shape, a.shape, i)
            u = "u%d" % a.dtype.itemsize
            self.assertTrue(np.array_equal(back.view(u), a.astype(a.dtype.newbyteorder("=")).view(u)), i)

    def test_export_formats_as_savetxt(self):
        rng = np.random.default_rng(4)
        a = hard_values(rng, 600).reshape(-1, 6)
        a[0, :4] = [np.nan, -np.nan, np.inf, -np.inf]
        b = rng.integers(-10**9, 10**9, (100, 3))
        for arr, fmt, delim in [(a, "%.6g", ","), (a[1:], "%10.3f", ","), (a, "%e", "\t"), (a[1:], "%d", ","),
                                (a, "%+.3E", ";"), (b, "%d", ","), (b, "%.2f", " "), (b, "%5i", ","),
                                # Python zero-pads inf and nan ('%012.4f' % inf is '000000000inf')
                                (a, "%012.4f", ","), (a, "%+012e", ","), (a, "% 010G", ","), (a, "%-012.4f", ","),
                                (a, "x%08.2fy", ",")]:
            src = self.path("f.npy")
            np.save(src, arr)
            out = self.path("f.csv")
            run("export", src, "-o", out, "--fmt", fmt, "--delimiter", delim, "--tile-bytes", "64K", "--quiet")
            buf = io.BytesIO()
            np.savetxt(buf, arr, fmt=fmt, delimiter=delim)
            with open(out, "rb") as f:
                self.assertEqual(f.read(), buf.getvalue(), (fmt, delim))

    def test_export_fortran_order_as_savetxt(self):
        rng = np.random.default_rng(8)
        arrays = [np.asfortranarray(hard_values(rng, 6000).reshape(-1, 6)),
                  np.asfortranarray(hard_values(rng, 6000).reshape(-1, 6).astype(">f8")),
                  np.asfortranarray(rng.integers(-10**9, 10**9, (777, 5))),
                  np.asfortranarray(hard_values(rng, 40000).reshape(4, -1))]
        for i, a in enumerate(arrays):
            self.assertTrue(a.flags.f_contiguous and not a.flags.c_contiguous)
            src = self.path("f%d.npy" % i)
            np.save(src, a)
            with open(src, "rb") as f:
                self.assertIn(b"'fortran_order': True", f.read(128))
            out = self.path("f.csv")
            fmt = "%d" if a.dtype.kind == "i" else "%.18e"
            run("export", src, "-o", out, "--fmt", fmt, "--tile-bytes", "64K", "--quiet")
            buf = io.BytesIO()
            np.savetxt(buf, a, fmt=fmt, delimiter=",")
            with open(out, "rb") as f:
                self.assertEqual(f.read(), buf.getvalue(), i)
            run("export", src, "-o", out, "--tile-bytes", "64K", "--quiet")  # shortest: the bits back
            back = loadtxt(out, delimiter=",", dtype=a.dtype.newbyteorder("="))
            self.assertTrue(np.array_equal(back, a), i)

    def test_export_format_text_around_the_conversion(self):
        a = np.array([[1.5, -np.nan], [np.inf, 1e-7]])
        src = self.path("t.npy")
        np.save(src, a)
        out = self.path("t.csv")
        run("export", src, "-o", out, "--fmt", "x=%-8.3g%%", "--quiet")
        expected = "".join(",".join("x=%-8.3g%%" % v for v in row) + "\n" for row in a.tolist())
        with open(out) as f:
            self.assertEqual(f.read(), expected)

    def test_export_header_and_errors(self):
        src = self.path("a.npy")
        np.save(src, np.arange(6.0).reshape(3, 2))
        out = self.path("a.csv")
        run("export", src, "-o", out, "--header", "x,y", "--quiet")
        with open(out) as f:
            self.assertEqual(f.read(), "x,y\n0,1\n2,3\n4,5\n")
        run("import", out, "-o", self.path("b.npy"), "--header", "--quiet")
        np.testing.assert_array_equal(np.load(self.path("b.npy")), np.arange(6.0).reshape(3, 2))
        np.save(self.path("c.npy"), np.zeros((2, 2, 2)))
        np.save(self.path("n.npy"), np.array([1.0, np.nan]))
        for args, code, words in [(["c.npy"], 2, "dimensions"), (["a.npy", "--fmt", "%s"], 2, "--fmt"),
                                  (["a.npy", "--fmt", "%d %d"], 2, "--fmt"), (["n.npy", "--fmt", "%d"], 1, "NaN")]:
            before = sorted(os.listdir(self.dir))
            p = run("export", self.path(args[0]), "-o", self.path("z.csv"), *args[1:], check=False)
            self.assertEqual(p.returncode, code, p.stderr)
            self.assertIn(words, p.stderr)
            self.assertEqual(len(p.stderr.strip().split("\n")), 1, p.stderr)
            self.assertEqual(sorted(os.listdir(self.dir)), before)

    def test_round_trip_through_both(self):
        rng = np.random.default_rng(5)
        a = hard_values(rng, 30000).reshape(-1, 5)
        src = self.path("r.npy")
        np.save(src, a)
        run("export", src, "-o", self.path("r.csv"), "--tile-bytes", "64K", "--quiet")
        run("import", self.path("r.csv"), "-o", self.path("r2.npy"), "--tile-bytes", "64K", "--quiet")
        with open(src, "rb") as f1, open(self.path("r2.npy"), "rb") as f2:
            self.assertEqual(f1.read(), f2.read())


if __name__ == "__main__":
    unittest.main()

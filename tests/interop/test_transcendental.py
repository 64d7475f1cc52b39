"""The 4-ulp bound, proved on many values: oocrun apply exp log log1p expm1 sin cos tanh
(and pow:C, and eval's `a ** b`) against numpy 1.24 on every SIMD path numpy takes here,
for float32 and float64 (OOC_TRANSCENDENTAL_SIZE values per function and dtype: 10^6 in
the plain tree, 10^5 in the sanitized one; OOC_TRANSCENDENTAL_SIZE=1e7 for the 10^7 of
the table in docs/decisions/2026-12-01-vecmath-libmvec.md, 3-4 min more) and every
float16 value.

The inputs (transcendental_cases.py) are spread over the whole range: random bit patterns
(log-uniform magnitudes of both signs over every exponent, subnormals included), dense
regions per function (near 0 and 1 for the logarithms, large arguments for sin and cos,
the overflow and underflow thresholds of exp and expm1, tanh's saturation) and the edge
cases (signed zeros, infinities, NaN, the largest finite, the smallest normal and
subnormal). ooc runs at each vector width its CPU has (OOC_VECMATH: avx512, avx2, sse),
so an AVX-512 machine also checks the code an AVX2-only or SSE-only CPU would run.

Checked: at most 4 ulp from numpy everywhere (units_apart: NaN against a number fails),
and where numpy's result is an infinity, a zero or NaN on every path (its exact cases)
ooc's is the same bits but for NaN's payload. The measured maxima are printed as a table
(docs/decisions/2026-12-01-vecmath-libmvec.md records one)."""
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from ooctest import SANITIZED, TRANSCENDENTAL_ULP, TempDir, numpy_in, numpy_simd_paths, run, units_apart  # noqa: E402
import transcendental_cases as cases  # noqa: E402

SIZE = int(float(os.environ.get("OOC_TRANSCENDENTAL_SIZE", "1e5" if SANITIZED else "1e6")))
POW_CONSTANTS = ["0.5", "2", "3", "-1", "-2", "0", "1", "2.5", "-1.5", "0.3333333333333333", "10", "-0.5", "100"]


def vector_widths():
    """The OOC_VECMATH values this CPU runs: the widest, then each narrower one. Read from
    the CPU's own flags, not numpy's __cpu_features__, which NPY_DISABLE_CPU_FEATURES
    changes while ooc still picks what the CPU has."""
    with open("/proc/cpuinfo") as f:
        flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    widths = []
    if "avx512f" in flags:
        widths.append("avx512")
    if "avx2" in flags:
        widths.append("avx2")
    return widths + ["sse"]


class Table:
    """Max ulp per (function, dtype, ooc width) and numpy path, printed at the end."""
    rows = {}

    @classmethod
    def record(cls, key, path, worst):
        cls.rows.setdefault(key, {})[path] = max(worst, cls.rows.get(key, {}).get(path, 0))

    @classmethod
    def print(cls):
        paths = [p for p, _ in numpy_simd_paths()]
        print(f"\nmax ulp from numpy, {SIZE} values per function and dtype (float16: all 65536)")
        print("| function | dtype | ooc width | " + " | ".join(f"numpy {p}" for p in paths) + " |")
        print("|---|---|---|" + "---|" * len(paths))
        for (fn, dtype, width), worst in sorted(cls.rows.items()):
            print(f"| {fn} | {dtype} | {width} | " + " | ".join(str(worst.get(p, "")) for p in paths) + " |")
        sys.stdout.flush()


class TranscendentalTest(unittest.TestCase):
    @classmethod
    def tearDownClass(cls):
        Table.print()

    def setUp(self):
        self.tmp = TempDir()

    def tearDown(self):
        self.tmp.cleanup()

    def numpy(self, calls, **arrays):
        """For each (numpy expression over the arrays, its number of values) of `calls`: its
        result on every numpy path, and where all of them give the same infinity, zero or
        NaN (numpy's exact cases). One fresh numpy per path computes them all: a process
        and numpy's import cost more than 10^6 values of a function."""
        code = "result = np.concatenate([%s])" % ", ".join(f"np.ravel({expression})" for expression, _ in calls)
        batches = {path: numpy_in(env, code, **arrays) for path, env in numpy_simd_paths()}
        results, start = [], 0
        for _, size in calls:
            expected = {path: batch[start:start + size] for path, batch in batches.items()}
            start += size
            wants = list(expected.values())
            first, bits = wants[0], f"u{wants[0].itemsize}"
            exact = ~np.isfinite(first) | (first == 0)
            for want in wants[1:]:
                exact &= (want.view(bits) == first.view(bits)) | (np.isnan(want) & np.isnan(first))
            results.append((expected, exact))
        return results

    def compare(self, name, dtype, width, got, numpy, **arrays):
        """got against numpy's results (self.numpy): the ulp bound on every path, and
        numpy's exact cases bit for bit (NaN's payload aside)."""
        expected, exact = numpy
        for path, want in expected.items():
            with self.subTest(function=name, dtype=dtype, width=width, numpy=path):
                self.assertEqual(got.dtype, want.dtype.newbyteorder("="))
                distance = units_apart(got, want)
                worst = int(distance.max())
                Table.record((name, dtype, width), path, worst)
                if worst > TRANSCENDENTAL_ULP:
                    at = int(np.argmax(distance))
                    x = {k: v.ravel()[at] for k, v in arrays.items()}
                    self.fail(f"{name} {dtype} ({width}): {worst} ulp from numpy {path} at {x}: "
                              f"{got.ravel()[at]!r} against {want.ravel()[at]!r}")
                bits = f"u{want.itemsize}"
                differ = exact & ~((got.view(bits) == want.view(bits)) | (np.isnan(got) & np.isnan(want)))
                if differ.any():
                    at = int(np.argmax(differ))
                    x = {k: v.ravel()[at] for k, v in arrays.items()}
                    self.fail(f"{name} {dtype} ({width}): numpy {path} gives exactly {want.ravel()[at]!r} at {x}, "
                              f"ooc {got.ravel()[at]!r} ({int(differ.sum())} such)")

    def apply(self, op, src, width, out_name="o.npy"):
        out = self.tmp.file(out_name)
        run("apply", op, src, "-o", out, "--quiet", environment={"OOC_VECMATH": width})
        return np.load(out)

    def test_functions_on_float32_and_float64(self):
        for dtype in ["<f8", "<f4"]:
            inputs = {fn: cases.unary_inputs(fn, dtype, SIZE) for fn in cases.UNARY}
            numpys = self.numpy([(f"np.{fn}({fn})", len(a)) for fn, a in inputs.items()], **inputs)
            for (fn, a), numpy in zip(inputs.items(), numpys):
                src = self.tmp.save("a.npy", a)
                for width in vector_widths():
                    self.compare(fn, dtype, width, self.apply(fn, src, width), numpy, a=a)

    def test_every_float16_value(self):
        # float16 computes in float32 with glibc's scalar functions, as numpy's e->e loops do.
        every = np.arange(65536, dtype=np.uint16).view(np.float16)
        src = self.tmp.save("h.npy", every)
        numpys = self.numpy([(f"np.{fn}(a)", every.size) for fn in cases.UNARY], a=every)
        for fn, numpy in zip(cases.UNARY, numpys):
            got = self.apply(fn, src, vector_widths()[0])
            self.compare(fn, "<f2", "scalar", got, numpy, a=every)

    def test_pow_constants(self):
        for dtype in ["<f8", "<f4"]:
            x = cases.pow_bases(dtype, min(SIZE, 100000))
            src = self.tmp.save("p.npy", x)
            numpys = self.numpy([(f"np.power(a, {c})", x.size) for c in POW_CONSTANTS], a=x)
            for c, numpy in zip(POW_CONSTANTS, numpys):
                for width in vector_widths():
                    self.compare(f"pow:{c}", dtype, width, self.apply(f"pow:{c}", src, width), numpy, a=x)

    def test_pow_of_arrays_through_eval(self):
        side = int(np.sqrt(SIZE))
        for dtype in ["<f8", "<f4"]:
            x, y = cases.pow_grid(dtype, side, side)
            a, b = self.tmp.save("a.npy", x), self.tmp.save("b.npy", y)
            numpy, = self.numpy([("a ** b", x.size)], a=x, b=y)
            for width in vector_widths():
                out = self.tmp.file("o.npy")
                run("eval", "a ** b", "-o", out, "--quiet", f"a={a}", f"b={b}", environment={"OOC_VECMATH": width})
                self.compare("a ** b", dtype, width, np.load(out), numpy, a=x, b=y)

    def test_eval_gives_apply_bits(self):
        # One set of loops: eval's expm1(a), sin(a)*cos(a) are apply's bits.
        a = cases.unary_inputs("sin", "<f8", 100000)
        src = self.tmp.save("a.npy", a)
        out = self.tmp.file("e.npy")
        width = vector_widths()[0]
        for fn in cases.UNARY:
            run("eval", f"{fn}(a)", "-o", out, "--quiet", f"a={src}", environment={"OOC_VECMATH": width})
            self.assertTrue(np.array_equal(np.load(out), self.apply(fn, src, width), equal_nan=True), fn)


if __name__ == "__main__":
    unittest.main()

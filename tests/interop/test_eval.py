"""oocrun eval EXPR NAME=ARRAY...: an expression gives what numpy gives for the same
Python text with the names bound to np.load'ed arrays - values bit for bit, dtypes
(value-based casting of Python numbers and 0-d arrays, numpy's ** fast paths), shapes
(broadcasting), memory order - and an outermost reduction gives numpy's scalar, e.g.
sum(a*b) with numpy's summation order over the temporary a*b. Bad expressions are usage
errors that point at the column."""
import os
import sys
import unittest
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from ooctest import (TRANSCENDENTAL_ULP, TempDir, numpy_in, numpy_simd_paths, run, run_json, same_bits,  # noqa: E402
                     same_scalar, sample, units_apart)

FUNCTIONS = {"sqrt": np.sqrt, "exp": np.exp, "log": np.log, "log1p": np.log1p, "expm1": np.expm1, "sin": np.sin,
             "cos": np.cos, "tanh": np.tanh, "abs": np.absolute, "where": np.where, "clip": np.clip, "sum": np.sum,
             "prod": np.prod, "mean": np.mean, "min": np.min, "max": np.max, "argmin": np.argmin, "argmax": np.argmax, "var": np.var,
             "std": np.std, "count_nonzero": np.count_nonzero, "any": np.any, "all": np.all, "nansum": np.nansum,
             "nanmean": np.nanmean, "nanmin": np.nanmin, "nanmax": np.nanmax, "norm": np.linalg.norm}
REDUCTIONS = {"sum", "prod", "mean", "min", "max", "argmin", "argmax", "var", "std", "count_nonzero", "any", "all",
              "nansum", "nanmean", "nanmin", "nanmax", "norm"}


def arrays():
    return {
        "a": sample("<f8", (300, 40), seed=1, nan=True),
        "b": sample(">f4", (40,), seed=2),
        "c": np.asfortranarray(sample("<f8", (300, 40), seed=3)),
        "i": sample("|i1", (300, 40), seed=4),
        "u": sample("<u2", (300, 1), seed=5),
        "h": sample("<f2", (40,), seed=6),
        "q": sample("|b1", (300, 40), seed=7),
        "m": np.array(2.5, dtype=">f4"),
        "k": np.array(3, dtype="<i8"),
        "z": np.asfortranarray(sample(">i4", (300, 40), seed=8)),
        "w": sample("<i8", (300, 40), seed=9),
        "e": np.zeros((0, 40)),
        "v": sample("<f4", (7,), seed=10),
        "n": np.array(np.nan),
        "nb": np.array(np.nan, dtype=">f4"),
    }


# Expressions numpy evaluates; each is checked for dtype, shape, order and bits.
EXPRESSIONS = [
    "2*a + sqrt(b) - 1", "(a - b) * (a - b)", "a*c", "c*c + c", "i + 300", "i * 2", "i / 2", "i ** 2", "i ** 2.0",
    "h ** 2", "h ** 0.5", "a ** -1", "a ** 0", "a ** 1", "u ** 3", "i + u", "i * u - 1", "where(a > 0, a, -a)",
    "where(q, i, 1.5)", "where(i > 0, i, 0)", "-i", "-(i)", "+i", "abs(i)", "-2**2", "2**-1 * a", "1/2 + a", "m*i",
    "m*2 + i", "k*i", "(k*300)*i", "i * (2*3)", "h + 1", "h * m", "sqrt(i)", "exp(h)", "q + q", "q * 2", "q ** 2",
    # a 0-d array through numpy's ** fast paths (once a crash)
    "m ** 1", "m ** 1.0 + b", "m ** -1", "m ** 0.5", "m ** 0",
    # np.power searches its loops: uint16 ** 65536 is int32, not result_type's uint32
    "u ** 65536", "i ** 256", "2 ** u", "70000 ** u",
    "q < i", "a < b", "a == c", "a != a", "i >= -3", "clip(a, -1, 1)", "clip(i, 0, 300)", "sin(c) + cos(c)",
    "log1p(abs(a))", "expm1(a)", "z + c", "z*2", "w + z", "u + w", "k ** 2", "m ** 2", "m*m", "sqrt(4)", "2*3", "7 / 2",
    "2 ** 62 / 2 ** 61", "where(1 < 2, 3, 4.5)", "a + z", "e * 2", "e + b", "((a))", "a*(b+1)/(c-2)",
    # np.clip reads a 0-d NaN bound as no bound, unless the array is byte-swapped
    "clip(a, 0, n)", "clip(a, n, 0.5)", "clip(a, nb, 1)", "clip(a, n, n)", "clip(b, 0, n)", "clip(i, n, 2)",
    "clip(0.5, log(-1), a)", "clip(a, 0, 1e400 - 1e400)", "clip(a + 1, 0, sqrt(-1))", "clip(n, 0, 1)",
    # Python compares ints, and ints with floats, exactly; int / int is the exact quotient rounded once
    "9007199254740993 == 9007199254740992", "9223372036854775807 < 9223372036854775808",
    "9007199254740993 > 9007199254740992.0", "-9007199254740993 < -9007199254740992.0", "3 > 1e400",
    "9007199254740993 / 3", "2**63 / 3", "5 / -3", "1 / 9223372036854775807", "(2**62 + 1) / (2**62 - 1)",
    "where(9007199254740993 > 9007199254740992.0, a, -a)",
    # an expression that starts like a long option is still the expression
    "--i", "--(a / 2)", "--1", "-a * 2",
]
# Outermost reductions of expressions; var, std and norm within rounding
# (docs/decisions/2026-11-29-var-std-one-pass.md, docs/decisions/2026-11-30-norm.md).
REDUCED = [
    "sum(a*b)", "sum(c*c)", "sum(a*c)", "mean(i)", "min(a-c)", "max(c)", "argmax(c*2)", "argmin(z)", "var(c)",
    "std(c - 1)", "count_nonzero(q)", "any(i > 100)", "all(i > -200)", "nansum(a)", "nanmean(a*2)", "nanmin(a)",
    "nanmax(a)", "norm(c)", "prod(b/b)", "sum(i)", "sum(h*h)", "sum(m*2)", "mean(e)", "sum(where(q, c, 0))",
    "sum(m ** 1.0)",
]


# Expressions with a transcendental function: numpy's own SIMD versions differ by CPU, so
# ooc is held within 4 ulp of each function's value on every path numpy can take here,
# carried through the rest of the expression: (numpy's terms, the error allowed from them
# given `ulp`, one unit in the last place of the result's dtype).
TRANSCENDENTAL_BOUNDS = {
    "sin(c) + cos(c)": ("result = [np.sin(c), np.cos(c), np.sin(c) + np.cos(c)]",
                        lambda t, ulp: TRANSCENDENTAL_ULP * (ulp(t[0]) + ulp(t[1])) + ulp(t[2])),
    "log1p(abs(a))": ("result = [np.log1p(abs(a))]", lambda t, ulp: TRANSCENDENTAL_ULP * ulp(t[0])),
    "exp(h)": ("result = [np.exp(h)]", lambda t, ulp: TRANSCENDENTAL_ULP * ulp(t[0])),
    "expm1(a)": ("result = [np.expm1(a)]", lambda t, ulp: TRANSCENDENTAL_ULP * ulp(t[0])),
}


def names_in(expression, available):
    import re
    return sorted(set(re.findall(r"[A-Za-z_]\w*", expression)) & set(available))


def numpy_value(expression, env):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return np.asarray(eval(expression, {"__builtins__": {}}, env))


class EvalTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = TempDir()
        cls.arrays = arrays()
        cls.paths = {name: cls.tmp.save(f"{name}.npy", a) for name, a in cls.arrays.items()}
        cls.env = {**cls.arrays, **FUNCTIONS}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def bind(self, expression):
        return [f"{n}={self.paths[n]}" for n in names_in(expression, self.paths)]

    def test_expressions_match_numpy_in_dtype_shape_order_and_bits(self):
        out = self.tmp.file("out.npy")
        for k, expression in enumerate(EXPRESSIONS):
            expected = numpy_value(expression, self.env)
            # Both ways to write an output, every other expression each: through the
            # mapping, and with O_DIRECT from buffers (what outputs of 64 MiB or more get
            # by default). Each meets 0-d, empty, 1-d, C and Fortran results.
            io = ("mmap", "direct")[k % 2]
            with self.subTest(expression=expression, io=io):
                run("eval", expression, *self.bind(expression), "-o", out, "--tile-bytes", "4K", "--io", io, "--quiet")
                got = np.load(out)
                self.assertEqual(got.dtype, expected.dtype)
                self.assertEqual(got.shape, expected.shape)
                if got.ndim > 1:
                    self.assertEqual(np.isfortran(got), np.isfortran(expected))
                if expression in TRANSCENDENTAL_BOUNDS:
                    self.within_bound_on_every_simd_path(expression, got)
                else:
                    self.assertTrue(same_bits(got, expected))

    def within_bound_on_every_simd_path(self, expression, got):
        code, bound = TRANSCENDENTAL_BOUNDS[expression]
        names = names_in(expression, self.arrays)
        for path, environment in numpy_simd_paths():
            terms = numpy_in(environment, code, **{n: self.arrays[n] for n in names})
            expected = terms[-1].astype(got.dtype)
            allowed = bound(terms.astype(np.float64),
                            lambda v: np.spacing(np.abs(v).astype(got.dtype)).astype(np.float64))
            same = (got == expected) | (np.isnan(got) & np.isnan(expected))  # infinities included
            error = np.where(same, 0, np.abs(got.astype(np.float64) - expected.astype(np.float64)))
            within = same | (error <= allowed)
            self.assertTrue(np.all(within), f"{expression} ({path}): {np.count_nonzero(~within)} values outside the bound")

    def test_an_outermost_reduction_gives_numpys_scalar(self):
        for expression in REDUCED:
            expected = numpy_value(expression, self.env)
            with self.subTest(expression=expression):
                got = run_json("eval", expression, *self.bind(expression), "--tile-bytes", "4K")
                self.assertEqual(got["dtype"], expected.dtype.name)
                if expression.split("(")[0] in ("var", "std", "norm"):
                    np.testing.assert_allclose(got["value"], float(expected), rtol=1e-12)
                else:
                    self.assertTrue(same_scalar(got["value"], expected), f"ooc {got['value']} numpy {expected}")

    def test_a_streamed_dot_product_is_numpys_sum_of_the_product_for_any_thread_count(self):
        x = sample("<f8", (200003,), seed=11)
        y = sample(">f8", (200003,), seed=12)
        px, py = self.tmp.save("x.npy", x), self.tmp.save("y.npy", y)
        for threads in ("1", "2", "7"):
            got = run_json("eval", "sum(x*y)", f"x={px}", f"y={py}", "--tile-bytes", "8K", "--threads", threads)
            self.assertTrue(same_scalar(got["value"], np.sum(x * y)))

    def test_broadcasting_column_means_back_over_a_tall_matrix(self):
        a = np.asfortranarray(sample("<f8", (5001, 8), seed=13))
        pa = self.tmp.save("tall.npy", a)
        means = self.tmp.file("means.npy")
        run("reduce", "mean", pa, "--axis", "0", "-o", means, "--quiet")
        out = self.tmp.file("dev2.npy")
        run("eval", "(a - m) * (a - m)", f"a={pa}", f"m={means}", "-o", out, "--tile-bytes", "8K", "--threads", "3",
            "--quiet")
        m = a.mean(axis=0)
        expected = (a - m) * (a - m)
        got = np.load(out)
        self.assertTrue(np.isfortran(got))
        self.assertTrue(same_bits(got, expected))

    def test_a_result_of_64_mib_or_more_is_written_whole(self):
        # From 64 MiB a new output is written with O_DIRECT from buffers, not the mapping.
        x = np.arange(8_388_608 + 1000, dtype="<f8")
        px = self.tmp.save("big.npy", x)
        for out in (self.tmp.file("big_out.npy"), self.tmp.file("big_out.h5") + ":/r"):
            run("eval", "x * 2 + 1", f"x={px}", "-o", out, "--quiet")
            if out.endswith(".npy"):
                got = np.load(out)
            else:
                import h5py
                with h5py.File(out.split(":")[0], "r") as f:
                    got = f["r"][()]
            self.assertTrue(same_bits(got, x * 2 + 1), out)
            del got

    def test_small_results_print_as_nested_lists(self):
        got = run_json("eval", "k * 2 + 1", f"k={self.paths['k']}")
        self.assertEqual(got["value"], 7)
        self.assertEqual(got["shape"], [])
        got = run_json("eval", "b > 0", f"b={self.paths['b']}")
        self.assertEqual(got["value"], (self.arrays["b"] > 0).tolist())

    def test_bad_expressions_point_at_the_column(self):
        a = f"a={self.paths['a']}"
        b = f"b={self.paths['b']}"
        cases = [
            (["2*a + ", a], "eval: 2*a + ^ expected an operand at column 7"),
            (["2*a + )", a], "eval: 2*a + ^) expected an operand at column 7"),
            (["(a + 1", a], "expected ')' at column 7"),
            (["a + 1)", a], "unexpected ')' after the expression at column 6"),
            (["a $ 2", a], "unexpected character '$' at column 3"),
            (["a + x", a], "unknown name 'x' (bound: a) at column 5"),
            (["frob(a)", a], "unknown function 'frob'"),
            (["where(a, 1)", a], "where() takes 3 arguments, not 2 at column 1"),
            (["a + sum(a)", a], "sum() must be the outermost call"),
            (["a < b < 1", a, b], "chained comparisons"),
            (["a + v", a, f"v={self.paths['v']}"],
             "eval: a ^+ v operands could not be broadcast together with shapes (300, 40) (7,) at column 3"),
            (["q - q", f"q={self.paths['q']}"], "boolean subtract"),
            (["i ** -2", f"i={self.paths['i']}"], "Integers to negative integer powers"),
            (["a + 2**100", a], "too large"),
            (["-q", f"q={self.paths['q']}"], "boolean negative"),
            (["a", "a"], "is not NAME=ARRAY"),
            (["a", a, a], "bound twice"),
        ]
        for args, message in cases:
            with self.subTest(expression=args[0]):
                proc = run("eval", *args, check=False)
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertIn(message, proc.stderr)
                self.assertEqual(len(proc.stderr.strip().splitlines()), 1)

    def test_a_failed_evaluation_leaves_no_output(self):
        out = self.tmp.file("never.npy")
        proc = run("eval", "i ** j", f"i={self.paths['i']}", f"j={self.paths['i']}", "-o", out, check=False)
        self.assertEqual(proc.returncode, 1, proc.stderr)  # numpy: Integers to negative integer powers
        self.assertIn("negative integer powers", proc.stderr)
        self.assertFalse(os.path.exists(out))
        self.assertEqual([f for f in os.listdir(self.tmp.path) if f.startswith(".never")], [])
        # one line naming the arrays the failing values came from
        self.assertTrue(proc.stderr.startswith(f"oocrun: {self.paths['i']}, {self.paths['i']}: "), proc.stderr)
        self.assertEqual(proc.stderr.count("\n"), 1)
        proc = run("eval", "max(e * 2)", f"e={self.paths['e']}", check=False)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertEqual(proc.stderr, f"oocrun: {self.paths['e']}: zero-size array to reduction operation maximum "
                                      "which has no identity\n")


if __name__ == "__main__":
    unittest.main()

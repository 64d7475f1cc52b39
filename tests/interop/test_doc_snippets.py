"""Every C++ snippet of the documents is code the build compiles.

Each ```cpp block of README.md, DESIGN.md and examples/README.md follows a line
`<!-- snippet: examples/snippets/FILE.cpp NAME -->`, and its lines are those of the
regions `// [snippet: NAME]` ... `// [end snippet]` of that file, joined in order, each
region dedented (blank lines aside). The files are compiled with the examples (target
doc_snippets), so a snippet that stops compiling breaks the build, and one edited in the
document alone fails here. Code quoted in the headers' comments is checked the same
way against the regions named in HEADER_QUOTES. Needs nothing but the source tree.
"""

import os
import re
import textwrap
import unittest
from pathlib import Path

SOURCE_DIR = Path(os.environ.get("OOC_SOURCE_DIR") or Path(__file__).resolve().parents[2])
DOCUMENTS = ["README.md", "DESIGN.md", "examples/README.md"]
MARKER = re.compile(r"^<!-- snippet: (\S+) (\S+) -->$")
# header -> (snippet file, region) whose code the header's comments quote verbatim
HEADER_QUOTES = {
    "include/ooc/kernel.hpp": ("examples/snippets/design.cpp", "kernel_hpp"),
    "include/ooc/scalar.hpp": ("examples/snippets/design.cpp", "scalar_hpp"),
}


def code_lines(text):
    return [line.rstrip() for line in text.splitlines() if line.strip()]


def regions(path, name):
    """The lines of the regions called `name` in `path`, each dedented, in file order."""
    lines, inside, found = [], None, 0
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if stripped == f"// [snippet: {name}]":
            inside, found = [], found + 1
        elif stripped == "// [end snippet]" and inside is not None:
            lines += code_lines(textwrap.dedent("\n".join(inside)))
            inside = None
        elif inside is not None:
            inside.append(line)
    if not found:
        raise AssertionError(f"{path}: no region '{name}'")
    return lines


def cpp_blocks(document):
    """(marker match or None, line number, block lines) for each ```cpp block."""
    lines = (SOURCE_DIR / document).read_text().splitlines()
    for i, line in enumerate(lines):
        if line.strip() == "```cpp":
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            marker = MARKER.match(lines[i - 1].strip()) if i > 0 else None
            yield marker, i + 1, lines[i + 1:end]


class DocSnippetTest(unittest.TestCase):
    def test_every_cpp_block_is_a_compiled_snippet_region(self):
        seen = 0
        for document in DOCUMENTS:
            for marker, line, block in cpp_blocks(document):
                seen += 1
                with self.subTest(document=document, line=line):
                    self.assertIsNotNone(marker, f"{document}:{line}: a ```cpp block without a snippet marker")
                    source = SOURCE_DIR / marker.group(1)
                    self.assertTrue(source.is_file(), f"{document}:{line}: {source} does not exist")
                    self.assertEqual(code_lines("\n".join(block)), regions(source, marker.group(2)),
                                     f"{document}:{line} differs from {marker.group(1)} {marker.group(2)}")
        self.assertGreaterEqual(seen, 7)

    def test_code_quoted_in_the_headers_is_a_compiled_snippet_region(self):
        for header, (source, name) in HEADER_QUOTES.items():
            comments = " ".join(line.strip().removeprefix("///").strip()
                                for line in (SOURCE_DIR / header).read_text().splitlines()
                                if line.strip().startswith("///"))
            code = " ".join(line.strip() for line in regions(SOURCE_DIR / source, name))
            self.assertIn(code, " ".join(comments.split()), f"{header} does not quote {source} {name}")

    def test_the_snippet_files_are_compiled_by_the_build(self):
        cmake = (SOURCE_DIR / "examples" / "CMakeLists.txt").read_text()
        for source in sorted((SOURCE_DIR / "examples" / "snippets").glob("*.cpp")):
            self.assertIn(f"snippets/{source.name}", cmake, f"{source} is not built")


if __name__ == "__main__":
    unittest.main(verbosity=2)

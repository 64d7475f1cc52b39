"""Library messages name no command-line flags.

The library (include/, src/ but src/cli/, kernels/) speaks its API's terms: an error whose
fix is one of the caller's options names it as the API does ("overwrite", "tile_bytes")
and says which words those are (ooc::Error::option()); oocrun says its flag there
("--overwrite"), the Python module its keyword. Any string literal in the library with a
"--word" in it fails this check, unless it is on the short list below of literals that
are no flag of oocrun's.
"""

import os
import re
import sys

SOURCE = os.environ.get("OOC_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Literals that hold "--word" and are no message naming a flag: (file, literal text).
# None today: the command line an in-place journal records comes from its caller.
ALLOWED = set()

LITERAL = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def strip_comments(text):
    """The text with // and /* */ comments blanked (string literals kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"' or c == "'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            blanked = text[i:(n if j < 0 else j + 2)]
            out.append("".join("\n" if ch == "\n" else " " for ch in blanked))
            i = n if j < 0 else j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def library_files():
    for top in ("include", "src", "kernels"):
        for root, dirs, files in os.walk(os.path.join(SOURCE, top)):
            rel = os.path.relpath(root, SOURCE)
            if rel == os.path.join("src", "cli") or rel.startswith(os.path.join("src", "cli") + os.sep):
                dirs[:] = []
                continue
            for name in sorted(files):
                if name.endswith((".cpp", ".hpp", ".h", ".c")):
                    yield os.path.join(root, name)


def main():
    found = []
    checked = 0
    for path in library_files():
        checked += 1
        rel = os.path.relpath(path, SOURCE)
        with open(path, encoding="utf-8", errors="replace") as f:
            code = strip_comments(f.read())
        for line_no, line in enumerate(code.splitlines(), 1):
            for literal in LITERAL.findall(line):
                if FLAG.search(literal) and (rel, literal) not in ALLOWED:
                    found.append(f"{rel}:{line_no}: \"{literal}\"")
    if checked < 20:
        print(f"messages_check: only {checked} library files found under {SOURCE}", file=sys.stderr)
        return 1
    if found:
        print("Library messages name command-line flags; say the option in the API's terms and give its words\n"
              "as ooc::Error's option (oocrun says its flag there):", file=sys.stderr)
        for f in found:
            print("  " + f, file=sys.stderr)
        return 1
    print(f"messages_check: {checked} library files, no flag in a message")
    return 0


if __name__ == "__main__":
    sys.exit(main())

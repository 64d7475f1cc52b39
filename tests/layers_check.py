#!/usr/bin/env python3
"""The layers of ooc (DESIGN.md "Layers"), checked on every #include of the tree.

A file may include headers of its own layer and the layers under it; oocrun (src/cli)
and the Python module (python/) include only ooc's public headers (include/ooc), and the
CLI its own. The compile enforces the internal headers too (src/<layer>/layer.hpp); this
check also covers the public headers, which every layer can reach on its include path.
Run by ctest as `layers`; exits 1 naming each arrow that runs back up.
"""
import os
import re
import sys

LAYERS = {"base": 0, "os": 1, "format": 2, "core": 3, "kernels": 4, "mpi": 5, "caller": 6}
NAMES = {v: k for k, v in LAYERS.items()}

# Public headers by the layer that implements them; the rest of include/ooc is core's API.
PUBLIC = {
    "error.hpp": 0, "dtype.hpp": 0, "shape.hpp": 0, "scalar.hpp": 0, "state_bytes.hpp": 0,
    "compression.hpp": 2,
    "mpi.hpp": 5, "ooc.hpp": 4,
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
DETAIL = re.compile(r"\b(?:ooc::)?detail::")


def layer_of_file(path):
    """The layer a source file belongs to, or None for files outside the library's layers."""
    parts = path.split("/")
    if parts[0] == "src" and len(parts) > 2:
        return {"base": 0, "os": 1, "format": 2, "core": 3, "mpi": 5, "cli": 6}.get(parts[1])
    if parts[0] == "kernels":
        return 4
    if parts[0] == "python":
        return 6
    if parts[0] == "include":
        return layer_of_public(parts[-2], parts[-1])
    return None


def layer_of_public(folder, name):
    if folder == "kernels":
        return 4
    return PUBLIC.get(name, 3)


def layer_of_include(includer, target):
    """(layer, kind) of what `#include "target"` in `includer` names."""
    if target.startswith("ooc/"):
        parts = target.split("/")
        return layer_of_public(parts[-2], parts[-1]), "public"
    first = target.split("/")[0]
    if first in ("base", "os", "format", "core"):
        return LAYERS[first], "internal"
    if first == "cli":
        return 6, "cli"
    # A name relative to the includer's folder (kernels' own headers, "layer.hpp").
    return layer_of_file(os.path.join(os.path.dirname(includer), target)), "internal"


def problems_in(files):
    """files: {path: text}. Returns the arrows that break the layering."""
    found = []
    for path, text in sorted(files.items()):
        level = layer_of_file(path)
        if level is None:
            continue
        for target in INCLUDE.findall(text):
            to, kind = layer_of_include(path, target)
            if to is None:
                continue
            caller = path.startswith(("src/cli/", "python/"))
            if caller and target.startswith("ooc/internal/"):
                found.append(f"{path}: includes {target}, which the templates of the public headers use "
                             "(callers use the public API)")
            elif caller and kind == "internal":
                found.append(f"{path}: includes {target}, outside include/ooc (callers use the public API)")
            elif kind == "cli" and not path.startswith("src/cli/"):
                found.append(f"{path}: includes {target}, oocrun's own header")
            elif path.startswith("include/") and kind != "public":
                found.append(f"{path}: a public header includes {target}, an internal one")
            elif not caller and to > level:
                found.append(f"{path} (ooc_{NAMES[level]}) includes {target} (ooc_{NAMES[to]}): an arrow back up")
        if path.startswith(("src/cli/", "python/")) and DETAIL.search(text):
            found.append(f"{path}: uses ooc::detail, the templates' internals (callers use the public API)")
    return found


def tree(root):
    files = {}
    for top in ("src", "kernels", "include", "python"):
        for folder, _, names in os.walk(os.path.join(root, top)):
            for name in names:
                if name.endswith((".cpp", ".hpp", ".h")):
                    full = os.path.join(folder, name)
                    with open(full, encoding="utf-8") as f:
                        files[os.path.relpath(full, root)] = f.read()
    return files


def main():
    root = os.environ.get("OOC_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # The check itself: each kind of wrong arrow is caught.
    planted = {
        "src/os/file.cpp": '#include "format/hdf5.hpp"\n',
        "src/format/npy.cpp": '#include "ooc/mapped_array.hpp"\n',
        "src/core/pipeline.cpp": '#include "ooc/kernels/expr.hpp"\n',
        "src/cli/apply.cpp": '#include "core/pending_output.hpp"\n',
        "python/ooc_module.cpp": '#include "format/hdf5.hpp"\n',
        "src/cli/reduce.cpp": '#include "ooc/internal/pipeline.hpp"\n',
        "src/cli/eval.cpp": 'ooc::detail::Streams streams(plan, options);\n',
        "include/ooc/dtype.hpp": '#include "os/file.hpp"\n',
        "src/core/journal.cpp": '#include "format/hdf5.hpp"\n#include "ooc/dtype.hpp"\n',  # both fine
    }
    caught = problems_in(planted)
    if len(caught) != 8:
        print("layers_check: the check itself is wrong; it found:\n  " + "\n  ".join(caught))
        return 1
    found = problems_in(tree(root))
    for line in found:
        print(line)
    print(f"layers: {len(tree(root))} files checked, {len(found)} arrows back up")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

"""docs/DESIGN.md opens with the layout of the tree: every file of Sources/,
every directory of Tests/ and Examples/, every file of Fuzz/ and tools/ is
named there, so a new file cannot land unexplained."""
import re

from pamenv import ROOT


def layout_text():
    design = (ROOT / "docs/DESIGN.md").read_text()
    match = re.search(r"^## Layout\n(.*?)^## ", design, re.S | re.M)
    assert match, "docs/DESIGN.md has no Layout section"
    assert design.index("## Layout") < design.index("## The model"), "the layout comes first"
    return match.group(1)


def test_the_layout_names_every_file():
    text = layout_text()
    wanted = [path for path in (ROOT / "Sources").rglob("*") if path.is_file()]
    wanted += [path for top in ("Tests", "Examples") for path in (ROOT / top).iterdir() if path.is_dir()]
    wanted += [path for top in ("Fuzz", "tools") for path in (ROOT / top).iterdir() if path.is_file()]
    missing = [str(path.relative_to(ROOT)) for path in wanted if not re.search(rf"(?<![\w.-]){re.escape(path.name)}(?![\w-])", text)]
    assert missing == [], f"not in docs/DESIGN.md's layout: {missing}"

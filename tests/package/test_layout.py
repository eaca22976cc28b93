"""docs/DESIGN.md opens with the layout of the tree: every file of Sources/,
every directory of Examples/, every tier of tests/ and of tests/unit/, every
file of tests/support/ and its programs, every file of Fuzz/ and tools/ is
named there, so a new file cannot land unexplained. And the Makefile's
hand-written Embedded module chain is Package.swift's."""
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
    wanted += [path for top in ("Examples", "tests", "tests/unit", "tests/support/programs", "tests/support/load")
               for path in (ROOT / top).iterdir() if path.is_dir() and path.name != "__pycache__"]
    wanted += [path for top in ("Fuzz", "tools", "tests/support", "tests/support/programs", "tests/support/load")
               for path in (ROOT / top).iterdir() if path.is_file()]
    missing = [str(path.relative_to(ROOT)) for path in wanted if not re.search(rf"(?<![\w.-]){re.escape(path.name)}(?![\w-])", text)]
    assert missing == [], f"not in docs/DESIGN.md's layout: {missing}"


def swift_targets():
    """Package.swift's targets: {source folder: (name, [dependencies])}."""
    manifest = (ROOT / "Package.swift").read_text()
    targets = {}
    for match in re.finditer(r'\.(?:target|executableTarget|testTarget)\(name: "([^"]+)"(?:, dependencies: \[([^\]]*)\])?, path: "([^"]+)"',
                             manifest):
        name, dependencies, path = match.groups()
        targets[path] = (name, re.findall(r'"([^"]+)"', dependencies or ""))
    return targets


def test_the_makefiles_module_chain_is_package_swifts():
    """The Makefile builds the module and the helper as Embedded Swift over
    Package.swift's module graph, by hand: each Swift module's object must
    depend on exactly the Swift modules its target depends on (directly or
    through another), so a dependency added in one build is added in both."""
    makefile = (ROOT / "Makefile").read_text()
    folders = dict(re.findall(r"^(\w+_SOURCES) := \$\(wildcard (Sources/[\w]+)/\*\.swift\)", makefile, re.M))
    targets = swift_targets()
    by_name = {name: path for path, (name, _) in targets.items()}
    swift_modules = {name for path, (name, _) in targets.items() if any((ROOT / path).glob("*.swift"))}

    def closure(name):
        found, stack = set(), [name]
        while stack:
            for dependency in targets[by_name[stack.pop()]][1]:
                if dependency in swift_modules and dependency not in found:
                    found.add(dependency)
                    stack.append(dependency)
        return found

    rules = re.findall(r"^\$\(BUILD\)/(\w+)\.o: \$\((\w+_SOURCES)\)(.*)$", makefile, re.M)
    assert len(rules) >= 5, rules
    for obj, sources, prerequisites in rules:
        folder = folders[sources]
        assert obj == folder.split("/")[-1], (obj, folder)
        name = targets[folder][0]
        made = set(re.findall(r"\$\(BUILD\)/(\w+)\.o", prerequisites))
        wanted = {by_name[dependency].split("/")[-1] for dependency in closure(name)}
        assert made == wanted, f"{obj}.o depends on {sorted(made)} in the Makefile, {sorted(wanted)} in Package.swift"

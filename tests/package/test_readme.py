"""README's promises against the code: every command in its shell blocks
is one the code has (a make target, a `localauth` verb and its options, the
package the build makes, the pam-auth-update switch tests/package/test_install.py
runs), every `localauth` command it names inline exists, every test it
cites exists and names the programs it claims, the transcript is the
module's own words, and every link of README and docs/ leads to a file.
The commands that install and enable are run for real by
tests/package/test_package.py and tests/package/test_install.py; this file checks that the
README still says what they run."""
import re
import subprocess

import pytest

from pamenv import ROOT, localauth_command
from sentences import NO_MATCH_TOUCH_OR_TYPE

README = (ROOT / "README.md").read_text()


def shell_lines(text):
    """The commands of the ```sh blocks, comments dropped."""
    lines = []
    for block in re.findall(r"^```sh\n(.*?)^```$", text, re.M | re.S):
        for line in block.splitlines():
            command = line.split("#", 1)[0].strip()
            if command:
                lines.append(command)
    return lines


def make_targets():
    return set(re.findall(r"^([A-Za-z][\w.-]*):", (ROOT / "Makefile").read_text(), re.M))


def package_file():
    version = re.match(r"localauth \(([^)]+)\)", (ROOT / "packaging/debian/changelog").read_text()).group(1)
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True, check=True).stdout.strip()
    return f"./.build/deb/localauth_{version}_{arch}.deb"


def verb_help(verb):
    result = subprocess.run([str(localauth_command()), verb, "--help"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, (verb, result.stderr)
    return result.stdout


def check_command(line):
    words = line.split()
    if words[0] == "sudo":
        # A command the person runs from their own account (`sudo localauth test`).
        words = words[1:]
    if words[0] == "make":
        missing = set(words[1:]) - make_targets()
        assert not missing, f"{line}: no such make target {missing}"
    elif words[0] == "apt" and words[1] == "install":
        assert words[2] == package_file(), f"{line}: the package the build makes is {package_file()}"
    elif words[0] == "apt" and words[1] in ("remove", "purge"):
        assert words[2] == re.search(r"^Package: (\S+)", (ROOT / "packaging/debian/control.in").read_text(), re.M).group(1)
    elif words[0] == "localauth":
        verb = words[1]
        usage = verb_help(verb if verb != "config" else "config")
        for option in (w for w in words[2:] if w.startswith("--")):
            assert option in usage, f"{line}: {option} is not an option of localauth {verb}"
    elif words[0] == "pam-auth-update":
        # tests/package/test_install.py runs exactly these with the real pam-auth-update.
        assert line in (ROOT / "tests/package/test_install.py").read_text(), f"{line}: not a switch tests/package/test_install.py runs"
    else:
        pytest.fail(f"README runs {line!r}, which no check here knows")


@pytest.mark.parametrize("line", shell_lines(README))
def test_every_readme_command_is_one_the_code_has(line):
    check_command(line)


def test_the_two_commands_are_the_ones_ci_runs():
    assert "make deps demo" in shell_lines(README) and "make deps test" in shell_lines(README)
    assert "make deps test" in (ROOT / ".ci/run").read_text()


def test_every_localauth_command_named_inline_exists():
    verbs = set(re.findall(r"`localauth (\w+)", README))
    usage = subprocess.run([str(localauth_command()), "--help"], capture_output=True, text=True, timeout=30).stdout
    known = set(re.findall(r"^  (\w+) ", usage, re.M))
    assert verbs and verbs <= known, verbs - known


def test_the_program_table_cites_tests_that_exist_and_run_those_programs():
    table = [line for line in README.splitlines() if line.startswith("| ") and "`tests/" in line]
    assert table and all(re.search(r"`tests/(?:\w+/)*test_\w+\.py`", row) for row in table), table
    for row in table:
        for path in re.findall(r"`(tests/(?:\w+/)*test_\w+\.py)`", row):
            assert (ROOT / path).is_file(), path
    lockers_row = next(row for row in table if row.startswith("| screen lockers"))
    lockers = re.findall(r"\b[\w-]+\b", lockers_row.split("|")[1].split(":", 1)[1])
    tested = set(re.findall(r'"([\w-]+)": ', re.search(r"LOCKERS = \{(.*?)\}\n", (ROOT / "tests/programs/test_lockers.py").read_text(),
                                                        re.S).group(1)))
    assert lockers and set(lockers) <= tested, set(lockers) - tested


def test_the_transcript_is_the_modules_own_words():
    transcript = re.search(r"^```text\n\$ sudo -k id\n(.*?)^```$", README, re.M | re.S).group(1).splitlines()
    programs = (ROOT / "tests/programs/test_real_programs.py").read_text()
    constant = {name: value for name, value in re.findall(r'^(\w+) = f?"([^"]*)"', programs, re.M)}
    instruction = constant["INSTRUCTION"].replace("{USER}", "alice").replace("Swipe your finger across", "Touch")
    assert transcript == [instruction, NO_MATCH_TOUCH_OR_TYPE, constant["ID_ROOT"]], transcript


@pytest.mark.parametrize("document", ["README.md", "CONTRIBUTING.md"] + sorted(
    str(path.relative_to(ROOT)) for path in (ROOT / "docs").glob("*.md")))
def test_every_link_leads_to_a_file(document):
    path = ROOT / document
    for target in re.findall(r"\]\(([^)#\s]+)\)", path.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        assert (path.parent / target).exists(), f"{document}: {target}"

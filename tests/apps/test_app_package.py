"""An app depends on the LocalAuthentication product as a Swift package, by
version, the way docs/SWIFT.md tells an app developer to: its manifest, its
terminal app and its GUI presenter, taken from the guide as they are
written (only the package's address changed). SwiftPM refuses a versioned
dependency whose targets carry unsafe flags, so this builds only while the
product's targets have none. The package is this tree (its tracked and new
files) committed and tagged in a scratch repository; the app is built and run."""
import os
import re
import shutil
import subprocess


from pamenv import ROOT

SWIFT_GUIDE = ROOT / "docs" / "SWIFT.md"
PUBLISHED_URL = "https://example.org/localauth.git"


def guide_blocks():
    """The Swift blocks of docs/SWIFT.md: the manifest, the terminal app,
    the GUI presenter."""
    blocks = re.findall(r"^```swift\n(.*?)^```$", SWIFT_GUIDE.read_text(), re.M | re.S)
    assert len(blocks) == 3, f"docs/SWIFT.md has {len(blocks)} Swift blocks, not the manifest and the two examples"
    assert PUBLISHED_URL in blocks[0] and "from: \"1.0.0\"" in blocks[0], blocks[0]
    return blocks


def run(argv, cwd, env=None, timeout=900):
    result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, (argv, result.stdout[-3000:], result.stderr[-3000:])
    return result


def test_an_app_depends_on_the_product_by_version(tmp_path):
    swift = shutil.which("swift")
    assert swift, "the Swift toolchain is missing"
    # SwiftPM's caches and the compiler's scratch files stay in the test's directory.
    (tmp_path / "scratch").mkdir()
    env = dict(os.environ, HOME=str(tmp_path / "home"), TMPDIR=str(tmp_path / "scratch"))
    repo = tmp_path / "localauth"
    files = run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT).stdout.split("\0")
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, repo / name)
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@localhost", "-c", "init.defaultBranch=main"]
    run(git + ["init", "-q"], cwd=repo)
    run(git + ["add", "-A"], cwd=repo)
    run(git + ["commit", "-qm", "release"], cwd=repo)
    run(git + ["tag", "1.0.0"], cwd=repo)

    manifest, terminal_app, presenter = guide_blocks()
    app = tmp_path / "app"
    (app / "Sources/PaymentApp").mkdir(parents=True)
    (app / "Package.swift").write_text(manifest.replace(PUBLISHED_URL, f"file://{repo}"))
    (app / "Sources/PaymentApp/main.swift").write_text(terminal_app)
    (app / "Sources/PaymentApp/SheetPresenter.swift").write_text(presenter)
    built = subprocess.run([swift, "build", "--scratch-path", str(app / ".build")], cwd=app, env=env,
                           capture_output=True, text=True, timeout=900)
    assert "unsafe build flags" not in built.stdout + built.stderr, built.stderr
    assert built.returncode == 0, (built.stdout[-3000:], built.stderr[-3000:])
    # No helper is installed on this machine, or no terminal to show the
    # sheet on: the app says which of its documented endings it met.
    ran = subprocess.run([str(app / ".build/debug/PaymentApp")], cwd=app, env=env, stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=60)
    lines = ran.stdout.splitlines()
    assert lines, (ran.stdout, ran.stderr)
    if ran.returncode == 1:
        assert lines[0].startswith("cannot authenticate here: "), ran.stdout
    else:
        assert ran.returncode == 0 and lines[-1] in ("payment confirmed", "cancelled") or lines[-1].startswith("not confirmed"), ran.stdout

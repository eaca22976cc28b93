"""An app depends on the LocalAuthentication product as a Swift package, by
version, the way docs/SWIFT.md tells an app developer to: its manifest, its
terminal app, its GUI presenter and its rights (a secret behind the
finger), taken from the guide as they are
written (only the package's address changed), resolved against a clone of
this repository, whose release tag the guide's version must name. SwiftPM
refuses a versioned dependency whose targets carry unsafe flags, so the
manifest may carry none. The app is built and run."""
import os
import re
import shutil
import subprocess


from pamenv import ROOT

SWIFT_GUIDE = ROOT / "docs" / "SWIFT.md"
PUBLISHED_URL = "https://example.org/localauth.git"


def guide_blocks():
    """The Swift blocks of docs/SWIFT.md: the manifest, the terminal app,
    the GUI presenter, the rights."""
    blocks = re.findall(r"^```swift\n(.*?)^```$", SWIFT_GUIDE.read_text(), re.M | re.S)
    assert len(blocks) == 4, f"docs/SWIFT.md has {len(blocks)} Swift blocks, not the manifest and the three examples"
    assert PUBLISHED_URL in blocks[0], blocks[0]
    return blocks


def release():
    """The version the package is released as (its Debian changelog's)."""
    return re.match(r"localauth \(([^)]+)\)", (ROOT / "packaging/debian/changelog").read_text()).group(1)


def git(*argv):
    return subprocess.run(["git", *argv], cwd=ROOT, capture_output=True, text=True)


def test_the_guide_names_the_release_and_the_repository_has_its_tag():
    """The guide's `from:` is the changelog's release. A repository that
    carries tags carries that release's, on this branch's history; a clone
    made without tags (CI's is one) has none to check."""
    manifest = guide_blocks()[0]
    assert f'from: "{release()}"' in manifest, manifest
    if not git("tag", "--list").stdout.split():
        return
    assert git("tag", "--list", release()).stdout.split() == [release()], (
        f"this repository has tags but not {release()}, which docs/SWIFT.md's manifest names")
    assert git("merge-base", "--is-ancestor", release(), "HEAD").returncode == 0, f"the tag {release()} is not on this branch"


def test_the_manifest_carries_no_unsafe_flags():
    """SwiftPM refuses a versioned dependency with unsafe flags: the next
    release must not carry any either."""
    assert "unsafeFlags" not in (ROOT / "Package.swift").read_text()


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
    # A clone of this repository, tags and all, as SwiftPM would clone the
    # published one (no network here). Where this checkout came without
    # tags, the clone's head is tagged with the release, as publishing it
    # would tag it.
    repo = tmp_path / "localauth"
    run(["git", "clone", "-q", str(ROOT), str(repo)], cwd=tmp_path)
    if not run(["git", "tag", "--list", release()], cwd=repo).stdout.split():
        run(["git", "-c", "user.name=test", "-c", "user.email=test@localhost", "tag", release()], cwd=repo)

    manifest, terminal_app, presenter, rights = guide_blocks()
    app = tmp_path / "app"
    (app / "Sources/PaymentApp").mkdir(parents=True)
    (app / "Package.swift").write_text(manifest.replace(PUBLISHED_URL, f"file://{repo}"))
    (app / "Sources/PaymentApp/main.swift").write_text(terminal_app)
    (app / "Sources/PaymentApp/SheetPresenter.swift").write_text(presenter)
    (app / "Sources/PaymentApp/Rights.swift").write_text(rights)
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

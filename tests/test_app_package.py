"""An app depends on the LocalAuthentication product as a Swift package, by
version, the way an app developer writes it: SwiftPM refuses a versioned
dependency whose targets carry unsafe flags, so this builds only while the
product's targets have none. The package is this tree (its tracked and new
files) committed and tagged in a scratch repository; the app is built and run."""
import os
import shutil
import subprocess

import pytest

from pamenv import ROOT

APP_MANIFEST = """// swift-tools-version:6.0
import PackageDescription
let package = Package(
    name: "PaymentApp",
    dependencies: [.package(url: "file://{repo}", from: "1.0.0")],
    targets: [.executableTarget(name: "PaymentApp",
                                dependencies: [.product(name: "LocalAuthentication", package: "localauth")])]
)
"""

APP_SOURCE = """import Foundation
import LocalAuthentication

let context = LAContext()
var error: NSError?
let can = context.canEvaluatePolicy(.deviceOwnerAuthentication, error: &error)
print("can-evaluate", can, error?.domain ?? "-")
"""


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

    app = tmp_path / "app"
    (app / "Sources/PaymentApp").mkdir(parents=True)
    (app / "Package.swift").write_text(APP_MANIFEST.format(repo=repo))
    (app / "Sources/PaymentApp/main.swift").write_text(APP_SOURCE)
    built = subprocess.run([swift, "build", "--scratch-path", str(app / ".build")], cwd=app, env=env,
                           capture_output=True, text=True, timeout=900)
    assert "unsafe build flags" not in built.stdout + built.stderr, built.stderr
    assert built.returncode == 0, (built.stdout[-3000:], built.stderr[-3000:])
    ran = run([str(app / ".build/debug/PaymentApp")], cwd=app, env=env, timeout=60)
    words = ran.stdout.split()
    assert words[:1] == ["can-evaluate"] and words[1] in ("true", "false"), ran.stdout
    if words[1] == "false":
        assert words[2] == "com.apple.LocalAuthentication", ran.stdout

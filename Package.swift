// swift-tools-version:6.0
// The ordinary-Swift build: the policy library, the PAM adapter (type-checked
// here; the installed module is built as Embedded Swift by the Makefile from
// the same sources), test tools and the unit tests.
import PackageDescription

let package = Package(
    name: "localauth",
    products: [
        .library(name: "LocalAuth", targets: ["LocalAuth"]),
        .executable(name: "localauth", targets: ["localauth"]),
    ],
    targets: [
        .target(name: "CLocalAuth", path: "Sources/CLocalAuth"),
        .target(name: "LocalAuth", dependencies: ["CLocalAuth"], path: "Sources/LocalAuth"),
        .target(name: "PAMModule", dependencies: ["LocalAuth", "CLocalAuth"], path: "Sources/PAMModule"),
        .target(name: "LocalAuthCLI", dependencies: ["LocalAuth", "PAMModule"], path: "Sources/LocalAuthCLI"),
        .executableTarget(name: "localauth", dependencies: ["LocalAuthCLI"], path: "Sources/localauth"),
        .executableTarget(name: "la-store-probe", dependencies: ["LocalAuth"], path: "Sources/la-store-probe"),
        .testTarget(name: "LocalAuthTests", dependencies: ["LocalAuth", "CLocalAuth"], path: "Tests/LocalAuthTests"),
    ]
)

// swift-tools-version:6.2
// The ordinary-Swift build: the policy library, the real adapters, the
// module's entry points (type-checked here; the installed module is built as
// Embedded Swift by the Makefile over the same module graph), the command-line
// tool, and the unit tests with their test tools. Warnings are errors.
import PackageDescription

// Warnings are errors through the manifest's own settings, not unsafe
// flags: an app can then depend on the LocalAuthentication product by version.
let strict: [SwiftSetting] = [.treatAllWarnings(as: .error)]
let strictC: [CSetting] = [.enableWarning("all"), .enableWarning("extra"), .treatAllWarnings(as: .error)]

let package = Package(
    name: "localauth",
    products: [
        .library(name: "LocalAuth", targets: ["LocalAuth"]),
        // Apple's LocalAuthentication API for apps (Foundation; over the helper).
        .library(name: "LocalAuthentication", targets: ["LocalAuthentication"]),
        .executable(name: "localauth", targets: ["LocalAuthCommand"]),
    ],
    targets: [
        // Wiping memory: the policy library's only C.
        .target(name: "CMemory", path: "Sources/CMemory", cSettings: strictC),
        // libc, for the system layer.
        .target(name: "CLibc", path: "Sources/CLibc", cSettings: strictC),
        // libpam, sd-bus, sd-login: only the adapters use these.
        .target(name: "CPAMAndBus", path: "Sources/CPAMAndBus", cSettings: strictC),
        // libsodium: only the secrets use it (never the PAM module).
        .target(name: "CSodium", path: "Sources/CSodium", cSettings: strictC),
        // tpm2-tss, loaded when first needed: the machine key's seal (the secrets only).
        .target(name: "CTPM", path: "Sources/CTPM", cSettings: strictC),
        // The policy library: pure (the compiler enforces it: no C but CMemory).
        .target(name: "LocalAuth", dependencies: ["CMemory"], path: "Sources/LocalAuth", swiftSettings: strict),
        // The system layer: system calls, the state store, trusted files, the helper's client.
        .target(name: "LibcSystem", dependencies: ["LocalAuth", "CLibc"], path: "Sources/LibcSystem", swiftSettings: strict),
        // The terminal, for the command-line tool and the app library (not the module or the helper).
        .target(name: "LocalAuthTerminal", dependencies: ["LibcSystem", "CLibc"], path: "Sources/LocalAuthTerminal", swiftSettings: strict),
        .target(name: "PAMAndBusAdapters", dependencies: ["LocalAuth", "LibcSystem", "CLibc", "CPAMAndBus"], path: "Sources/PAMAndBusAdapters",
                swiftSettings: strict, linkerSettings: [.linkedLibrary("pam"), .linkedLibrary("systemd")]),
        .target(name: "PAMModule", dependencies: ["LocalAuth", "LibcSystem", "PAMAndBusAdapters"], path: "Sources/PAMModule", swiftSettings: strict),
        .target(name: "LocalAuthentication", dependencies: ["LocalAuth", "LibcSystem", "LocalAuthTerminal"], path: "Sources/LocalAuthentication", swiftSettings: strict),
        .target(name: "StackLint", dependencies: ["LocalAuth"], path: "Sources/StackLint", swiftSettings: strict),
        // Stored secrets: the seal (libsodium) around the policy library's item format.
        .target(name: "Secrets", dependencies: ["LocalAuth", "LibcSystem", "CSodium", "CTPM"], path: "Sources/Secrets", swiftSettings: strict),
        .target(name: "LocalAuthCLI", dependencies: ["LocalAuth", "LibcSystem", "LocalAuthTerminal", "PAMAndBusAdapters", "StackLint"], path: "Sources/LocalAuthCLI",
                swiftSettings: strict),
        // The setuid helper (type-checked here; installed as Embedded Swift, like the module).
        .executableTarget(name: "localauth-helper", dependencies: ["LocalAuth", "LibcSystem", "PAMAndBusAdapters", "Secrets"], path: "Sources/LocalAuthHelper",
                          swiftSettings: strict),
        .executableTarget(name: "LocalAuthCommand", dependencies: ["LocalAuthCLI"], path: "Sources/localauth", swiftSettings: strict),
        // Apps: the examples (run by `make demo`) and a file that uses only
        // Apple's API, compiled in every build.
        .executableTarget(name: "localauth-example-payment", dependencies: ["LocalAuthentication"],
                          path: "Examples/PaymentConfirmation", swiftSettings: strict),
        .executableTarget(name: "localauth-example-unlock", dependencies: ["LocalAuthentication"],
                          path: "Examples/BiometricUnlock", swiftSettings: strict),
        .executableTarget(name: "localauth-example-fingerprint-only", dependencies: ["LocalAuthentication"],
                          path: "Examples/FingerprintOnly", swiftSettings: strict),
        .executableTarget(name: "localauth-example-wrapper", dependencies: ["LocalAuthentication"],
                          path: "Examples/CallbackWrapper", swiftSettings: strict),
        .target(name: "AppleAPICompatibility", dependencies: ["LocalAuthentication"], path: "tests/unit/AppleAPICompatibility",
                swiftSettings: strict),
        // Test support.
        .target(name: "PAMConstants", path: "tests/unit/PAMConstants", cSettings: strictC),
        .executableTarget(name: "la-app-probe", dependencies: ["LocalAuthentication"], path: "tests/support/programs/AppProbe", swiftSettings: strict),
        .executableTarget(name: "la-store-probe", dependencies: ["LocalAuth", "LibcSystem", "PAMAndBusAdapters"], path: "tests/support/programs/StoreProbe",
                          swiftSettings: strict),
        .testTarget(name: "LocalAuthenticationTests", dependencies: ["LocalAuthentication", "LocalAuth", "LibcSystem"],
                    path: "tests/unit/LocalAuthenticationTests", swiftSettings: strict),
        .testTarget(name: "LocalAuthTests", dependencies: ["LocalAuth", "LibcSystem", "StackLint", "PAMConstants", "Secrets"],
                    path: "tests/unit/LocalAuthTests",
                    swiftSettings: strict),
    ]
)

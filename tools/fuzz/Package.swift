// swift-tools-version:6.0
// libFuzzer targets for ATTStack (the decoder) and GATTClient (the engine). Kept out of the root package: a fuzz target has no `main` (libFuzzer
// supplies it), so it links only when built with `--sanitize fuzzer`. Build and run with run.sh:
//   tools/fuzz/run.sh fuzz-att-decode 60
//   tools/fuzz/run.sh fuzz-engine 60
//   tools/fuzz/run.sh fuzz-capture 60
import PackageDescription

let package = Package(
    name: "att-fuzz",
    products: [
        .executable(name: "fuzz-att-decode", targets: ["FuzzATTDecode"]),
        .executable(name: "fuzz-engine", targets: ["FuzzEngine"]),
        .executable(name: "fuzz-capture", targets: ["FuzzCapture"]),
    ],
    dependencies: [
        .package(name: "mirror", path: "../.."),
    ],
    targets: [
        .executableTarget(
            name: "FuzzATTDecode",
            dependencies: [.product(name: "ATTStack", package: "mirror")]
        ),
        // The transaction engine and GATT procedures against a peer the fuzzer plays (see FuzzEngine.swift).
        .executableTarget(
            name: "FuzzEngine",
            dependencies: [
                .product(name: "ATTStack", package: "mirror"),
                .product(name: "LinkCore", package: "mirror"),
                .product(name: "GATTClient", package: "mirror"),
                .product(name: "GATTServer", package: "mirror"),
                .product(name: "HostilePeer", package: "mirror"),
                // ManualClock; TestSupport has no XCTest.
                .product(name: "TestSupport", package: "mirror"),
            ]
        ),
        // The btsnoop reader and the LE connections and ATT it follows (`mirror clone --from`).
        .executableTarget(
            name: "FuzzCapture",
            dependencies: [.product(name: "ATTStack", package: "mirror"), .product(name: "CaptureReader", package: "mirror")]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// swift-tools-version:6.0
// The mirror BLE host tool: raw ATT over L2CAP CID 4 on Linux, a GATT client, and the `mirror` CLI.
import PackageDescription

let package = Package(
    name: "mirror",
    products: [
        .executable(name: "mirror", targets: ["MirrorCLI"]),
        .executable(name: "att-bench", targets: ["ATTBench"]),
        .executable(name: "bearer-e2e", targets: ["BearerE2E"]),
        .library(name: "ATTStack", targets: ["ATTStack"]),
        .library(name: "GATTClient", targets: ["GATTClient"]),
    ],
    targets: [
        // Every syscall, ioctl and libcap call, over BlueZ's own headers (libbluetooth-dev).
        .target(
            name: "CBlueZSocket",
            linkerSettings: [.linkedLibrary("bluetooth"), .linkedLibrary("cap")]
        ),
        .target(name: "ATTStack", dependencies: ["CBlueZSocket"]),
        .target(name: "GATTClient", dependencies: ["ATTStack"]),
        .executableTarget(name: "MirrorCLI", dependencies: ["GATTClient", "ATTStack"]),
        .executableTarget(name: "ATTBench", dependencies: ["ATTStack"], path: "tools/att-bench"),
        // Exercises the socket bearer end to end (listen/echo, connect/check) in the Bluetooth VM and here.
        .executableTarget(name: "BearerE2E", dependencies: ["ATTStack"], path: "tools/bearer-e2e"),
        .testTarget(name: "ATTStackTests", dependencies: ["ATTStack", "CBlueZSocket"]),
        .testTarget(name: "GATTClientTests", dependencies: ["GATTClient", "ATTStack"]),
    ],
    swiftLanguageModes: [.v6]
)

// swift-tools-version:6.0
// libFuzzer targets for ATTStack. Kept out of the root package: a fuzz target has no `main` (libFuzzer
// supplies it), so it links only when built with `--sanitize fuzzer`. Build and run with run.sh:
//   tools/fuzz/run.sh fuzz-att-decode 60
import PackageDescription

let package = Package(
    name: "att-fuzz",
    products: [
        .executable(name: "fuzz-att-decode", targets: ["FuzzATTDecode"]),
    ],
    dependencies: [
        .package(name: "mirror", path: "../.."),
    ],
    targets: [
        .executableTarget(
            name: "FuzzATTDecode",
            dependencies: [.product(name: "ATTStack", package: "mirror")]
        ),
    ],
    swiftLanguageModes: [.v6]
)

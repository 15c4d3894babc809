// swift-tools-version:6.0
// The front door in use: a program of its own that embeds the stack (GATTPeer) by path, as an application would.
import PackageDescription

let package = Package(
    name: "embed",
    dependencies: [.package(name: "mirror", path: "../..")],
    targets: [
        .executableTarget(name: "embed", dependencies: [.product(name: "GATTPeer", package: "mirror"), .product(name: "Mirror", package: "mirror")]),
    ],
    swiftLanguageModes: [.v6]
)

// swift-tools-version:6.0
// The mirror BLE host tool: raw ATT over L2CAP CID 4 on Linux, a GATT client, and the `mirror` CLI.
import PackageDescription

/// tools/link, by absolute path (a linker search path; the build's working directory is not the package's).
let staticLinkScripts = String(#filePath.dropLast("Package.swift".count)) + "tools/link"

let package = Package(
    name: "mirror",
    products: [
        .executable(name: "mirror", targets: ["MirrorCLI"]),
        .executable(name: "att-bench", targets: ["ATTBench"]),
        .executable(name: "bearer-e2e", targets: ["BearerE2E"]),
        .executable(name: "gatt-bench", targets: ["GATTBench"]),
        .library(name: "ATTStack", targets: ["ATTStack"]),
        .library(name: "LinkCore", targets: ["LinkCore"]),
        .library(name: "LinuxBluetooth", targets: ["LinuxBluetooth"]),
        .library(name: "Bonding", targets: ["Bonding"]),
        .library(name: "GATTPeer", targets: ["GATTPeer"]),
        .library(name: "CaptureReader", targets: ["CaptureReader"]),
        .library(name: "GATTVocabulary", targets: ["GATTVocabulary"]),
        .library(name: "GATTClient", targets: ["GATTClient"]),
        .library(name: "GATTServer", targets: ["GATTServer"]),
        .library(name: "Mirror", targets: ["Mirror"]),
        .executable(name: "mirror-sim", targets: ["MirrorSim"]),
        .executable(name: "hostile-peer", targets: ["HostilePeerTool"]),
        .library(name: "LinkCeiling", targets: ["LinkCeiling"]),
        .library(name: "LineEditor", targets: ["LineEditor"]),
        .executable(name: "lineedit-demo", targets: ["LineEditDemo"]),
        .executable(name: "mirror-docs", targets: ["MirrorDocs"]),
    ],
    targets: [
        // Every syscall, ioctl and libcap call, over BlueZ's own headers (libbluetooth-dev).
        .target(
            name: "CBlueZSocket",
            linkerSettings: [.linkedLibrary("cap")]
        ),
        // The Attribute Protocol's codec (Core Spec Vol 3 Part F): PDUs, opcodes, error codes, UUIDs, MTU arithmetic.
        // Pure Swift: no C, no I/O, no Foundation.
        .target(name: "ATTStack"),
        // The radio's ceiling for ATT writes on an LE link (PHY, data length, interval, MTU; Vol 6 Part B):
        // pure arithmetic, no I/O, no Foundation (docs/LINK-CEILING.md).
        .target(name: "LinkCeiling"),
        // What the engine needs of a link, without sockets: the ATTTransport seam and its errors (typed Errno), the
        // link's EventLoop (epoll, eventfd, timerfd), the one clock (GATTClock), the one lock type, threads.
        .target(name: "LinkCore", dependencies: ["ATTStack", "CBlueZSocket"]),
        // The Linux I/O under it: the socket bearer, HCI, btsnoop, capabilities and privilege, signals.
        .target(name: "LinuxBluetooth", dependencies: ["ATTStack", "LinkCore", "CBlueZSocket", "JSON"]),
        // This machine rather than a link: `mirror doctor`'s findings, the XDG base directories (history, GATT
        // cache) and the local IPv4 addresses (the upload URL).
        .target(name: "HostEnvironment", dependencies: ["LinkCore", "LinuxBluetooth", "CBlueZSocket", "JSON"]),
        // Bonds without bluetoothd: the SMP keys per adapter and peer in private JSON files under $XDG_STATE_HOME,
        // private address resolution (ah, Vol 3 Part H §2.2.2, over CCrypto's AES-128), bluetoothd's info files read only.
        .target(name: "Bonding", dependencies: ["ATTStack", "CBlueZSocket", "CCrypto", "HostEnvironment", "JSON", "LinkCore", "LinuxBluetooth"]),
        // The one JSON mechanism: an ordered JSON value, its writer and parser (--json output, reports, profiles).
        .target(name: "JSON", dependencies: ["ATTStack"]),
        // The GATT vocabulary below client and server (Vol 3 Part G): services, characteristics, properties,
        // descriptors, security levels, the Database Hash (§7.3, over CCrypto's AES-CMAC). No I/O.
        .target(name: "GATTVocabulary", dependencies: ["ATTStack", "CCrypto", "LinkCore"]),
        .target(name: "GATTClient", dependencies: ["ATTStack", "GATTVocabulary", "LinkCore", "CCrypto"]),
        // The front door: connect to a peer (unix: or LE) on a link loop of its own, then discovery with the cache
        // (its files: FileDatabaseStore), names, reads, writes and subscriptions, every method on the link's loop.
        // A btsnoop capture read (H4 and the Linux monitor), its LE connections and the ATT on each: `mirror clone --from`.
        .target(name: "CaptureReader", dependencies: ["ATTStack"]),
        .target(name: "GATTPeer", dependencies: ["ATTStack", "CaptureReader", "GATTVocabulary", "GATTClient", "Bonding", "HostEnvironment", "JSON", "LinkCore", "LinuxBluetooth"]),
        // `mirror check`: the rule catalogue, the prober that drives one ATT bearer PDU by PDU, the findings.
        .target(name: "Conformance", dependencies: ["ATTStack", "GATTVocabulary", "LinkCore", "JSON"]),
        // The benches' measurement core: the write rounds through the GATT client on the link's loop (warm-up, size
        // probe, several bearers), the bare loop's turns, the figures, the series and the radio's ceiling; the
        // stopwatch and the median. It prints nothing: `mirror bench` and gatt-bench word the figures.
        .target(name: "BenchMeasurement", dependencies: ["ATTStack", "BareATT", "GATTClient", "JSON", "LinkCeiling", "LinkCore", "LinuxBluetooth"]),
        // The benches' baseline: one bare ATT client loop (send, poll, receive; no engine) and one plain peer.
        .target(name: "BareATT", dependencies: ["ATTStack", "LinkCore", "LinuxBluetooth", "CBlueZSocket"]),
        // One attribute database and ATT server (Vol 3 Part F §3.4) for the simulator, the hostile peer and the tests.
        .target(name: "GATTServer", dependencies: ["ATTStack", "LinkCore", "LinuxBluetooth", "GATTVocabulary"]),
        // The `mirror` executable: only main.swift; everything else is MirrorCommandLine. A release build links the
        // Swift runtime and FoundationEssentials statically (no toolchain libraries at run time, no ICU); debug
        // builds stay dynamic, as the test bundles that link this target with XCTest must.
        // tools/link's linker scripts make its -lstdc++, -lbluetooth, -lcap and -lz (and -static-libgcc its unwinder)
        // the static archives, so that only libc and libm are loaded at start (tools/link/README).
        .executableTarget(name: "MirrorCLI", dependencies: ["MirrorCommandLine"],
                          linkerSettings: [.unsafeFlags(["-static-stdlib", "-l_FoundationCollections", "-l_FoundationCShims", "-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
                                                         "-L", staticLinkScripts, "-Xclang-linker", "-static-libgcc"], .when(configuration: .release))]),
        .executableTarget(name: "ATTBench", dependencies: ["ATTStack", "LinkCore", "LinuxBluetooth", "CAllocCounter"], path: "tools/att-bench",
                          exclude: ["CAllocCounter"]),
        // Counts heap allocations for att-bench by interposing malloc; linked into att-bench only.
        .target(name: "CAllocCounter", path: "tools/att-bench/CAllocCounter"),
        // The CLI: its commands, the session, parsing, formatting and the error table (main.swift calls it).
        .target(name: "MirrorCommandLine", dependencies: ["GATTPeer", "CaptureReader", "Bonding", "Conformance", "BenchMeasurement", "GATTVocabulary", "GATTClient", "ATTStack", "HostEnvironment", "LinkCore", "LinuxBluetooth", "Mirror", "CBlueZSocket", "JSON", "BareATT", "LinkCeiling", "LineEditor"]),
        // libmicrohttpd (Debian libmicrohttpd-dev) behind fixed-argument C wrappers; loaded by dlopen on first use.
        .target(name: "CMicroHTTPD"),
        // libcrypto's SHA-256, AES-CMAC and one-block AES-128 (Debian libssl-dev) and zlib's CRC-32 (zlib1g-dev) behind fixed-argument C wrappers;
        // libcrypto is loaded by dlopen on first use (neither it nor libmicrohttpd is loaded at `mirror`'s start).
        .target(name: "CCrypto"),
        .target(name: "CZlib", linkerSettings: [.linkedLibrary("z")]),
        // The mirror's profile, scan and Wi-Fi procedures, and the upload receiver: what `mirror scan` calls.
        .target(name: "Mirror", dependencies: ["GATTVocabulary", "ATTStack", "HostEnvironment", "LinkCore", "LinuxBluetooth", "GATTClient", "CMicroHTTPD", "CCrypto", "CZlib", "JSON", "CBlueZSocket"]),
        // libedit (Debian libedit-dev, BSD) through its readline-compatible callback interface, for LineEditor
        // (the terminal's width comes from CBlueZSocket, where every ioctl is); loaded by dlopen when an editor opens.
        .target(name: "CLibEdit", dependencies: ["CBlueZSocket"]),
        // The terminal's one owner for an interactive tool: line editing, history, completion, printing above the
        // line being typed; plain lines off a terminal.
        .target(name: "LineEditor", dependencies: ["ATTStack", "CLibEdit", "CBlueZSocket", "HostEnvironment", "LinkCore", "LinuxBluetooth"]),
        // LineEditor with a fixed word list and a notification every 300 ms: what LineEditorTests drive in a pty.
        .executableTarget(name: "LineEditDemo", dependencies: ["LineEditor"], path: "tools/lineedit-demo"),
        // The man page and the bash completion generated from the command table: what mirror-docs prints (not `mirror`).
        .target(name: "MirrorReference", dependencies: ["MirrorCommandLine", "Mirror"]),
        // Prints the man page and the bash completion generated from the command table (tools/mirror-docs.sh).
        .executableTarget(name: "MirrorDocs", dependencies: ["MirrorCommandLine", "MirrorReference"], path: "tools/mirror-docs"),
        // The simulated mirror: GATTServer with the mirror's state machine and faults.
        .target(name: "MirrorSimulator", dependencies: ["GATTVocabulary", "ATTStack", "LinkCore", "LinuxBluetooth", "GATTClient", "GATTServer", "GATTPeer", "Mirror", "JSON", "LinkCeiling"]),
        .executableTarget(name: "MirrorSim", dependencies: ["MirrorSimulator", "GATTPeer", "GATTServer", "JSON", "Mirror", "GATTClient", "ATTStack", "LinkCore", "LinuxBluetooth"], path: "tools/mirror-sim"),
        // Exercises the socket bearer end to end (listen/echo, connect/check) in the Bluetooth VM and here.
        .executableTarget(name: "BearerE2E", dependencies: ["ATTStack", "HostEnvironment", "LinkCore", "LinuxBluetooth", "JSON", "TestSupport"], path: "tools/bearer-e2e"),
        // The GATT client's cost over a bare socket loop (Write Request round trip, Write Command throughput).
        .executableTarget(name: "GATTBench", dependencies: ["BenchMeasurement", "GATTClient", "ATTStack", "LinkCore", "LinuxBluetooth", "BareATT", "JSON", "CBlueZSocket"], path: "tools/gatt-bench"),
        // A hostile ATT server (one scenario per way of breaking the protocol) as a library for tests, and the
        // `hostile-peer` executable that listens on unix:PATH (tests of the CLI, the VM).
        .target(name: "HostilePeer", dependencies: ["ATTStack", "LinkCore", "LinuxBluetooth", "GATTServer"]),
        .executableTarget(name: "HostilePeerTool", dependencies: ["HostilePeer", "ATTStack", "LinkCore", "LinuxBluetooth"], path: "tools/hostile-peer", exclude: ["README.md"]),
        // What every test target shares (no XCTest, so the fuzzers link it too): the scripted peer in the style of
        // BlueZ's unit/test-gatt.c, the manual clock, the subprocess runner.
        .target(name: "TestSupport", dependencies: ["ATTStack", "LinkCore", "LinuxBluetooth", "GATTClient", "CBlueZSocket"]),
        .testTarget(name: "ATTStackTests", dependencies: ["TestSupport", "ATTStack"]),
        .testTarget(name: "LinkCeilingTests", dependencies: ["LinkCeiling"]),
        .testTarget(name: "CaptureReaderTests", dependencies: ["CaptureReader"]),
        .testTarget(name: "HostEnvironmentTests", dependencies: ["TestSupport", "HostEnvironment", "LinkCore", "LinuxBluetooth", "JSON"]),
        // The demo in a real pseudo-terminal (Python's pty) and over a pipe.
        .testTarget(name: "LineEditorTests", dependencies: ["TestSupport", "LinkCore", "LineEditor", "LineEditDemo"], exclude: ["pty-drive.py"]),
        .testTarget(name: "BondingTests", dependencies: ["Bonding", "TestSupport", "ATTStack", "HostEnvironment", "JSON", "LinkCore", "LinuxBluetooth"]),
        .testTarget(name: "LinuxBluetoothTests", dependencies: ["TestSupport", "LinkCore", "LinuxBluetooth", "ATTStack", "CBlueZSocket", "JSON"]),
        .testTarget(name: "BareATTTests", dependencies: ["BareATT", "ATTStack", "LinkCore", "LinuxBluetooth", "CBlueZSocket"]),
        .testTarget(name: "GATTClientTests", dependencies: ["GATTVocabulary", "TestSupport", "GATTClient", "GATTServer", "ATTStack", "LinkCore", "LinuxBluetooth"]),
        .testTarget(name: "GATTServerTests", dependencies: ["GATTVocabulary", "TestSupport", "GATTServer", "GATTClient", "ATTStack", "LinkCore", "LinuxBluetooth"]),
        .testTarget(name: "MirrorTests", dependencies: ["GATTPeer", "GATTVocabulary", "TestSupport", "Mirror", "MirrorSimulator", "GATTClient", "ATTStack", "LinkCore", "LinuxBluetooth", "JSON"]),
        // Parsers and formatting directly; the built `mirror` as a subprocess against a peer on unix: sockets
        // (GATTServer's host here, and `mirror-sim`).
        .testTarget(name: "MirrorCLITests", dependencies: ["BenchMeasurement", "BareATT", "CaptureReader", "Conformance", "GATTPeer", "GATTVocabulary", "TestSupport", "MirrorCommandLine", "MirrorReference", "MirrorCLI", "MirrorSim", "ATTStack", "LinkCore", "LinuxBluetooth",
                                                         "GATTClient", "GATTServer", "Mirror", "JSON", "LinkCeiling"]),
        // The client against the hostile peer, fd and memory cycles, and the audit of every named wait.
        .testTarget(name: "ReliabilityTests", dependencies: ["TestSupport", "JSON", "HostilePeer", "Conformance", "GATTServer", "GATTClient", "ATTStack", "LinkCore", "LinuxBluetooth", "Mirror", "MirrorSimulator",
                                                           "MirrorCLI", "HostilePeerTool"]),
    ],
    swiftLanguageModes: [.v6]
)

// Test scaffolding is not a product. tools/fuzz is a package of its own (libFuzzer supplies main) whose engine target
// plays its peer with HostilePeer and ManualClock: its run.sh sets MIRROR_FUZZ_PRODUCTS=1 to have them published.
if Context.environment["MIRROR_FUZZ_PRODUCTS"] == "1" {
    package.products += [
        .library(name: "TestSupport", targets: ["TestSupport"]),
        .library(name: "HostilePeer", targets: ["HostilePeer"]),
    ]
}

// swift-tools-version:6.0
import CompilerPluginSupport
import PackageDescription

let package = Package(
    name: "KVSession",
    // Linux is the target (OpenBLAS from apt); on Apple platforms `Synchronization` sets the floor.
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "LMRuntime", targets: ["LMRuntime"]),
        .library(name: "LMSession", targets: ["LMSession"]),
        .library(name: "ResponseCache", targets: ["ResponseCache"]),
        .executable(name: "kvbench", targets: ["kvbench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.1"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/swiftlang/swift-syntax", from: "603.0.1"),
    ],
    targets: [
        // OpenBLAS through pkg-config; Debian/Ubuntu ship it as libopenblas-dev.
        .systemLibrary(
            name: "COpenBLAS",
            pkgConfig: "openblas",
            providers: [.apt(["libopenblas-dev"])]
        ),
        // The elementwise kernels with AVX2+FMA bodies chosen at run time (no build flags needed).
        .target(name: "CKernels"),
        // Atomic writes into directories other processes may share (both disk tiers).
        .target(name: "AtomicFiles"),
        .target(name: "LMRuntime", dependencies: ["COpenBLAS", "CKernels", "AtomicFiles", .product(name: "Crypto", package: "swift-crypto")]),
        // @Generable and @Guide (guided generation), built with swift-syntax.
        .macro(
            name: "LMSessionMacros",
            dependencies: [
                .product(name: "SwiftSyntaxMacros", package: "swift-syntax"),
                .product(name: "SwiftCompilerPlugin", package: "swift-syntax"),
            ]
        ),
        .target(name: "LMSession", dependencies: ["LMRuntime", "ResponseCache", "LMSessionMacros"]),
        .target(name: "ResponseCache", dependencies: ["AtomicFiles", .product(name: "Crypto", package: "swift-crypto")]),
        .target(name: "KVScenarios", dependencies: ["LMSession", "LMRuntime", "ResponseCache"]),
        // Fuzzing: the entry points (replayed by the tests), libFuzzer's weak bridge, and the driver.
        .target(name: "FuzzTargets", dependencies: ["LMRuntime", "LMSession", "ResponseCache", "LMTestSupport"]),
        .target(name: "CFuzzShim"),
        .executableTarget(name: "kvfuzz", dependencies: ["FuzzTargets", "CFuzzShim"], path: "Fuzz/kvfuzz"),
        .executableTarget(
            name: "kvbench",
            dependencies: [
                "LMRuntime", "LMSession", "KVScenarios", "ResponseCache",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Benchmarks/kvbench"
        ),
        .target(name: "LMTestSupport", dependencies: ["LMRuntime", "LMSession"], path: "Tests/LMTestSupport"),
        .testTarget(
            name: "LMRuntimeTests",
            dependencies: [
                "LMRuntime", "LMTestSupport", "CKernels", "COpenBLAS",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ]
        ),
        .testTarget(name: "LMSessionTests", dependencies: ["LMSession", "LMRuntime", "LMTestSupport", "ResponseCache"]),
        .testTarget(name: "ResponseCacheTests", dependencies: ["ResponseCache"]),
        .testTarget(
            name: "LMSessionMacrosTests",
            dependencies: ["LMSessionMacros", .product(name: "SwiftSyntaxMacrosTestSupport", package: "swift-syntax")]
        ),
        .testTarget(name: "FuzzTargetsTests", dependencies: ["FuzzTargets", "LMTestSupport"]),
        .testTarget(name: "KVBenchTests", dependencies: ["LMTestSupport", "KVScenarios", "LMSession", "kvbench"]),
        .testTarget(name: "ReadmeTests", dependencies: ["LMSession", "LMRuntime", "ResponseCache"]),
    ],
    swiftLanguageModes: [.v6]
)

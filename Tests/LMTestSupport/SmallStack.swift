import Foundation

/// Runs `body` on a thread with the stack of a Dispatch or Swift concurrency thread on Apple's
/// platforms (512 KiB) and waits for it to finish. Under AddressSanitizer or ThreadSanitizer, whose
/// instrumentation makes every frame larger (both overflowed 512 KiB at the deepest union), the
/// thread gets four times that.
public func onSmallStack(_ body: @escaping @Sendable () -> Void) {
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        body()
        done.signal()
    }
    thread.stackSize = (isSanitized ? 4 : 1) * 512 << 10
    thread.start()
    done.wait()
}

/// Whether the process runs under AddressSanitizer or ThreadSanitizer (a runtime's entry point is loaded).
public let isSanitized = ["__asan_init", "__tsan_init"].contains { (name: String) in dlsym(dlopen(nil, RTLD_NOW), name) != nil }

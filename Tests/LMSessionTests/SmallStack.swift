import Foundation

/// Runs `body` on a thread with the stack of a Dispatch or Swift concurrency thread on Apple's
/// platforms (512 KiB) and waits for it to finish. Under AddressSanitizer, whose redzones make
/// every frame several times larger, the thread gets four times that.
func onSmallStack(_ body: @escaping @Sendable () -> Void) {
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        body()
        done.signal()
    }
    thread.stackSize = (isAddressSanitized ? 4 : 1) * 512 << 10
    thread.start()
    done.wait()
}

/// Whether the process runs under AddressSanitizer (its runtime's entry point is loaded).
let isAddressSanitized = dlsym(dlopen(nil, RTLD_NOW), "__asan_init") != nil

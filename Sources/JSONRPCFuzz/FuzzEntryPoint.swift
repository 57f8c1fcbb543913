/// libFuzzer's entry point: one input, every check of ``FuzzCase``.
///
/// Built with `--sanitize=fuzzer` (and `-DJSONRPC_FUZZER`, see `.ci/fuzz`)
/// libFuzzer supplies `main` and calls this for each input it makes; a
/// failed check stops the process, which libFuzzer reports as a crash and
/// saves the input. Built normally, ``ReplayCommand`` calls it instead.
///
/// - Parameters:
///   - data: the input's bytes; may be `nil` when `size` is 0.
///   - size: the input's length.
/// - Returns: 0, as libFuzzer requires (the input may enter the corpus).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSONRPC(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    FuzzCase(input: input).run()
    return 0
}

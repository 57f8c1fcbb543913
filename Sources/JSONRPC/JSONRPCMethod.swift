/// A method of a ``JSONRPCServer``: the request (already validated) and the
/// transport's context in; its answer now, or a promise to call back once
/// (Envoy's filters have the same two answers: continue, or stop iteration
/// until a callback resumes them). Methods are called for notifications
/// too; what they answer is then dropped. No method starts a task: one that
/// waits on I/O answers ``JSONRPCMethodOutcome/later(_:)`` and calls back
/// from whatever completes it.
///
/// A method may also have a form for the usual call that reads its params
/// as text, with no JSON tree (``Fast``): an optimisation only, which must
/// answer what ``call`` answers for the same params, or give up before
/// doing anything.
public struct JSONRPCMethod<Context: Sendable>: Sendable {
    /// The method.
    public typealias Call = @Sendable (_ request: JSONRPCRequest, _ context: Context) -> JSONRPCMethodOutcome

    /// The method's form for the usual single call, read with no JSON tree:
    /// the text of its params object (already checked as JSON) and the
    /// transport's context in. It answers as ``Call`` does, or gives `nil`
    /// before doing anything, and the call then goes the tree's way, which
    /// words every refusal. So it may only answer what the tree's way would
    /// answer for the same params.
    public typealias Fast = @Sendable (_ params: UnsafeBufferPointer<UInt8>, _ context: Context) -> JSONRPCMethodOutcome?

    let call: Call
    let fast: Fast?

    /// A method answering `call`, with `fast` as its pre-parse form when
    /// it has one.
    public init(_ call: @escaping Call, fast: Fast? = nil) {
        self.call = call
        self.fast = fast
    }

    /// A method that always answers at once.
    public static func answering(_ answer: @escaping @Sendable (_ request: JSONRPCRequest, _ context: Context) -> Result<JSONValue, JSONRPCError>) -> Self {
        Self { request, context in .answer(answer(request, context)) }
    }
}

/// What a method (``JSONRPCMethod``) answered.
public enum JSONRPCMethodOutcome: Sendable {
    /// Begins the rest of the method; calls `answer` exactly once, from any
    /// thread, possibly before returning.
    public typealias Later = @Sendable (_ answer: @escaping @Sendable (Result<JSONValue, JSONRPCError>) -> Void) -> Void

    /// The outcome, without waiting.
    case answer(Result<JSONValue, JSONRPCError>)
    /// The outcome comes later, by callback: for a call that waits on I/O
    /// its own loop finishes (a Redis reply, an upstream answer, a
    /// deadline).
    case later(Later)
}

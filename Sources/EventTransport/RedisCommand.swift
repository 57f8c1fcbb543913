/// One Redis command's arguments, written into one buffer: two allocations
/// per command however many arguments it has (a shared-tier lookup sends
/// three keys per identifier), where an array of arrays costs one per
/// argument. hiredis copies it into its output buffer when it is sent.
public struct RedisCommand: Sendable {
    // Stored as internal names, `@usableFromInline`, so the writing methods
    // can be `@inlinable`: a shared-tier miss writes a few keys per
    // identifier from another module, and each write through an opaque
    // call (a closure) cost retains and releases of everything it touched.
    @usableFromInline var storage: [UInt8]
    @usableFromInline var argumentLengths: [Int]
    /// Where the argument being written in parts starts, while one is.
    @usableFromInline var openedAt: Int?

    /// Every argument's bytes, one after the other.
    public var bytes: [UInt8] { storage }
    /// Each argument's length, in order.
    public var lengths: [Int] { argumentLengths }

    /// The most elements its reply may hold (an `MGET` of n keys: n; a
    /// command answered by a status, a string or a number: 0). A reply
    /// with more is refused from its header, before any element is read,
    /// and the connection is dropped.
    public var replyElements = 0

    /// An empty command, with room for about `bytes` bytes of `arguments`
    /// arguments.
    public init(reservingBytes bytes: Int = 64, arguments: Int = 4) {
        self.storage = []
        self.storage.reserveCapacity(bytes)
        self.argumentLengths = []
        self.argumentLengths.reserveCapacity(arguments)
    }

    /// A command of these arguments.
    public init(_ arguments: [[UInt8]]) {
        self.init(reservingBytes: arguments.reduce(0) { $0 + $1.count }, arguments: arguments.count)
        for argument in arguments { append(argument) }
    }

    /// How many arguments it has (the command's name included).
    public var count: Int { argumentLengths.count }

    /// Appends one argument.
    @inlinable
    public mutating func append(_ argument: some Collection<UInt8>) {
        precondition(openedAt == nil, "an argument is being written")
        storage.append(contentsOf: argument)
        argumentLengths.append(argument.count)
    }

    /// Appends one argument: the text's UTF-8.
    @inlinable
    public mutating func append(_ argument: String) {
        precondition(openedAt == nil, "an argument is being written")
        let start = storage.count
        storage.append(contentsOf: argument.utf8)
        argumentLengths.append(storage.count - start)
    }

    /// Appends one argument: the integer in decimal.
    @inlinable
    public mutating func append(_ value: Int64) {
        beginArgument()
        appendDecimal(value)
        endArgument()
    }

    // MARK: An argument written in parts

    /// Starts an argument written in parts (a key made of a prefix, a
    /// scope and an identifier, with no buffer of its own): the parts
    /// appended until ``endArgument()`` are its bytes.
    @inlinable
    public mutating func beginArgument() {
        precondition(openedAt == nil, "an argument is being written")
        openedAt = storage.count
    }

    /// How many bytes the command has so far (where the next byte goes).
    public var byteCount: Int { storage.count }

    /// Starts an argument written in parts with a copy of the bytes at
    /// `range` (a part of an argument already written): keys of one scope
    /// share their head, written once.
    @inlinable
    public mutating func beginArgument(repeating range: Range<Int>) {
        precondition(range.lowerBound >= 0 && range.upperBound <= storage.count, "bytes already written")
        beginArgument()
        let start = storage.count
        storage.append(contentsOf: repeatElement(0, count: range.count))
        storage.withUnsafeMutableBufferPointer { buffer in
            guard let base = buffer.baseAddress, !range.isEmpty else { return }
            (base + start).update(from: base + range.lowerBound, count: range.count)
        }
    }

    /// Appends one argument per text of `texts` after the first: each the
    /// bytes at `head` (a part of an argument already written), then the
    /// text's UTF-8. Keys of one scope share their head: a shared-tier
    /// miss writes a run of them per identifier list, and the head is
    /// copied from a buffer of its own, the texts read in place (a
    /// per-key argument written in parts cost more in reference counts
    /// than in bytes).
    @inlinable
    public mutating func appendArguments(repeating head: Range<Int>, eachAfterTheFirst texts: [String]) {
        precondition(openedAt == nil, "an argument is being written")
        precondition(head.lowerBound >= 0 && head.upperBound <= storage.count, "bytes already written")
        guard texts.count > 1 else { return }
        // The head's copy is on the stack (a key's head is tens of bytes):
        // an array of its own was one malloc per run of keys, three per
        // shared-tier miss.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: head.count) { headBuffer in
            _ = headBuffer.initialize(from: storage[head])
            let headBytes = UnsafeBufferPointer(headBuffer)
            texts.withUnsafeBufferPointer { texts in
                for index in 1 ..< texts.count {
                    let start = storage.count
                    storage.append(contentsOf: headBytes)
                    if texts[index].utf8.withContiguousStorageIfAvailable({ storage.append(contentsOf: $0) }) == nil {
                        storage.append(contentsOf: texts[index].utf8)
                    }
                    argumentLengths.append(storage.count - start)
                }
            }
        }
    }

    /// Ends the argument ``beginArgument()`` started.
    @inlinable
    public mutating func endArgument() {
        guard let start = openedAt else { preconditionFailure("no argument is being written") }
        argumentLengths.append(storage.count - start)
        openedAt = nil
    }

    /// Appends bytes to the argument being written.
    @inlinable
    public mutating func appendPart(_ part: some Collection<UInt8>) {
        storage.append(contentsOf: part)
    }

    /// Appends a string's UTF-8 to the argument being written.
    @inlinable
    public mutating func appendPart(_ part: String) {
        storage.append(contentsOf: part.utf8)
    }

    /// Appends a static string's UTF-8 to the argument being written.
    @inlinable
    public mutating func appendPart(_ part: StaticString) {
        storage.append(contentsOf: UnsafeBufferPointer(start: part.utf8Start, count: part.utf8CodeUnitCount))
    }

    /// Appends one byte to the argument being written.
    @inlinable
    public mutating func appendPart(byte: UInt8) {
        storage.append(byte)
    }

    /// Appends an integer in decimal to the argument being written, with
    /// no string made.
    @inlinable
    public mutating func appendDecimal(_ value: Int64) {
        if value < 0 { storage.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        let start = storage.count
        repeat {
            storage.append(UInt8(ascii: "0") + UInt8(magnitude % 10))
            magnitude /= 10
        } while magnitude > 0
        storage[start...].reverse()
    }

    /// The bytes of argument `index`.
    public func argumentBytes(_ index: Int) -> [UInt8] {
        let start = argumentLengths[..<index].reduce(0, +)
        return Array(storage[start ..< start + argumentLengths[index]])
    }

    /// The same command with its first two arguments replaced (`EVALSHA
    /// sha` by `EVAL script`).
    package func replacingFirstTwo(with first: [UInt8], _ second: [UInt8]) -> RedisCommand {
        precondition(argumentLengths.count >= 2, "a command of two arguments at least")
        let rest = argumentLengths[0] + argumentLengths[1]
        var replaced = RedisCommand(reservingBytes: storage.count - rest + first.count + second.count, arguments: argumentLengths.count)
        replaced.append(first)
        replaced.append(second)
        replaced.storage.append(contentsOf: storage[rest...])
        replaced.argumentLengths.append(contentsOf: argumentLengths[2...])
        replaced.replyElements = replyElements
        return replaced
    }
}

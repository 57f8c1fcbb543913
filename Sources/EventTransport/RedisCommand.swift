/// One Redis command's arguments, written into one buffer: two allocations
/// per command however many arguments it has (a shared-tier lookup sends
/// three keys per identifier), where an array of arrays costs one per
/// argument. hiredis copies it into its output buffer when it is sent.
public struct RedisCommand: Sendable {
    /// Every argument's bytes, one after the other.
    private(set) var bytes: [UInt8]
    /// Each argument's length, in order.
    private(set) var lengths: [Int]
    /// Where the argument being written (``appendArgument(_:)``) starts.
    private var openedAt: Int?
    /// The most elements its reply may hold (an `MGET` of n keys: n; a
    /// command answered by a status, a string or a number: 0). A reply
    /// with more is refused from its header, before any element is read,
    /// and the connection is dropped.
    public var replyElements = 0

    /// An empty command, with room for about `bytes` bytes of `arguments`
    /// arguments.
    public init(reservingBytes bytes: Int = 64, arguments: Int = 4) {
        self.bytes = []
        self.bytes.reserveCapacity(bytes)
        self.lengths = []
        self.lengths.reserveCapacity(arguments)
    }

    /// A command of these arguments.
    public init(_ arguments: [[UInt8]]) {
        self.init(reservingBytes: arguments.reduce(0) { $0 + $1.count }, arguments: arguments.count)
        for argument in arguments { append(argument) }
    }

    /// How many arguments it has (the command's name included).
    public var count: Int { lengths.count }

    /// Appends one argument.
    public mutating func append(_ argument: some Collection<UInt8>) {
        precondition(openedAt == nil, "an argument is being written")
        bytes.append(contentsOf: argument)
        lengths.append(argument.count)
    }

    /// Appends one argument: the text's UTF-8.
    public mutating func append(_ argument: String) {
        precondition(openedAt == nil, "an argument is being written")
        let start = bytes.count
        bytes.append(contentsOf: argument.utf8)
        lengths.append(bytes.count - start)
    }

    /// Appends one argument: the integer in decimal.
    public mutating func append(_ value: Int64) {
        appendArgument { $0.appendDecimal(value) }
    }

    /// Appends one argument written in parts by `write` (a key made of a
    /// prefix, a scope and an identifier, with no buffer of its own).
    public mutating func appendArgument(_ write: (inout ArgumentWriter) -> Void) {
        precondition(openedAt == nil, "an argument is being written")
        let start = bytes.count
        var writer = ArgumentWriter(bytes: bytes)
        bytes = []
        write(&writer)
        bytes = writer.bytes
        lengths.append(bytes.count - start)
    }

    /// The bytes of argument `index`.
    public func argumentBytes(_ index: Int) -> [UInt8] {
        let start = lengths[..<index].reduce(0, +)
        return Array(bytes[start ..< start + lengths[index]])
    }

    /// The same command with its first two arguments replaced (`EVALSHA
    /// sha` by `EVAL script`).
    package func replacingFirstTwo(with first: [UInt8], _ second: [UInt8]) -> RedisCommand {
        precondition(lengths.count >= 2, "a command of two arguments at least")
        let rest = lengths[0] + lengths[1]
        var replaced = RedisCommand(reservingBytes: bytes.count - rest + first.count + second.count, arguments: lengths.count)
        replaced.append(first)
        replaced.append(second)
        replaced.bytes.append(contentsOf: bytes[rest...])
        replaced.lengths.append(contentsOf: lengths[2...])
        replaced.replyElements = replyElements
        return replaced
    }

    /// Writes the bytes of one argument.
    public struct ArgumentWriter {
        fileprivate var bytes: [UInt8]

        /// Appends bytes.
        public mutating func append(_ part: some Collection<UInt8>) {
            bytes.append(contentsOf: part)
        }

        /// Appends a string's UTF-8.
        public mutating func append(_ part: String) {
            bytes.append(contentsOf: part.utf8)
        }

        /// Appends a static string's UTF-8.
        public mutating func append(_ part: StaticString) {
            bytes.append(contentsOf: UnsafeBufferPointer(start: part.utf8Start, count: part.utf8CodeUnitCount))
        }

        /// Appends one byte.
        public mutating func append(byte: UInt8) {
            bytes.append(byte)
        }

        /// Appends an integer in decimal, with no string made.
        public mutating func appendDecimal(_ value: Int64) {
            if value < 0 { bytes.append(UInt8(ascii: "-")) }
            var magnitude = value.magnitude
            var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
                (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            var count = 0
            withUnsafeMutableBytes(of: &digits) { buffer in
                repeat {
                    buffer[count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                    magnitude /= 10
                    count += 1
                } while magnitude > 0
                for index in stride(from: count - 1, through: 0, by: -1) { bytes.append(buffer[index]) }
            }
        }
    }
}

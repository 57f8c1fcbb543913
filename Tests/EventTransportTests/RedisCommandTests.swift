import EventTransport
import Testing

/// A command's arguments in one buffer: what each argument holds, read back.
@Suite("Redis command buffer")
struct RedisCommandTests {
    static func arguments(_ command: RedisCommand) -> [String] {
        (0..<command.count).map { String(decoding: command.argumentBytes($0), as: UTF8.self) }
    }

    @Test func argumentsKeepTheirBoundariesIncludingEmptyOnes() {
        var command = RedisCommand()
        command.append("SET")
        command.append(Array("key".utf8))
        command.append("")
        command.beginArgument()
        command.appendPart("a")
        command.appendPart(byte: UInt8(ascii: ":"))
        command.appendPart("b" as StaticString)
        command.appendDecimal(-12)
        command.endArgument()
        #expect(Self.arguments(command) == ["SET", "key", "", "a:b-12"])
        #expect(RedisCommand([Array("PING".utf8), []]).count == 2)
    }

    @Test func anArgumentCanBeginWithACopyOfBytesAlreadyWritten() {
        var command = RedisCommand(reservingBytes: 4, arguments: 1)
        command.append("MGET")
        command.beginArgument()
        let start = command.byteCount
        command.appendPart("head:")
        let head = start ..< command.byteCount
        command.appendPart("first")
        command.endArgument()
        for tail in ["second", "", "a-third-one-long-enough-to-grow-the-buffer-more-than-once"] {
            command.beginArgument(repeating: head)
            command.appendPart(tail)
            command.endArgument()
        }
        command.beginArgument(repeating: head.lowerBound ..< head.lowerBound)
        command.endArgument()
        #expect(Self.arguments(command) == ["MGET", "head:first", "head:second", "head:", "head:a-third-one-long-enough-to-grow-the-buffer-more-than-once", ""])
    }

    /// A run of keys sharing a head: one argument per text after the first
    /// (the first is written by hand, as the shared tier does), texts that
    /// are not native UTF-8 (bridged, or with non-ASCII) included.
    @Test func aRunOfArgumentsRepeatsAHeadBeforeEachText() {
        var command = RedisCommand(reservingBytes: 4, arguments: 1)
        command.append("MGET")
        command.beginArgument()
        let start = command.byteCount
        command.appendPart("v1:p:app:DE:-:")
        let head = start ..< command.byteCount
        let texts = ["first", "", "zweiter-Schlüssel", String(repeating: "x", count: 300), "é"]
        command.appendPart(texts[0])
        command.endArgument()
        command.appendArguments(repeating: head, eachAfterTheFirst: texts)
        command.appendArguments(repeating: head, eachAfterTheFirst: ["only the first: nothing written"])
        #expect(Self.arguments(command) == ["MGET"] + texts.map { "v1:p:app:DE:-:" + $0 })
        command.append("after")
        #expect(Self.arguments(command).last == "after")
    }

    /// What goes on the wire: the protocol's form of the arguments, byte
    /// for byte, and a NUL that is not sent.
    @Test func theWireFormIsRESPWithATrailingNUL() {
        var command = RedisCommand()
        command.append("SET")
        command.append("k")
        command.append("")
        command.append(Array(repeating: UInt8(ascii: "v"), count: 1234))
        command.append([0, 13, 10, 36])
        let expected = "*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n$1234\r\n" + String(repeating: "v", count: 1234) + "\r\n$4\r\n\u{0}\r\n$\r\n"
        #expect(RedisConnection.wire(command) == Array(expected.utf8) + [0])
        #expect(RedisConnection.wire(RedisCommand()) == Array("*0\r\n".utf8) + [0])
    }

    @Test(arguments: [Int64(0), 7, 10, 1000, -1, -250, Int64.max, Int64.min])
    func integersAreWrittenInDecimal(value: Int64) {
        var command = RedisCommand()
        command.append(value)
        #expect(Self.arguments(command) == [String(value)])
    }

    @Test func evalshaBecomesEvalWithTheSameKeysAndArguments() {
        let script = RedisScript("return 1")
        var command = RedisCommand.evalsha(script, keyCount: 2)
        command.append("k1")
        command.append("k2")
        command.append(Int64(42))
        #expect(Self.arguments(command) == ["EVALSHA", String(decoding: script.sha1, as: UTF8.self), "2", "k1", "k2", "42"])
        let eval = command.replacingFirstTwo(with: Array("EVAL".utf8), script.body)
        #expect(Self.arguments(eval) == ["EVAL", "return 1", "2", "k1", "k2", "42"])
    }
}

import JSONRPC
import ProductsDomain

/// The checks made on one fuzz input; any failure stops the process with a
/// message naming the broken promise.
///
/// When the input parses, the value must survive the writer: the text it
/// writes parses back to an equal value and is written again byte for byte,
/// the token calls of ``JSONWriter`` write the same bytes as the tree, and
/// equal values are exactly those that write equal bytes. Whether it parses
/// or not, ``JSONRPCServer`` must answer it as ``ExpectedAnswer`` predicts
/// from the specification, in JSON that parses.
struct FuzzCase {
    /// The raw input.
    let input: [UInt8]

    /// Runs every check.
    func run() {
        let document: JSONValue?
        do {
            document = try JSONParser.parse(input)
        } catch {
            require(error.offset >= 0 && error.offset <= input.count, "an error offset of \(error.offset) in \(input.count) bytes")
            document = nil
        }
        if let document {
            checkAccepted(document)
        }
        FuzzEngine.check(body: input, document: document)
        checkUpstreamBodyReading()
        checkParamsReading()
        checkSharedTierReading()
        checkTraceContextReading()
    }

    // MARK: - products.fetch params

    /// The input as a call's params: the tree-free reader may give up, but
    /// params it returns must be exactly what the tree's parse returns.
    private func checkParamsReading() {
        let limits = FetchProductsLimits(maxIdentifiers: 4)
        guard let fast = input.withUnsafeBufferPointer({ FetchProductsParams.read(json: $0, limits: limits) }) else { return }
        guard let value = try? JSONParser.parse(input), case .object(let members) = value,
              let tree = try? FetchProductsParams.parse(.object(members), limits: limits) else {
            fail("the tree-free params reader accepted params the tree refuses: \(Self.shown(input))")
        }
        require(fast == tree, "the tree-free params reader read other params than the tree: \(Self.shown(input))")
    }

    // MARK: - The upstream body

    /// The input as an upstream `200` body: the one-pass reader may give up
    /// (the tree-based reading then decides), but a page it returns must be
    /// exactly the tree's, and it never accepts what the tree refuses. The
    /// transcoding reader answers exactly when the one-pass reader does,
    /// with the bytes of that page's products encoded.
    private func checkUpstreamBodyReading() {
        let transcoded = UpstreamBodyReader.encodedProducts(from: input)
        guard let fast = UpstreamBodyReader.page(from: input) else {
            require(transcoded == nil, "the transcoding reader accepted an upstream body the one-pass reader gives up on: \(Self.shown(input))")
            return
        }
        require(transcoded == fast.encodedProducts, "the transcoding reader wrote other products than encoding the page: \(Self.shown(input))")
        let tree: UpstreamProductsPage
        do {
            tree = try UpstreamProductsPage.parseViaTree(input)
        } catch {
            fail("the one-pass reader accepted an upstream body the tree refuses (\(error.message)): \(Self.shown(input))")
        }
        require(fast == tree, "the one-pass reader read another page than the tree: \(Self.shown(input))")
    }

    // MARK: - Parser and writer

    private func checkAccepted(_ value: JSONValue) {
        // Outside strings only ASCII is JSON; inside, only valid UTF-8.
        require(String(validating: input, as: UTF8.self) != nil, "accepted input that is not UTF-8")

        let text = value.serialized()
        let again: JSONValue
        do {
            again = try JSONParser.parse(text)
        } catch {
            fail("the writer's text does not parse (\(error)): \(Self.shown(text))")
        }
        require(again == value, "the writer's text parses to another value: \(Self.shown(text))")
        require(again.hashValue == value.hashValue, "a value and its round trip hash differently: \(Self.shown(text))")
        require(again.serialized() == text, "writing the round trip changes the text: \(Self.shown(text))")
        require(EncodedJSON(value).bytes == text, "EncodedJSON differs from serialized()")

        var writer = JSONWriter()
        Self.write(value, to: &writer)
        require(writer.isComplete, "the token calls left the writer incomplete")
        require(writer.bytes == text, "the token calls wrote \(Self.shown(writer.bytes)), the tree \(Self.shown(text))")

        Self.checkEqualityIsTextual(value)

        // One more level of nesting is refused exactly at the limit.
        let depth = Self.depth(of: value)
        let limit = JSONParser.Limits().maxDepth
        require(depth <= limit, "accepted a depth of \(depth) over the limit of \(limit)")
        let wrapped = try? JSONParser.parse([UInt8(ascii: "[")] + input + [UInt8(ascii: "]")])
        if depth == limit {
            require(wrapped == nil, "accepted a depth of \(depth + 1) when wrapped")
        } else {
            require(wrapped == .array([value]), "the input wrapped in [] parses to another value")
        }
        // A complete document followed by anything but space is refused.
        require((try? JSONParser.parse(input + [UInt8(ascii: "x")])) == nil, "accepted a byte after the document")
    }

    /// Writes `value` with the writer's token calls; every third array
    /// element and member goes through `value(_:)` whole, so both paths meet.
    private static func write(_ value: JSONValue, to writer: inout JSONWriter) {
        switch value {
        case .null:
            writer.null()
        case .bool(let flag):
            writer.bool(flag)
        case .number(let text):
            if let integer = Int(text), String(integer) == text {
                writer.integer(integer)
            } else {
                writer.number(text)
            }
        case .string(let text):
            writer.string(text)
        case .array(let elements):
            writer.beginArray()
            for (index, element) in elements.enumerated() {
                if index % 3 == 2 { writer.value(element) } else { write(element, to: &writer) }
            }
            writer.endArray()
        case .object(let object):
            writer.beginObject()
            for (index, member) in object.enumerated() {
                writer.key(member.key)
                if index % 3 == 2 { writer.value(member.value) } else { write(member.value, to: &writer) }
            }
            writer.endObject()
        case .encoded(let json):
            writer.encoded(json)
        }
    }

    /// ``JSONValue``'s promise: two values are equal exactly when they
    /// serialize to the same bytes (and then hash the same). Checked on the
    /// elements of every array and the values of every object, pairwise
    /// among the first few.
    private static func checkEqualityIsTextual(_ value: JSONValue) {
        let siblings: [JSONValue]
        switch value {
        case .array(let elements):
            siblings = elements
        case .object(let object):
            siblings = object.map(\.value)
        case .null, .bool, .number, .string, .encoded:
            return
        }
        for first in siblings.indices.prefix(8) {
            for second in siblings.indices.prefix(8) where first < second {
                let equal = siblings[first] == siblings[second]
                let sameText = siblings[first].serialized() == siblings[second].serialized()
                require(equal == sameText, "\(siblings[first]) and \(siblings[second]): equal \(equal), same text \(sameText)")
                if equal {
                    require(siblings[first].hashValue == siblings[second].hashValue, "equal values hash differently")
                }
            }
        }
        for sibling in siblings {
            checkEqualityIsTextual(sibling)
        }
    }

    /// 0 for a scalar, one more than the deepest element for a container.
    static func depth(of value: JSONValue) -> Int {
        switch value {
        case .array(let elements):
            1 + (elements.map(depth(of:)).max() ?? 0)
        case .object(let object):
            1 + (object.map { depth(of: $0.value) }.max() ?? 0)
        case .null, .bool, .number, .string, .encoded:
            0
        }
    }

    /// At most 200 bytes of `bytes`, for a message.
    static func shown(_ bytes: [UInt8]) -> String {
        let text = String(decoding: bytes.prefix(200), as: UTF8.self)
        return bytes.count > 200 ? "\(text)… (\(bytes.count) bytes)" : text
    }
}

/// Stops the process when `condition` is false: a broken promise of the
/// parser, the writer or the engine.
func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fail(message()) }
}

/// Stops the process with `message`.
func fail(_ message: String) -> Never {
    fatalError("jsonrpc-fuzz: \(message)")
}

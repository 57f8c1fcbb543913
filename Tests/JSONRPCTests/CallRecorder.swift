/// Names of the methods called, in call order.
actor CallRecorder {
    private(set) var calls: [String] = []

    func record(_ method: String) {
        calls.append(method)
    }
}

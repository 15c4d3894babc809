// Padding and trimming as Foundation's NSString did them, in the standard library alone: the modules `mirror`
// links use FoundationEssentials (no ICU), which has neither.

extension String {
    /// Cut or padded with spaces to `length` UTF-16 units, as `padding(toLength: length, withPad: " ",
    /// startingAt: 0)` was: for the columns of text tables.
    public func padded(toLength length: Int) -> String {
        let units = utf16.count
        if units < length { return self + String(repeating: " ", count: length - units) }
        return units == length ? self : String(decoding: Array(utf16.prefix(length)), as: UTF16.self)
    }

    /// Without the whitespace and newlines at either end (`trimmingCharacters(in: .whitespacesAndNewlines)`).
    public var trimmingWhitespace: String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }) else { return "" }
        let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })!
        return String(scalars[first...last])
    }
}

// The project's one sanitizer for text that came from a peer or the network (a User Description, an SSID, an
// advertised name, an HTTP request line) before it reaches a terminal: what OpenSSH does for a server's text.

/// Text made safe for a terminal: every character that could move the cursor, change the title, clear the screen
/// or reorder what is shown is replaced by a visible escape (`\x1b`, `\x9b`, `\u202e`); everything else is kept.
public enum TerminalText {
    /// Whether a scalar must not reach a terminal raw: C0 controls (U+0000-U+001F), DEL, C1 controls
    /// (U+0080-U+009F: U+009B is CSI, U+009D OSC on terminals that take 8-bit controls), the Unicode bidi
    /// controls (ALM, LRM, RLM, LRE..RLO, LRI..PDI) and the line and paragraph separators (U+2028, U+2029).
    public static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F, 0x80...0x9F: return true
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: return true
        case 0x2028, 0x2029: return true
        default: return false
        }
    }

    /// `s` with every unsafe scalar written as `\xHH` (below U+0100) or `\uHHHH`: `"\e]0;x\a"` prints as
    /// `\x1b]0;x\x07`. A string with nothing unsafe comes back unchanged (the common case costs one scan).
    public static func escaped(_ s: String) -> String {
        guard s.unicodeScalars.contains(where: isUnsafe) else { return s }
        var out = String.UnicodeScalarView()
        for scalar in s.unicodeScalars {
            guard isUnsafe(scalar) else { out.append(scalar); continue }
            let code = scalar.value < 0x100
                ? "\\x" + ATTHex.fixed(UInt64(scalar.value), digits: 2, lowercase: true)
                : "\\u" + ATTHex.fixed(UInt64(scalar.value), digits: 4, lowercase: true)
            out.append(contentsOf: code.unicodeScalars)
        }
        return String(out)
    }

    /// `s` with every unsafe scalar replaced by `replacement` (one character for one scalar): the "text" column
    /// beside a value's hex, where the hex already shows the exact bytes.
    public static func masked(_ s: String, with replacement: Unicode.Scalar = ".") -> String {
        guard s.unicodeScalars.contains(where: isUnsafe) else { return s }
        return String(String.UnicodeScalarView(s.unicodeScalars.map { isUnsafe($0) ? replacement : $0 }))
    }
}

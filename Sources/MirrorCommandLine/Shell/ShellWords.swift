// A shell line into words, as a POSIX shell splits simple words: blanks separate, '...' is literal, "..." keeps
// blanks (\" and \\ inside), a backslash outside quotes takes the next character as it is, and an unquoted # that
// starts a word begins a comment. No expansion of any kind.

/// Splits `line` into words; an unterminated quote or a trailing backslash is bad usage.
public func splitShellWords(_ line: String) throws(UsageError) -> [String] {
    var words: [String] = []
    var current = ""
    var inWord = false
    var chars = Array(line)[...]
    while let c = chars.popFirst() {
        switch c {
        case " ", "\t", "\r", "\n":
            if inWord { words.append(current) }
            current = ""
            inWord = false
        case "#" where !inWord:
            return words
        case "'":
            inWord = true
            guard let end = chars.firstIndex(of: "'") else {
                throw UsageError("unterminated ' quote in \"\(line)\"", token: line)
            }
            current += String(chars[..<end])
            chars = chars[(end + 1)...]
        case "\"":
            inWord = true
            var closed = false
            while let d = chars.popFirst() {
                if d == "\"" { closed = true; break }
                if d == "\\", let next = chars.first, next == "\"" || next == "\\" {
                    current.append(next)
                    chars = chars.dropFirst()
                } else {
                    current.append(d)
                }
            }
            guard closed else { throw UsageError("unterminated \" quote in \"\(line)\"", token: line) }
        case "\\":
            guard let next = chars.popFirst() else {
                throw UsageError("a backslash ends \"\(line)\" with nothing after it", token: line)
            }
            inWord = true
            current.append(next)
        default:
            inWord = true
            current.append(c)
        }
    }
    if inWord { words.append(current) }
    return words
}

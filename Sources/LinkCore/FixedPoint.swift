// The one fixed-point formatter: printf's "%*.*f" in the C locale (through the C shim), for every decimal figure a
// command prints (bench tables, check timestamps).
import CBlueZSocket

/// `value` with `decimals` decimals, right-aligned in `width` columns: printf's "%*.*f" in the C locale ("  0.093"),
/// as `String(format:)` gave it.
public func fixedPoint(_ value: Double, decimals: Int, width: Int = 0) -> String {
    var buffer = [CChar](repeating: 0, count: 64)
    let n = Int(cbz_format_fixed(&buffer, buffer.count, value, Int32(width), Int32(decimals)))
    if n >= buffer.count {
        buffer = [CChar](repeating: 0, count: n + 1)
        _ = cbz_format_fixed(&buffer, buffer.count, value, Int32(width), Int32(decimals))
    }
    return String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

// Short names for ATTStack's one hex formatter, kept for ATTEngine.swift and GATTClient.swift (both being
// rewritten elsewhere); new code calls ATTHex directly.
import ATTStack

/// "0x0012"
func hex4(_ v: UInt16) -> String { ATTHex.handle(v) }

/// "0x0D"
func hex2(_ v: UInt8) -> String { ATTHex.byte(v) }

/// "12 34 AB"
func hexBytes(_ bytes: some Sequence<UInt8>) -> String { ATTHex.string(bytes, separator: " ", uppercase: true) }

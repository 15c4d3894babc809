// One check for the PDUs whose list is made of elements of one fixed length, each starting with handles:
// Find Information Response (§3.4.3.2), Read By Type Response (§3.4.4.2), Read By Group Type Response (§3.4.4.10).

extension ArraySlice where Element == UInt8 {
    /// Throws unless the list is not empty, is a whole number of `elementLength`-byte elements, and every element's
    /// handle at offset 0 (and at `secondHandleOffset`, when given) is not 0x0000. Allocates nothing.
    @inlinable
    func attValidateFixedList(opcode: ATTOpcode, field: ATTPDUField, elementLength: Int,
                              secondHandleOffset: Int? = nil) throws(ATTDecodeError) {
        guard !isEmpty else { throw ATTDecodeError(opcode: opcode, field: field, problem: .emptyList) }
        guard count % elementLength == 0 else {
            throw ATTDecodeError(opcode: opcode, field: field,
                                 problem: .oddListLength(listLength: count, elementLength: elementLength))
        }
        var i = startIndex
        while i < endIndex {
            guard attLE16(at: i) != 0, secondHandleOffset.map({ attLE16(at: i + $0) != 0 }) ?? true else {
                throw ATTDecodeError(opcode: opcode, field: field, problem: .zeroHandle)
            }
            i += elementLength
        }
    }
}

// mirror shell --pair: the shell's pairing agent asks through the line editor (Core Spec 5.4 Vol 3 Part H §2.3.5:
// a passkey shown or typed, a Numeric Comparison confirmed): its questions' words, over LineEditor's EditorQuestions.
import ATTStack
import LineEditor
import LinkCore
import LinuxBluetooth

extension EditorQuestions {
    /// The shell agent's answers: `passkey` when given (off a terminal, the only way); else, on a terminal, asked
    /// at the prompt within `limit`; else refused, saying to give --passkey. `say` prints a line (above the line
    /// being typed, on a terminal). Just Works the kernel leaves to this host (Confirm_Hint 1, Vol 3 Part H
    /// §2.3.5.1) is asked at the prompt, refused off a terminal unless `acceptJustWorks`.
    func pairingPrompts(passkey: UInt32?, acceptJustWorks: Bool = false, say: @escaping @Sendable (String) -> Void) -> PairingPrompts {
        PairingPrompts(
            confirm: { [self] value, peer in
                if let passkey { return passkey == value }
                guard isTerminal else {
                    say("pair: cannot ask whether \(peer) shows \(sixDigits(value)): standard input is not a terminal; give mirror shell --pair --passkey \(sixDigits(value)) to accept that value")
                    return false
                }
                do {
                    let line = try ask("pair: does \(peer) show \(sixDigits(value))? [y/N] ")
                    return line.trimmingSpaces.lowercased().hasPrefix("y")
                } catch {
                    say("pair: \(error): the comparison is declined")
                    return false
                }
            },
            passkey: { [self] peer in
                if let passkey { return passkey }
                // Off a terminal the agent's report says the refusal and names --passkey.
                guard isTerminal else { return nil }
                do {
                    let line = try ask("pair: enter the passkey \(peer) shows: ")
                    do throws(UsageError) { return try parsePasskey(String(line.filter { !$0.isWhitespace })) } catch {
                        say("pair: \(TerminalText.escaped(error.message)): the pairing is refused")
                        return nil
                    }
                } catch {
                    say("pair: \(error): the pairing is refused")
                    return nil
                }
            },
            display: { value, peer in say("pair: type \(sixDigits(value)) on \(peer)") },
            justWorks: { [self] peer in
                if acceptJustWorks { return true }
                // Off a terminal the agent's report says the refusal and the ways out.
                guard isTerminal else { return false }
                do {
                    let line = try ask("pair: \(peer) asks to pair with Just Works (no MITM protection) though this host did not ask for it, or holds a bond with it: accept? [y/N] ")
                    return line.trimmingSpaces.lowercased().hasPrefix("y")
                } catch {
                    say("pair: \(error): Just Works is declined")
                    return false
                }
            })
    }
}

private extension String {
    var trimmingSpaces: String { String(drop(while: { $0 == " " })) }
}

// mirror mtu TARGET [--mtu N]: exchange MTU and print the result.
import ATTStack
import JSON

let mtuCommand = Command(CommandSpec(
    name: "mtu",
    summary: "exchange the ATT MTU and show what was agreed",
    discussion: """
        Sends Exchange MTU Request with the client Rx MTU (--mtu, default 517) and prints the server's Rx MTU \
        and the result, min(both), never below 23; a peer that answers Request Not Supported stays at 23. \
        Also prints the value budgets that follow: MTU-3 for writes and notifications, MTU-5 for Prepare \
        Write parts, MTU-1 for Read Blob parts, each at most 512 (the longest attribute value, Core Spec \
        Vol 3 Part F §3.2.9: at MTU 517 a write carries 512 bytes, not 514). With --bearers N (2-5) it lists the bearers opened: CID 4 \
        and each Enhanced ATT bearer with its channel IDs, its MTU (the ECRED channel's, no Exchange MTU on \
        it) and its credits where the kernel reports them, and why a bearer was not opened.
        """,
    positionals: [PositionalSpec("TARGET", help: "the device address or unix:PATH")],
    globals: GlobalOptionName.connection,
    examples: [
        ("mirror mtu unix:/tmp/mirror-sim.sock", "offer 517 and show the result"),
        ("mirror mtu unix:/tmp/mirror-sim.sock --mtu 100", "offer 100"),
        ("mirror mtu unix:/tmp/mirror-sim.sock --bearers 3", "also open two Enhanced ATT bearers and list the three"),
    ]
)) { inv in
    let target = try inv.target()
    let session = try await Session.open(target, inv)
    defer { session.close() }
    let exchange = session.mtuExchange
    let mtu = session.peer.mtu
    // The budgets as ATTMTU computes them (MTU-3, MTU-5, MTU-1, Core Spec Vol 3 Part F §3.4; at most 512, §3.2.9).
    let write = ATTMTU.writeValueLimit(mtu), prepare = ATTMTU.prepareWritePartLimit(mtu), blob = ATTMTU.readPartLimit(mtu)
    if inv.global.json {
        inv.console.json(JSONValue.object([
            ("clientRxMTU", .int(exchange.clientRxMTU)),
            ("serverRxMTU", exchange.serverRxMTU.map { .int($0) } ?? .null),
            ("mtu", .int(mtu)),
            ("writeBudget", .int(write)), ("prepareWriteBudget", .int(prepare)), ("readBlobBudget", .int(blob)),
            ("link", session.linkJSON()),
        ] + (session.bearersJSON().map { [("bearers", $0)] } ?? [])))
    } else {
        let server = exchange.serverRxMTU.map(String.init) ?? "not given (the peer does not support Exchange MTU)"
        inv.console.out("client Rx MTU \(exchange.clientRxMTU), server Rx MTU \(server): MTU \(mtu)")
        inv.console.out("budgets: write/notify \(write) bytes, prepare write part \(prepare), read blob part \(blob)")
        for line in session.bearerText() { inv.console.out(line) }
    }
    return .success
}
